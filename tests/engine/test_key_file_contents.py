"""Options that name a file or folder whose content decides a number enter the run's checkpoint key
by content, not by path (issue: "every input that decides a number belongs to its key").

For each such option: a run killed after two checkpointed batches, then
* the file's content changed at the same path: the resume is refused, as for other model weights,
  naming the key field (``files.task.scoring.<option>``) and the file;
* the original content at another path: the resume is accepted, as for moved model weights, and
  ends with the uninterrupted run's numbers.
"""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

import medimg_bench as mb
from medimg_bench._hashing import MISSING, FileHashCache, content_digest, content_digests
from medimg_bench.engine.plan import files_identity
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter
from medimg_bench.tasks.report import ReportGenerationTask
from tests.metrics.text._tiny_bert import WORDS, write_tiny_bert

REPORTS = {
    "CXR1_IM-1": "the lungs are clear. no acute process.",
    "CXR2_IM-2": "small left pleural effusion.",
    "CXR3_IM-3": "heart size normal. mild edema.",
    "CXR4_IM-4": "no acute process.",
    "CXR5_IM-5": "mild edema. small pleural effusion.",
}
ANSWERS = {
    "CXR1_IM-1": "the lungs are clear.",
    "CXR2_IM-2": "small pleural effusion.",
    "CXR3_IM-3": "heart size normal. no acute process.",
    "CXR4_IM-4": "no acute process. the lungs are clear.",
    "CXR5_IM-5": "mild edema.",
}


class Scripted(GenerativeAdapter):
    """Stored answers; ``crash_at`` raises KeyboardInterrupt (a killed job) on that call."""

    backend = "scripted"

    def __init__(self, crash_at: int | None = None) -> None:
        super().__init__(name="scripted")
        self.calls, self.crash_at = 0, crash_at

    def identity(self) -> dict:
        return {"answers": sorted(ANSWERS.items())}

    def _generate(self, requests):
        self.calls += 1
        if self.calls == self.crash_at:
            raise KeyboardInterrupt
        return [GenerationResponse(text=ANSWERS[r.sample_id], prompt=r.user) for r in requests]


def test_content_digest_is_the_content_wherever_it_lies(tmp_path):
    cache = FileHashCache(tmp_path / "hashes.sqlite")
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "weights.bin").write_bytes(b"\x00" * 1000)
    a = content_digest(folder, cache=cache)
    assert a.startswith("tree-sha256:") and content_digest(folder / "config.json", cache=cache).startswith("sha256:")
    shutil.copytree(folder, tmp_path / "elsewhere")
    assert content_digest(tmp_path / "elsewhere", cache=cache) == a  # names relative to the folder
    (folder / "sub" / "weights.bin").write_bytes(b"\x00" * 999 + b"\x01")  # one byte
    assert content_digest(folder, cache=cache) != a
    (folder / "sub" / "weights.bin").write_bytes(b"\x00" * 1000)
    (folder / "sub" / "weights.bin").rename(folder / "sub" / "weights2.bin")  # a name
    assert content_digest(folder, cache=cache) != a
    assert content_digest(tmp_path / "nothing", cache=cache) == MISSING
    assert content_digests({"a": folder / "config.json", "b": None}, cache=cache) == {
        "a": content_digest(folder / "config.json", cache=cache)}


def _dataset(root: Path):
    ann = {"train": [], "val": [], "test": [
        {"id": sid, "report": rep, "image_path": [f"{sid}/0.png"], "split": "test"} for sid, rep in REPORTS.items()]}
    root.mkdir(parents=True, exist_ok=True)
    (root / "annotation.json").write_text(json.dumps(ann))
    for k, sid in enumerate(REPORTS):
        (root / "images" / sid).mkdir(parents=True)
        Image.fromarray(np.full((12, 10), 20 * k, np.uint8)).save(root / "images" / sid / "0.png")
    return mb.create_dataset("iu_xray", root=root, split="test")


def _annotation(text: str, salt: str = "") -> dict:
    words = [w for w in text.lower().replace(".", " ").split() if w in WORDS]
    return {"entities": {str(i + 1): {"tokens": w, "label": "OBS-DP" if (len(w) + len(salt)) % 2 else "ANAT-DP",
                                      "relations": [["modify", str(i + 2)]] if i + 1 < len(words) else []}
                         for i, w in enumerate(words)}}


def _bert_base(path: Path) -> Path:
    """bert-base-uncased's layout, tiny: config and vocabulary (what ``chexbert_bert_path`` names)."""
    from transformers import BertConfig, BertTokenizer

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizer(str(path / "vocab.txt"), model_max_length=64).save_pretrained(str(path))
    BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=64).save_pretrained(str(path))
    return path


def _chexbert_state(file: Path, seed: int) -> Path:
    """A tiny ``chexbert.pth`` for :func:`_bert_base`'s config (seeded)."""
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(seed)
    state = {f"module.bert.{k}": v for k, v in BertModel(cfg).state_dict().items()}
    for i in range(14):
        head = torch.nn.Linear(16, 4 if i < 13 else 2)
        state[f"module.linear_heads.{i}.weight"], state[f"module.linear_heads.{i}.bias"] = head.weight, head.bias
    file.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model_state_dict": state}, file)
    return file


