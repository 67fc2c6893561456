"""Fixtures for the report-text tokenizers and pipelines, produced by the reference code itself.

Run from the repository root (needs Java, pycocoevalcap, fast-bleu 0.0.90 (not a project
dependency: `pip install fast-bleu==0.0.90`), torchmetrics, pandas and the
three repositories below checked out at the named commits):

    python tools/make_report_text_fixtures.py --r2gen DIR --cvt2distilgpt2 DIR --cxr-report-metric DIR

* cuhksz-nlp/R2Gen at 5a2e63f6d8da670725b1926317b4bfd1393ec51b (``modules/tokenizers.py``,
  ``modules/metrics.py`` with the pycocoevalcap copy vendored in that repository; where a
  checkout lacks its large files, ``meteor-1.5.jar``, ``meteor/data/paraphrase-en.gz`` and
  ``stanford-corenlp-3.4.1.jar`` can be copied from pycocoevalcap 1.2: the git blob ids are the
  same, a833bc0, 88033c8 and 3cfa0a0);
* aehrc/cvt2distilgpt2 at 8cf4c8dcafe92ebf50d5a1d4ebbc7c3f0b7e2d87
  (``tools/dataset/iu_x_ray_chen_tokenizer.py``, ``tools/metrics/coco.py``);
* rajpurkarlab/CXR-Report-Metric at 9c9ecad39be6cb2be8e75be1d1c50ef8888a3e40
  (``CXRMetric/run_eval.py``: ``add_bleu_col``; its model-based imports are stubbed out, since
  only the BLEU column is computed here).

Each is imported and run; this script holds none of their code. It writes
``tests/metrics/text/data/ptb_pycocoevalcap.json.gz`` (pycocoevalcap 1.2's ``PTBTokenizer`` on
the seeded corpus of tests/metrics/text/ptb_corpus.py) and
``tests/metrics/text/data/report_pipelines.json.gz`` (the seeded report pairs of
tests/metrics/text/report_corpus.py through each pipeline): outputs only, with a SHA-256 of the
inputs so a changed generator is noticed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "metrics" / "text" / "data"
sys.path.insert(0, str(ROOT / "tests" / "metrics" / "text"))


def digest(texts: list[str]) -> str:
    return hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()


def ptb_fixture() -> dict:
    from ptb_corpus import corpus
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    sents = corpus(20000, seed=0)
    out = PTBTokenizer().tokenize({i: [{"caption": s}] for i, s in enumerate(sents)})
    return {"source": "pycocoevalcap 1.2 PTBTokenizer (stanford-corenlp-3.4.1.jar)",
            "corpus": "ptb_corpus.corpus(20000, seed=0)", "inputs_sha256": digest(sents),
            # the inputs are stored too: the corpus draws on other fixtures, which grow
            "inputs": sents, "tokens": [out[i][0] for i in range(len(sents))]}


def r2gen_part(r2gen_dir: Path, data: dict) -> dict:
    sys.path.insert(0, str(r2gen_dir))  # R2Gen's modules and its vendored pycocoevalcap
    for name in [m for m in sys.modules if m == "pycocoevalcap" or m.startswith("pycocoevalcap.")]:
        del sys.modules[name]
    from modules.metrics import compute_scores
    from modules.tokenizers import Tokenizer

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        ann = os.path.join(tmp, "annotation.json")
        with open(ann, "w") as fh:
            json.dump({"train": [{"report": r} for r in data["train"]]}, fh)
        for dataset, threshold, max_len in (("iu_xray", 3, 60), ("mimic_cxr", 10, 100)):
            tok = Tokenizer(types.SimpleNamespace(ann_path=ann, threshold=threshold, dataset_name=dataset))
            refs = [tok.decode(tok(r)[:max_len][1:]) for r in data["references"]]
            # hypotheses as an R2Gen model writes them: vocabulary words decoded from ids
            gens = [tok.decode(tok(g)[1:]) for g in data["generated"]]
            scores = compute_scores({i: [r] for i, r in enumerate(refs)}, {i: [g] for i, g in enumerate(gens)})
            out[dataset] = {
                "threshold": threshold, "max_seq_length": max_len,
                "vocabulary": sorted(tok.token2idx),
                "clean_references": [tok.clean_report(r) for r in data["references"]],
                "clean_generated": [tok.clean_report(g) for g in data["generated"]],
                "decoded_references": refs, "decoded_generated": gens,
                "compute_scores": {k: float(v) for k, v in scores.items()},
            }
    sys.path.remove(str(r2gen_dir))
    for name in [m for m in sys.modules if m.startswith(("pycocoevalcap", "modules"))]:
        del sys.modules[name]
    return out


def cvt_part(cvt_dir: Path, data: dict) -> dict:
    import pandas as pd

    sys.path.insert(0, str(cvt_dir))
    from tools.dataset.iu_x_ray_chen_tokenizer import TokenizerChen
    from tools.metrics.coco import COCOCaptionMetrics

    with tempfile.TemporaryDirectory() as tmp:
        ann = os.path.join(tmp, "annotation.json")
        with open(ann, "w") as fh:
            json.dump({"train": [{"report": r} for r in data["train"]]}, fh)
        tok = TokenizerChen(ann_path=ann, threshold=3)
        labels = [tok.decode(tok(r)[:60][1:]) for r in data["references"]]
        # torchmetrics >= 1.0 refuses the constructor's compute_on_step argument, so its score()
        # runs on a plain namespace holding the attributes __init__ and update() would set
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
        from pycocoevalcap.meteor.meteor import Meteor
        from pycocoevalcap.rouge.rouge import Rouge

        state = types.SimpleNamespace(
            metrics=["bleu", "cider", "meteor", "rouge"], save=False, save_individual_scores=True,
            save_bootstrapped_scores=False, exp_dir=tmp, bleu=Bleu(4), meteor=Meteor(), rouge=Rouge(),
            cider=Cider(), predictions=[g.replace("\n", " ") for g in data["generated"]], labels=labels,
            ids=list(range(len(labels))))  # a line break would stall the METEOR jar's line protocol
        scores = COCOCaptionMetrics.score(state)
        per = pd.read_csv(os.path.join(tmp, "individual_scores.csv"), index_col=0)
    sys.path.remove(str(cvt_dir))
    for name in [m for m in sys.modules if m.startswith("tools")]:
        del sys.modules[name]
    return {"labels": labels, "scores": {k: float(v) for k, v in scores.items()},
            "per_report": {c: per[c].astype(float).tolist() for c in per.columns}}


def rexrank_part(cxr_dir: Path, data: dict) -> dict:
    import pandas as pd

    sys.modules["config"] = types.SimpleNamespace(CHEXBERT_PATH="", RADGRAPH_PATH="")
    sys.modules["CXRMetric.radgraph_evaluate_model"] = types.SimpleNamespace(run_radgraph=None)
    sys.path.insert(0, str(cxr_dir))
    from CXRMetric import run_eval

    gt = pd.DataFrame({"study_id": range(len(data["references"])), "report": data["references"]})
    pred = pd.DataFrame({"study_id": range(len(data["generated"])), "report": data["generated"]})
    pred = run_eval.add_bleu_col(gt, pred)
    return {"bleu_score": pred["bleu_score"].astype(float).tolist()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--r2gen", type=Path, required=True)
    ap.add_argument("--cvt2distilgpt2", type=Path, required=True)
    ap.add_argument("--cxr-report-metric", type=Path, required=True)
    ap.add_argument("--skip-ptb", action="store_true")
    args = ap.parse_args()
    from report_corpus import report_corpus

    DATA.mkdir(parents=True, exist_ok=True)
    if not args.skip_ptb:
        with gzip.open(DATA / "ptb_pycocoevalcap.json.gz", "wt", encoding="utf-8") as fh:
            json.dump(ptb_fixture(), fh)
    data = report_corpus(2000, 2000, seed=0)
    fixture = {
        "corpus": "report_corpus.report_corpus(2000, 2000, seed=0)",
        "inputs_sha256": digest(data["train"] + data["generated"] + data["references"]),
        "commits": {"cuhksz-nlp/R2Gen": "5a2e63f6d8da670725b1926317b4bfd1393ec51b",
                    "aehrc/cvt2distilgpt2": "8cf4c8dcafe92ebf50d5a1d4ebbc7c3f0b7e2d87",
                    "rajpurkarlab/CXR-Report-Metric": "9c9ecad39be6cb2be8e75be1d1c50ef8888a3e40"},
        "r2gen": r2gen_part(args.r2gen, data),
        "cvt2distilgpt2": cvt_part(args.cvt2distilgpt2, data),
        "rexrank": rexrank_part(args.cxr_report_metric, data),
    }
    with gzip.open(DATA / "report_pipelines.json.gz", "wt", encoding="utf-8") as fh:
        json.dump(fixture, fh)


if __name__ == "__main__":
    main()
