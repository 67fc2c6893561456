"""CXR-Report-Metric's scores (``scoring=rexrank``): the RadCliQ composite against the authors'
columns of a real file and against CXR-Report-Metric's own combination code on a generated corpus
(tools/rexrank_reference.py), the per-report scorers' settings on tiny random models, and the
option checks."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.metrics.text.rexrank import (
    BERTSCORE_BASELINES,
    RADCLIQ_INPUTS,
    RexrankScorer,
    bertscore_baseline,
    radcliq,
    radgraph_combined_scores,
    rexrank_bertscore,
    rexrank_scores,
    semb_scores,
)
from tests.metrics.text._tiny_bert import WORDS, write_tiny_bert, write_tiny_chexbert

HERE = Path(__file__).parent
MOERAD = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "iu_xray_moerad_rexrank"


def _read_csv(path: Path) -> dict[str, list[str]]:
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {k: [r[k] for r in rows] for k in rows[0]}


def test_radcliq_reproduces_the_authors_columns_on_moerads_590_reports():
    path = MOERAD / "report_scores.csv"
    if not path.is_file():
        pytest.skip(f"{path} is absent (../shared/data not mounted)")
    cols = _read_csv(path)
    assert len(cols["bleu_score"]) == 590
    comp = {c: np.array(cols[c], dtype=np.float64) for c in RADCLIQ_INPUTS}
    # CXR-Report-Metric stored bertscore as a float32 tensor and printed it with float32's 8 digits:
    # read back as float32 it is the value their composite saw, and the result is the same bits
    comp32 = dict(comp, bertscore=np.array(cols["bertscore"], dtype=np.float32).astype(np.float64))
    for version in ("RadCliQ-v0", "RadCliQ-v1"):
        want = np.array(cols[version], dtype=np.float64)
        np.testing.assert_allclose(radcliq(comp32, version=version), want, rtol=0, atol=1e-12, err_msg=version)
        # taken as the printed decimal, bertscore is off by < 5e-9: RadCliQ by < 1e-7
        np.testing.assert_allclose(radcliq(comp, version=version), want, rtol=0, atol=1e-7, err_msg=version)
    # the README's means (4 decimals): RadCliQ-v0 2.3472, RadCliQ-v1 0.5000
    assert radcliq(comp32, version="RadCliQ-v0").mean() == pytest.approx(2.3472, abs=5e-5)
    assert radcliq(comp32, version="RadCliQ-v1").mean() == pytest.approx(0.5000, abs=5e-5)


def test_radcliq_equals_cxr_report_metrics_combination_code_on_a_generated_corpus():
    cols = _read_csv(HERE / "data" / "rexrank_radcliq_reference.csv.gz")
    x = np.column_stack([np.array(cols[c], dtype=np.float64) for c in RADCLIQ_INPUTS])
    assert len(x) >= 2000
    for version in ("RadCliQ-v0", "RadCliQ-v1"):
        want = np.array(cols[version], dtype=np.float64)
        # scikit-learn's matrix product sums in another order: equal to a few ulps
        np.testing.assert_allclose(radcliq(x, version=version), want, rtol=0, atol=1e-12, err_msg=version)
    # lower is better: a perfect report scores below an empty one, in both versions
    best, worst = radcliq(np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]), version="RadCliQ-v1")
    assert best < worst


def test_radcliq_rejects_bad_input():
    with pytest.raises(ValueError, match="missing \\['semb_score'\\]"):
        radcliq({"radgraph_combined": [0.1], "bertscore": [0.2], "bleu_score": [0.3]})
    with pytest.raises(ValueError, match="version"):
        radcliq(np.zeros((1, 4)), version="v2")
    with pytest.raises(ValueError, match="non-finite"):
        radcliq(np.array([[0.1, np.nan, 0.2, 0.3]]))
    with pytest.raises(ValueError, match="\\(N, 4\\)"):
        radcliq(np.zeros((2, 3)))


def test_baseline_figures_equal_the_bert_score_packages_file():
    pytest.importorskip("bert_score")
    from importlib.resources import files

    text = files("bert_score").joinpath("rescale_baseline/en/distilroberta-base.tsv").read_text()
    rows = [tuple(float(v) for v in line.split(",")[1:4]) for line in text.strip().splitlines()[1:]]
    assert tuple(rows) == BERTSCORE_BASELINES[("en", "distilroberta-base")]
    # a model without a stored table is read from the installed package
    assert bertscore_baseline("roberta-large", 17) == tuple(
        float(v) for v in files("bert_score").joinpath("rescale_baseline/en/roberta-large.tsv")
        .read_text().strip().splitlines()[18].split(",")[1:4])
    with pytest.raises(ValueError, match="bertscore_num_layers"):
        bertscore_baseline("distilroberta-base", 9)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="module")
def tiny_chexbert(tmp_path_factory):
    path, bert, _ = write_tiny_chexbert(tmp_path_factory.mktemp("chexbert"), WORDS, seed=1)
    return path, bert


GEN = ["the lungs are clear", "small  left pleural effusion", "heart size normal mild edema", ""]
REF = ["lungs are clear no acute process", "small pleural effusion", "mild edema", "no acute process"]


def test_bertscore_is_bert_scores_f1_rescaled_with_the_baseline_row_of_its_layer(tiny_bert):
    from medimg_bench.metrics.text.bertscore import bertscore

    raw = bertscore([" ".join(g.split()) for g in GEN], REF, model_path=tiny_bert, num_layers=2)["f1"]
    b = BERTSCORE_BASELINES[("en", "distilroberta-base")][2][2]  # layer 2, F
    got = rexrank_bertscore(GEN, REF, model_path=tiny_bert, num_layers=2)
    np.testing.assert_allclose(got, (raw - b) / (1 - b), rtol=0, atol=1e-12)
    assert got[3] == pytest.approx(-b / (1 - b))  # an empty report: F1 0, rescaled below 0
    np.testing.assert_allclose(rexrank_bertscore(GEN, REF, model_path=tiny_bert, num_layers=2, baseline=None),
                               raw, atol=1e-12)
    with pytest.raises(ValueError, match="bertscore_num_layers"):
        rexrank_bertscore(GEN, REF, model_path=tiny_bert, baseline="my-model")


def test_semb_is_the_cosine_of_chexbert_cls_states(tiny_chexbert):
    from transformers import AutoTokenizer

    path, bert = tiny_chexbert
    got = semb_scores(GEN, REF, checkpoint=path / "chexbert.pth", bert_path=path, batch_size=3)
    tok = AutoTokenizer.from_pretrained(str(path))

    def cls(text):  # encode.py: whitespace runs made single spaces; empty: [CLS] [SEP]
        with torch.no_grad():
            return bert(**tok([" ".join(text.split())], return_tensors="pt")).last_hidden_state[0, 0].numpy()

    want = [float(np.dot(cls(r), cls(g)) / (np.linalg.norm(cls(r)) * np.linalg.norm(cls(g)))) for g, r in zip(GEN, REF)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert semb_scores(["lungs\n are   clear "], ["lungs are clear"], checkpoint=path / "chexbert.pth",
                       bert_path=path)[0] == pytest.approx(1.0, abs=1e-6)


def _annotation(text: str) -> dict:
    words = [w for w in text.lower().replace(".", " ").split() if w in WORDS]
    ents = {str(i + 1): {"tokens": w, "label": "OBS-DP" if len(w) % 2 else "ANAT-DP",
                         "relations": [["modify", str(i + 2)]] if i + 1 < len(words) else []}
            for i, w in enumerate(words)}
    return {"entities": ents}


def test_radgraph_combined_from_an_annotator_and_from_a_file(tmp_path):
    from medimg_bench.metrics.text.radgraph import cxr_metric_radgraph

    got = radgraph_combined_scores(GEN, REF, annotate=lambda texts: [_annotation(t) for t in texts])
    want = [cxr_metric_radgraph(_annotation(g) if g else {"entities": {}}, _annotation(r))[2] for g, r in zip(GEN, REF)]
    np.testing.assert_allclose(got, want, atol=0)
    assert got[3] == 0.0 and 0 < got[0] < 1
    path = tmp_path / "ann.json"
    path.write_text(json.dumps({t: _annotation(t) for t in GEN + REF if t}))
    per, absent = rexrank_scores(GEN, REF, radgraph_annotations=str(path))
    np.testing.assert_allclose(per["radgraph_combined"], want, atol=0)
    assert set(absent) == {"bertscore", "semb_score", "RadCliQ-v0", "RadCliQ-v1"}
    path.write_text(json.dumps({t: _annotation(t) for t in REF}))
    with pytest.raises(ValueError, match="no annotation in `scoring.radgraph_annotations`"):
        rexrank_scores(GEN, REF, radgraph_annotations=str(path))


def test_all_four_present_give_radcliq(tiny_bert, tiny_chexbert, tmp_path):
    path = tmp_path / "ann.json"
    path.write_text(json.dumps({t: _annotation(t) for t in GEN + REF if t}))
    ck, _ = tiny_chexbert
    per, absent = rexrank_scores(GEN, REF, bertscore_model=str(tiny_bert), bertscore_num_layers=2,
                                 chexbert_checkpoint=str(ck / "chexbert.pth"), chexbert_bert_path=str(ck),
                                 radgraph_annotations=str(path))
    assert absent == {} and list(per) == ["bleu_score", "bertscore", "semb_score", "radgraph_combined",
                                          "RadCliQ-v0", "RadCliQ-v1"]
    for version in ("RadCliQ-v0", "RadCliQ-v1"):
        np.testing.assert_allclose(per[version], radcliq(per, version=version), atol=0)


def test_absent_models_are_named_and_bad_options_are_errors(tmp_path):
    scorer = RexrankScorer()
    assert scorer.columns == ["bleu_score"]
    assert "scoring.bertscore_model" in scorer.absent["bertscore"]
    assert "scoring.chexbert_checkpoint" in scorer.absent["semb_score"]
    assert "scoring.radgraph_model_cache_dir" in scorer.absent["radgraph_combined"]
    assert "needs all four" in scorer.absent["RadCliQ-v1"] and "bertscore" in scorer.absent["RadCliQ-v0"]
    with pytest.raises(FileNotFoundError, match="`scoring.bertscore_model` = '/nonexistent/distilroberta-base'"):
        RexrankScorer(bertscore_model="/nonexistent/distilroberta-base")
    with pytest.raises(FileNotFoundError, match="`scoring.radgraph_model_cache_dir`"):
        RexrankScorer(radgraph_model_cache_dir=str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="`scoring.chexbert_checkpoint` is set but `scoring.chexbert_bert_path` is not"):
        RexrankScorer(chexbert_checkpoint=str(tmp_path))
    with pytest.raises(ValueError, match="unknown option"):
        RexrankScorer(bertscore_modle="x")
    (tmp_path / "empty").mkdir()
    scorer = RexrankScorer(bertscore_model=str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="`scoring.bertscore_model`.*config.json"):
        scorer.score(["a"], ["a"])


def _reports_folder(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    ids = [f"CXR{i}_IM-{i}" for i in range(len(GEN))]
    refs = [*REF[:3], "no acute process. the lungs are clear."]
    with open(root / "gts.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([("study_id", "report"), *zip(ids, refs)])
    with open(root / "preds.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([("study_id", "report"), *zip(ids, [*GEN[:3], "no acute process"])])
    (root / "ann.json").write_text(json.dumps({t: _annotation(t) for t in [*GEN, *REF, *refs, "no acute process"] if t}))
    return root


def _run(tmp_path, root, *extra):
    import pandas as pd

    from medimg_bench.cli import main

    out = tmp_path / "runs"
    rc = main(["run", "task=report_generation", "dataset=iu_xray", f"dataset.root={root}", "dataset.split=test",
               "dataset.options.layout=reports_csv", "metrics=report", "model=predictions",
               f"model.options.root={root}/preds.csv", "scoring=rexrank", "bootstrap.n_resamples=20",
               "progress=false", f"output_dir={out}", *extra])
    assert rc == 0
    run = next(p.parent for p in out.rglob("summary.json"))
    return pd.read_parquet(run / "samples.parquet"), json.loads((run / "summary.json").read_text())


def test_scoring_rexrank_end_to_end_with_stored_predictions(tmp_path, tiny_bert, tiny_chexbert):
    root = _reports_folder(tmp_path / "iu")
    ck, _ = tiny_chexbert
    samples, summary = _run(tmp_path, root, f"scoring.bertscore_model={tiny_bert}", "scoring.bertscore_num_layers=2",
                            f"scoring.chexbert_checkpoint={ck / 'chexbert.pth'}", f"scoring.chexbert_bert_path={ck}",
                            f"scoring.radgraph_annotations={root / 'ann.json'}")
    names = ["bleu_score", "bertscore", "semb_score", "radgraph_combined", "RadCliQ-v0", "RadCliQ-v1"]
    assert set(names) <= set(samples.columns) and len(samples) == 4
    per, _ = rexrank_scores(samples["generated"].tolist(), samples["reference"].tolist(),
                            bertscore_model=str(tiny_bert), bertscore_num_layers=2,
                            chexbert_checkpoint=str(ck / "chexbert.pth"), chexbert_bert_path=str(ck),
                            radgraph_annotations=str(root / "ann.json"))
    for name in names:
        np.testing.assert_allclose(samples[name].to_numpy(), per[name], atol=1e-6, err_msg=name)
        fig = summary["metrics"][name]
        assert fig["kind"] == "corpus" and fig["mean"]["value"] == pytest.approx(per[name].mean(), abs=1e-6)
        assert fig["mean"]["ci_low"] <= fig["mean"]["value"] <= fig["mean"]["ci_high"]
    assert summary["report_text"]["absent"] == {}


def test_scoring_rexrank_without_models_writes_bleu_and_says_why_the_rest_is_absent(tmp_path):
    root = _reports_folder(tmp_path / "iu")
    samples, summary = _run(tmp_path, root)
    assert "bleu_score" in samples and "bleu_score" in summary["metrics"]
    for name in ("bertscore", "semb_score", "radgraph_combined", "RadCliQ-v0", "RadCliQ-v1"):
        assert name not in samples and name not in summary["metrics"]  # absent, never a zero
        assert "scoring." in summary["report_text"]["absent"][name] or "needs all four" in summary["report_text"]["absent"][name]


def test_scoring_rexrank_missing_model_path_is_an_error_naming_the_option(tmp_path, capsys):
    from medimg_bench.tasks.report import ReportGenerationTask

    with pytest.raises(FileNotFoundError, match="scoring.chexbert_checkpoint"):
        ReportGenerationTask(scoring={"name": "rexrank", "chexbert_checkpoint": str(tmp_path / "chexbert.pth"),
                                      "chexbert_bert_path": str(tmp_path)})
    root = _reports_folder(tmp_path / "iu")
    from medimg_bench.cli import main

    try:
        rc = main(["run", "task=report_generation", "dataset=iu_xray", f"dataset.root={root}", "dataset.split=test",
              "dataset.options.layout=reports_csv", "model=predictions", f"model.options.root={root}/preds.csv",
              "scoring=rexrank", f"scoring.bertscore_model={tmp_path / 'no_such_model'}", "progress=false",
              f"output_dir={tmp_path / 'runs'}"])
    except SystemExit as exc:  # Hydra prints the error and exits
        rc = exc.code
    assert rc not in (0, None)
    assert "`scoring.bertscore_model`" in capsys.readouterr().err
    assert not list((tmp_path / "runs").rglob("samples.parquet"))  # refused before any scoring


def test_roberta_texts_get_bert_scores_leading_space(tmp_path):
    # bert-score's sent_encode encodes GPT-2 / RoBERTa tokenizers with add_prefix_space=True: the
    # first word is "Ġthe", as everywhere else in a sentence, not "the"
    from transformers import AutoTokenizer, RobertaConfig, RobertaModel, RobertaTokenizer

    from medimg_bench.metrics.text.bertscore import bertscore

    chars = sorted(set("thelungs") | {"Ġ"})
    pieces = ["Ġt", "Ġth", "Ġthe", "th", "the", "lu", "lun", "lung", "lungs", "Ġlungs"]
    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>", *chars, *pieces])}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    merges = ["Ġ t", "Ġt h", "Ġth e", "t h", "th e", "l u", "lu n", "lun g", "lung s", "Ġ lungs"]
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    RobertaTokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"), model_max_length=64).save_pretrained(str(tmp_path))
    torch.manual_seed(0)
    cfg = RobertaConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=70, pad_token_id=1)
    model = RobertaModel(cfg).eval()
    model.save_pretrained(str(tmp_path))
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    assert tok.tokenize(" the lungs") == ["Ġthe", "Ġlungs"] and tok.tokenize("the lungs")[0] == "the"

    def emb(text):  # every token is matched against; <s> and </s> weigh 0 in the averages
        enc = tok([" " + text], return_tensors="pt")
        with torch.no_grad():
            h = model(**enc, output_hidden_states=True).hidden_states[2][0]
        weight = (~torch.isin(enc["input_ids"][0], torch.tensor([tok.cls_token_id, tok.sep_token_id]))).double()
        return torch.nn.functional.normalize(h, dim=-1).double(), weight

    gen, ref = ["the lungs", "lungs the"], ["lungs", "the lungs lungs"]
    want = []
    for g, r in zip(gen, ref):
        (he, hw), (re_, rw) = emb(g), emb(r)
        sim = he @ re_.T
        p = float((sim.max(1).values * hw).sum() / hw.sum())
        rr = float((sim.max(0).values * rw).sum() / rw.sum())
        want.append(2 * p * rr / (p + rr))
    got = bertscore(gen, ref, model_path=tmp_path, num_layers=2)["f1"]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    plain = bertscore(gen, ref, model_path=tmp_path, num_layers=2, add_prefix_space=False)["f1"]
    assert not np.allclose(plain, want, atol=1e-6)