@pytest.fixture()
def fake_radgraph(monkeypatch):
    """The ``radgraph`` package's interface, annotating from the model folder's ``weights.th``
    text (its content decides the labels): the package itself is not installed here."""
    class RadGraph:
        def __init__(self, model_type, model_cache_dir, batch_size=1, cuda=None):
            self.salt = (Path(model_cache_dir) / model_type / "weights.th").read_text()

        def __call__(self, texts):
            return {str(i): _annotation(t, self.salt) for i, t in enumerate(texts)}

    monkeypatch.setitem(sys.modules, "radgraph", types.SimpleNamespace(RadGraph=RadGraph))


def _radgraph_folder(root: Path, salt: str) -> Path:
    (root / "radgraph").mkdir(parents=True, exist_ok=True)
    (root / "radgraph" / "config.json").write_text("{}")
    (root / "radgraph" / "weights.th").write_text(salt)
    return root


def _retrain_bert(path: Path) -> None:
    from transformers import BertModel

    model = BertModel.from_pretrained(str(path))
    torch.manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(str(path))


def _annotations(file: Path, salt: str) -> Path:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps({t: _annotation(t, salt) for t in [*REPORTS.values(), *ANSWERS.values()]}))
    return file


def _vocab_edit(path: Path) -> None:
    (path / "vocab.txt").write_text((path / "vocab.txt").read_text().replace("lungs", "lung"))


# option -> (build what it names under a folder: (path, the other scoring options), change the
# content at that path, the column whose numbers it decides)
CASES = {
    "bertscore_model": (lambda d: (write_tiny_bert(_mkdir(d / "bert")), {"bertscore_num_layers": 2}),
                        _retrain_bert, "bertscore"),
    "chexbert_checkpoint": (lambda d: (_chexbert_state(d / "chexbert.pth", 1),
                                       {"chexbert_bert_path": str(_bert_base(d / "bert"))}),
                            lambda p: _chexbert_state(p, 2), "semb_score"),
    "chexbert_bert_path": (lambda d: (_bert_base(d / "bert"),
                                      {"chexbert_checkpoint": str(_chexbert_state(d / "chexbert.pth", 1))}),
                           _vocab_edit, "semb_score"),
    "radgraph_annotations": (lambda d: (_annotations(d / "ann.json", ""), {}),
                             lambda p: _annotations(p, "x"), "radgraph_combined"),
    "radgraph_model_cache_dir": (lambda d: (_radgraph_folder(d / "radgraph_models", ""), {}),
                                 lambda p: (p / "radgraph" / "weights.th").write_text("x"), "radgraph_combined"),
}


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _task(option: str, path: Path, extra: dict) -> ReportGenerationTask:
    return ReportGenerationTask(scoring={"name": "rexrank", option: str(path), **extra})


def _run(option, path, extra, ds, ckpt, crash_at=None):
    return mb.evaluate(Scripted(crash_at), ds, task=_task(option, path, extra), batch_size=1, progress=False,
                       n_resamples=10, checkpoint=ckpt, checkpoint_every=1)


@pytest.mark.parametrize("option", list(CASES))
def test_changed_content_at_the_same_path_is_refused_and_moved_content_resumes(option, tmp_path, fake_radgraph):
    build, change, column = CASES[option]
    ds = _dataset(tmp_path / "iu")
    path, extra = build(tmp_path / "models")
    reference = _run(option, path, extra, ds, None)
    assert column in reference.samples and reference.samples[column].notna().all()
    # the manifest holds the option's content digest even without a checkpoint (compare reads it)
    assert reference.manifest["option_files"] == files_identity(_task(option, path, extra), {})[0]
    assert reference.manifest["option_files"]["task"][f"scoring.{option}"].startswith(("sha256:", "tree-sha256:"))

    ckpt = tmp_path / "run" / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(option, path, extra, ds, ckpt, crash_at=3)
    assert len(list(ckpt.iterdir())) == 2

    moved = tmp_path / "elsewhere" / "copy" / path.name  # the same content at another path
    moved.parent.mkdir(parents=True)
    (shutil.copytree if path.is_dir() else shutil.copy2)(path, moved)
    change(path)
    assert content_digest(path) != content_digest(moved)
    kind = "tree-sha256" if path.is_dir() else "sha256"
    with pytest.raises(ValueError, match=rf"files\.task\.scoring\.{option}: saved '{kind}:") as err:
        _run(option, path, extra, ds, ckpt)
    message = str(err.value)
    assert "belongs to another run" in message and f"(files: scoring.{option} = {path}" in message
    assert "Resume with the same model, weights, options, files and data" in message

    resumed = _run(option, moved, extra, ds, ckpt)  # accepted, and the uninterrupted numbers
    assert resumed.manifest["option_files"] == reference.manifest["option_files"]  # content, not path
    assert resumed.summary["n_samples"] == reference.summary["n_samples"]
    cols = ["id", column]
    pd.testing.assert_frame_equal(resumed.samples[cols].reset_index(drop=True),
                                  reference.samples[cols].reset_index(drop=True), check_exact=True)


