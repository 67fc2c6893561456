"""The ``3dreasonknee`` loader on a fixture in the layouts the authors' code reads
(rajpurkarlab/3DReasonKnee bcc32ba): split CSV × question file (zero-shot scripts) and the SFT JSON;
NIfTI volumes read as stored (or transposed by data_preprocess.py's rule); bad rows and files
named; ``datasets check``; and the ``moaks_vqa`` task end to end with a scripted adapter."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pandas as pd
import pytest

import medimg_bench as mb
from medimg_bench.datasets.check import check_from_config
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter
from medimg_bench.sample import SampleError, validate_sample

# two questions in the release's form: text, then the JSON template the answer must follow
QUESTIONS = {
    "1": ("In this DESS MRI, can you diagnose bone-marrow lesions (BMLs) in the patella medial subregion? "
          "Provide your reasoning, and the MOAKS scores. The output format should be a JSON object with the "
          'MOAKS scores: {"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": '
          '(grade from 0-3), "Number of BML within subregion": (grade from 0-3)}}}'),
    "60": ("In this DESS MRI, assess the ACL. Provide your reasoning, and the assessment. The output format "
           'should be a JSON object with the assessment: {"ACL": {"Complete Tear": (0 | 1), "ACL Repair": (0 | 1)}}'),
}
SHAPE = (12, 8, 6)  # slices along axis 0, as the zero-shot scripts read them


def _volume(path: Path, shape=SHAPE, seed=0) -> np.ndarray:
    data = np.random.default_rng(seed).uniform(0, 600, shape).astype(np.float32)
    nib.save(nib.Nifti1Image(data, np.diag([0.7, 0.36, 0.36, 1.0])), str(path))
    return data


def _release(root: Path) -> Path:
    data = root / "data"
    (data / "split_files").mkdir(parents=True)
    (data / "question_files").mkdir()
    (root / "volumes").mkdir()
    rows = []
    for k, (pid, side) in enumerate([("9000099", "RIGHT"), ("9000296", "LEFT")]):
        _volume(root / "volumes" / f"{pid}.nii.gz", seed=k)
        rows.append({"patient_id": pid, "time": "00m", "study_folder": f"1C{k}", "series_folder": f"S{k}",
                     "knee_side": side, "image_filepath": f"volumes/{pid}.nii.gz",
                     "label_filepath": f"labels/{pid}.nii.gz"})
    pd.DataFrame(rows).to_csv(data / "split_files" / "test_split.csv", index=False)
    for name in ("questions_nobbox_guided.json", "questions_nobbox_zeroshot.json"):
        (data / "question_files" / name).write_text(json.dumps(QUESTIONS))
    return root


def _sft(root: Path, items: list[dict]) -> Path:
    (root / "data" / "generate_data").mkdir(parents=True, exist_ok=True)
    (root / "data" / "generate_data" / "test_balanced.json").write_text(json.dumps(items))
    return root


def test_zero_shot_layout_every_volume_times_every_question(tmp_path):
    ds = mb.create_dataset("3dreasonknee", root=_release(tmp_path))
    assert len(ds) == 4
    assert ds.ids[0] == "9000099_00m_1C0_S0_RIGHT_1" and ds.ids[3] == "9000296_00m_1C1_S1_LEFT_60"
    s = ds[1]
    validate_sample(s, task="vqa")
    assert s["image"].shape == (1, *SHAPE) and s["image"].dtype.is_floating_point
    assert float(s["image"].max()) > 400  # voxel values as stored: the sampling clips, not the loader
    assert s["answer"] is None and s["answer_type"] == "json" and s["question"] == QUESTIONS["60"]
    assert s["meta"]["question_id"] == "60" and s["meta"]["finding"] == "ligament"
    assert s["meta"]["patient_id"] == "9000099" and s["meta"]["knee_side"] == "RIGHT"
    assert s["meta"]["spacing"] == pytest.approx((0.7, 0.36, 0.36))
    assert ds[0]["meta"]["finding"] == "bml"
    only = mb.create_dataset("3dreasonknee", root=tmp_path / "data", questions="zeroshot", question_ids=[60])
    assert only.ids == ["9000099_00m_1C0_S0_RIGHT_60", "9000296_00m_1C1_S1_LEFT_60"]


def test_sft_layout_and_the_data_preprocess_transpose(tmp_path):
    root = _release(tmp_path)
    stored = _volume(root / "volumes" / "odd.nii.gz", shape=(8, 6, 12), seed=5)
    answer = {"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": 1,
                                                      "Number of BML within subregion": 1}}}
    _sft(root, [{"image": "volumes/odd.nii.gz", "prompt": QUESTIONS["1"],
                 "answer": "Step 1 ... Final diagnosis: " + json.dumps(answer), "final_diagnosis": json.dumps(answer)},
                {"image": "volumes/9000099.nii.gz", "prompt": QUESTIONS["60"], "answer": "...",
                 "final_diagnosis": json.dumps({"ACL": {"Complete Tear": 0, "ACL Repair": 0}})}])
    ds = mb.create_dataset("3dreasonknee", root=root, layout="sft", axis0_slices=12)
    assert ds.ids == ["odd_0", "9000099_1"]
    s = ds[0]
    assert s["image"].shape == (1, 12, 8, 6)  # (8, 6, 12) transposed (2, 0, 1) as data_preprocess.py does
    np.testing.assert_array_equal(s["image"][0].numpy(), stored.transpose(2, 0, 1))
    assert json.loads(s["answer"]) == answer and s["meta"]["reasoning"].startswith("Step 1")
    assert mb.create_dataset("3dreasonknee", root=root, layout="sft")[0]["image"].shape == (1, 8, 6, 12)


def test_bad_input_names_the_file_and_row(tmp_path):
    root = _release(tmp_path)
    with pytest.raises(ValueError, match="layout"):
        mb.create_dataset("3dreasonknee", root=root, layout="boxes")
    with pytest.raises(FileNotFoundError, match="val_split.csv"):
        mb.create_dataset("3dreasonknee", root=root, split="val")
    with pytest.raises(ValueError, match=r"question id\(s\) \['99'\]"):
        mb.create_dataset("3dreasonknee", root=root, question_ids=[99])
    csv = root / "data" / "split_files" / "test_split.csv"
    frame = pd.read_csv(csv, dtype=str)
    frame.loc[1, "image_filepath"] = ""
    frame.to_csv(csv, index=False)
    with pytest.raises(ValueError, match="test_split.csv.*row 1.*image_filepath"):
        mb.create_dataset("3dreasonknee", root=root)
    assert len(mb.create_dataset("3dreasonknee", root=root, on_error="skip")) == 2
    frame.drop(columns=["knee_side"]).to_csv(csv, index=False)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['knee_side'\]"):
        mb.create_dataset("3dreasonknee", root=root)
    _sft(root, [{"image": "volumes/9000099.nii.gz", "prompt": "q"}])
    with pytest.raises(ValueError, match="test_balanced.json.*row 0.*final_diagnosis"):
        mb.create_dataset("3dreasonknee", root=root, layout="sft")


def test_unreadable_volume_is_a_sample_error_naming_the_file(tmp_path):
    root = _release(tmp_path)
    (root / "volumes" / "9000296.nii.gz").write_bytes(b"not a nifti")
    ds = mb.create_dataset("3dreasonknee", root=root)
    with pytest.raises(SampleError) as err:
        ds[2]
    assert "9000296.nii.gz" in str(err.value) and "9000296_00m_1C1_S1_LEFT_1" in str(err.value)


def test_datasets_check_reads_every_volume(tmp_path):
    root = _release(tmp_path)
    report = check_from_config({"name": "3dreasonknee", "root": str(root), "split": "test", "options": {}})
    split = report.splits["test"]
    assert report.ok and (split.n_samples, split.n_patients, split.n_read) == (4, 2, 4)
    (root / "volumes" / "9000296.nii.gz").unlink()
    report = check_from_config({"name": "3dreasonknee", "root": str(root), "split": "test", "options": {}})
    assert not report.ok and "9000296.nii.gz" in report.format()


class Scripted(GenerativeAdapter):
    backend = "scripted"

    def __init__(self, answers):
        super().__init__(name="scripted")
        self.answers, self.requests = answers, []

    def identity(self):
        return {"answers": sorted(self.answers.items())}

    def _generate(self, requests):
        self.requests.extend(requests)
        return [GenerationResponse(text=self.answers[r.sample_id], prompt=r.user) for r in requests]


def test_moaks_task_end_to_end_without_references(tmp_path):
    ds = mb.create_dataset("3dreasonknee", root=_release(tmp_path))
    answers = dict(zip(ds.ids, [
        "```json\n" + json.dumps({"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": 1,
                                                                          "Number of BML within subregion": 0}}}) + "\n```",
        "The ACL is intact.",                                     # no JSON: a recorded parse failure
        json.dumps({"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": 5}}}),  # incomplete
        json.dumps({"ACL": {"Complete Tear": 0, "ACL Repair": 0}}),
    ]))
    model = Scripted(answers)
    res = mb.evaluate(model, ds, task="moaks_vqa", batch_size=2, progress=False, n_resamples=20)
    m = res.summary["metrics"]
    assert m["parse_failed"]["mean"]["value"] == pytest.approx(0.25)
    assert m["complete"]["mean"]["value"] == pytest.approx(0.5)
    assert "grade_accuracy" not in m  # these files carry no reference answers
    r = model.requests[0]
    assert len(r.images) == SHAPE[0] and r.images[0].shape == SHAPE[1:]  # reasonknee3d_video: every slice
    assert r.system.startswith("You are a radiologist") and r.user == QUESTIONS["1"]
    rows = pd.DataFrame(res.samples).set_index("id")
    assert rows.loc[ds.ids[1], "parse_error"].startswith("invalid JSON")


def test_moaks_task_scores_sft_references(tmp_path):
    root = _release(tmp_path)
    ref = {"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": 1, "Number of BML within subregion": 2}}}
    _sft(root, [{"image": "volumes/9000099.nii.gz", "prompt": QUESTIONS["1"], "answer": "...",
                 "final_diagnosis": json.dumps(ref)},
                {"image": "volumes/9000296.nii.gz", "prompt": QUESTIONS["60"], "answer": "...",
                 "final_diagnosis": "no tear"},
                {"image": "volumes/9000296.nii.gz", "prompt": QUESTIONS["60"], "answer": "...",
                 "final_diagnosis": json.dumps({"ACL": "intact"})}])
    ds = mb.create_dataset("3dreasonknee", root=root, layout="sft")
    reply = "Reasoning ... Final diagnosis: " + json.dumps(
        {"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": 1, "Number of BML within subregion": 1}}})
    model = Scripted({ds.ids[0]: reply, ds.ids[1]: json.dumps({"ACL": {"Complete Tear": 0}}), ds.ids[2]: "{}"})
    task = mb.create_task("moaks_vqa", parse="sft", volume_sampling="reasonknee3d_o1")
    res = mb.evaluate(model, ds, task=task, batch_size=2, progress=False, n_resamples=20)
    m = res.summary["metrics"]
    assert m["grade_accuracy"]["mean"]["value"] == pytest.approx(0.5) and m["exact_match"]["mean"]["value"] == 0.0
    # the other references are no JSON object / hold no grade: those samples fail at their target
    failures = res.failures
    assert list(failures["id"]) == ds.ids[1:] and all(failures["error"].str.startswith("[target]"))
    assert "not a JSON object" in failures["error"].iloc[0] and "no integer grade" in failures["error"].iloc[1]
    assert len(model.requests[0].images) == 32


@pytest.mark.slow
def test_cli_run_with_the_shipped_configs_and_the_tiny_vlm(tmp_path, monkeypatch):
    from medimg_bench.cli import main

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    root = _release(tmp_path / "knee")
    out = tmp_path / "runs"
    rc = main(["run", "task=moaks_vqa", "dataset=3dreasonknee", f"dataset.root={root}", "model=tiny_vlm",
               "dataset.options.question_ids=[60]", "task.options.max_new_tokens=4",
               "task.options.volume_sampling={preset: reasonknee3d_video, n_slices: 2}",
               "bootstrap.n_resamples=20", "progress=false", f"output_dir={out}"])
    run = next(p.parent for p in out.rglob("summary.json"))
    summary = json.loads((run / "summary.json").read_text())
    assert rc == 0 and "parse_failed" in summary["metrics"] and summary["moaks"]["n_questions"] == 2
    samples = pd.read_parquet(run / "samples.parquet")
    assert set(samples["volume_slices"]) == {"[0, 11]"} and set(samples["question_id"]) == {"60"}


def test_findings_of_the_69_released_questions():
    from medimg_bench.datasets.vqa.reasonknee import finding_of

    # first sentences of questions_nobbox_{guided,zeroshot}.json at bcc32ba (tools/reasonknee_reference.py)
    stored = json.loads((Path(__file__).parents[2] / "metrics" / "text" / "data" / "reasonknee_templates.json").read_text())
    for kind in ("guided_openings", "zeroshot_openings"):
        found = {q: finding_of(text) for q, text in stored["templates"][kind].items()}
        assert len(found) == 69
        assert {q for q, f in found.items() if f == "bml"} == {str(q) for q in range(1, 16)}
        assert {q for q, f in found.items() if f == "cartilage"} == {str(q) for q in range(16, 30)}
        assert {q for q, f in found.items() if f == "osteophyte"} == {str(q) for q in range(30, 42)}
        assert [found[q] for q in ("42", "44", "48", "54", "56", "58", "60", "61", "62")] == [
            "synovitis", "meniscal_extrusion", "meniscal_morphology", "meniscal_cyst", "meniscal_hypertrophy",
            "meniscal_root_tear", "ligament", "ligament", "patellar_tendon"]
        assert {q for q, f in found.items() if f == "other"} == {str(q) for q in range(63, 70)}


def test_moaks_task_options_and_metric_spec():
    task = mb.create_task("moaks_vqa")
    assert task.volume_sampling.name == "reasonknee3d_video" and task.parse == "qwen2vl"
    assert list(task.build_metrics({"auroc": {}}, None)) == ["moaks"]  # the root default does not apply
    kept = task.build_metrics({"strict": {"metric": "moaks", "thresholds": [0.1]}}, None)
    assert list(kept) == ["strict"] and kept["strict"].thresholds == (0.1,)
    with pytest.raises(ValueError, match="parse must be one of"):
        mb.create_task("moaks_vqa", parse="regex")