# -- metric options ------------------------------------------------------------------------------
def _green_reply(prompt: str) -> str:
    from medimg_bench.metrics.text.green import _MATCHED, _SIG

    # the numbers follow the prompt's text, so the template file decides them
    return f"[{_MATCHED}]:\n{len(prompt) % 3 + 1}. findings.\n\n[{_SIG}]:\n(a) False report: {len(prompt) % 2}.\n"


def _green_generate(prompts: list[str]) -> list[str]:
    return [_green_reply(p) for p in prompts]


def _ner(texts: list[str]) -> list[list[tuple[str, str]]]:
    return [[(w, "ANATOMY" if len(w) % 2 else "DISEASE") for w in t.replace(".", " ").split() if w in WORDS]
            for t in texts]


def _green_template(file: Path, extra: str) -> Path:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("Reference: {reference}\nCandidate: {candidate}\n" + extra)
    return file


# metric -> (build what its option names under a folder: (option, path, other options), change the
# content at that path)
METRIC_CASES = {
    "green": (lambda d: ("prompt_file", _green_template(d / "green.txt", ""), {"generate": _green_generate}),
              lambda p: _green_template(p, "Count the errors.")),
    "radgraph_f1": (lambda d: ("model_cache_dir", _radgraph_folder(d / "radgraph_models", ""), {}),
                    lambda p: (p / "radgraph" / "weights.th").write_text("x")),
    "ratescore": (lambda d: ("encoder_model", write_tiny_bert(_mkdir(d / "encoder")), {"ner": _ner}),
                  _retrain_bert),
}


def _metric_run(name, option, path, extra, ds, ckpt, crash_at=None):
    metrics = {"report_nlg": {}, name: {option: str(path), **extra}}
    return mb.evaluate(Scripted(crash_at), ds, task="report_generation", metrics=metrics, batch_size=1,
                       progress=False, n_resamples=10, checkpoint=ckpt, checkpoint_every=1)


@pytest.mark.parametrize("name", list(METRIC_CASES))
def test_metric_file_options_changed_are_refused_and_moved_resume(name, tmp_path, fake_radgraph):
    build, change = METRIC_CASES[name]
    ds = _dataset(tmp_path / "iu")
    option, path, extra = build(tmp_path / "models")
    reference = _metric_run(name, option, path, extra, ds, None)
    assert reference.summary["n_failed"] == 0 and name in reference.summary["metrics"]

    ckpt = tmp_path / "run" / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _metric_run(name, option, path, extra, ds, ckpt, crash_at=3)
    moved = tmp_path / "elsewhere" / path.name
    moved.parent.mkdir(parents=True)
    (shutil.copytree if path.is_dir() else shutil.copy2)(path, moved)
    change(path)
    field = rf"files\.metrics\.{name}\.{option}"
    with pytest.raises(ValueError, match=rf"{field}: saved '(tree-)?sha256:") as err:
        _metric_run(name, option, path, extra, ds, ckpt)
    assert f"(files: metrics.{name}.{option} = " in str(err.value)

    resumed = _metric_run(name, option, moved, extra, ds, ckpt)
    assert resumed.summary["metrics"][name] == reference.summary["metrics"][name]


def test_shards_scored_with_other_file_contents_are_not_merged(tmp_path, monkeypatch):
    from medimg_bench.engine.merge import merge_runs
    from medimg_bench.runs import run
    from tests.metrics.text.test_rexrank import _reports_folder

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    root = _reports_folder(tmp_path / "iu")
    ann = root / "ann.json"
    common = ["task=report_generation", "dataset=iu_xray", f"dataset.root={root}", "dataset.split=test",
              "dataset.options.layout=reports_csv", "metrics=report", "model=predictions",
              f"model.options.root={root}/preds.csv", "scoring=rexrank", f"scoring.radgraph_annotations={ann}",
              "bootstrap.n_resamples=10", "progress=false"]
    shards = [run([*common, f"shard={i}/2"], run_dir=tmp_path / f"s{i}").run_dir for i in range(2)]
    merge_runs(shards, tmp_path / "merged")  # the same file: merged
    table = json.loads(ann.read_text())  # other annotations at the same path: every entity relabelled
    ann.write_text(json.dumps({t: {"entities": {k: {**e, "label": "ANAT-DP"} for k, e in a["entities"].items()}}
                               for t, a in table.items()}))
    assert ann.read_text() != json.dumps(table)
    other = run([*common, "shard=1/2"], run_dir=tmp_path / "other").run_dir
    with pytest.raises(ValueError, match=r"files\.task\.scoring\.radgraph_annotations: saved 'sha256:"):
        merge_runs([shards[0], other], tmp_path / "m2")
