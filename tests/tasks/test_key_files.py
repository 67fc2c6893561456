"""Task options that name files whose content decides a number — VQA's candidate answer list and
open-answer rubric file, CXReasonBench's judge prompt folder, scoring=rexrank's model files — are
in the task's part of the checkpoint key by content: the key's ``files`` changes when the content
at the path changes, and neither ``files`` nor the task's settings change when the same content
lies at another path. (The engine's refusal and resume on these fields:
tests/engine/test_key_file_contents.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from medimg_bench.engine.plan import files_identity, object_settings
from medimg_bench.tasks.cxreasonbench import CXReasonBenchReasoningTask
from medimg_bench.tasks.vqa import VQATask
from tests.tasks._judges import ScriptedJudge

RUBRIC = "Question: {question}\nReference: {answer}\nResponse: {response}\nReply correct or incorrect."


def _key(task) -> tuple[str, dict, dict]:
    digests, paths = files_identity(task, {})
    return object_settings(task), digests, paths


def _vqa_candidates(path: Path) -> VQATask:
    return VQATask(scoring={"name": "llava_med", "candidates": str(path)})


def _vqa_rubric(path: Path) -> VQATask:
    return VQATask(scoring={"name": "medimg_bench", "judge": {"model": ScriptedJudge(lambda u, n: "correct"),
                                                              "rubric": "correctness", "rubric_file": str(path)}})


def _cxr(path: Path) -> CXReasonBenchReasoningTask:
    return CXReasonBenchReasoningTask(judge=ScriptedJudge(lambda u, n: "true"), judge_prompt_dir=str(path))


def _write_prompt_dir(path: Path, text: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "final.txt").write_text(text)


# option in the key -> (task from a path, write content at a path, other content)
CASES = {
    "scoring.candidates": (_vqa_candidates, lambda p, c: p.write_text(json.dumps(c)),
                           (["left lung", "liver"], ["left lung", "spleen"])),
    "scoring.judge.rubric_file": (_vqa_rubric, lambda p, c: p.write_text(c), (RUBRIC, RUBRIC + " Be strict.")),
    "judge_prompt_dir/final.txt": (_cxr, _write_prompt_dir, ("Say true or false.", "Say true, false or idk.")),
}


@pytest.mark.parametrize("option", list(CASES))
def test_task_file_options_are_keyed_by_content(option, tmp_path):
    make, write, (content, other) = CASES[option]
    path = tmp_path / "a" / ("prompts" if option.startswith("judge_prompt_dir") else "file.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    write(path, content)
    settings, digests, paths = _key(make(path))
    assert option in digests["task"] and digests["task"][option].startswith("sha256:")
    assert str(path) in paths["task"][option] and str(path) not in settings  # the path: display only

    moved = tmp_path / "b" / "c" / path.name
    moved.parent.mkdir(parents=True)
    (shutil.copytree if path.is_dir() else shutil.copy2)(path, moved)
    assert _key(make(moved))[:2] == (settings, digests)  # the same content elsewhere: the same key

    write(path, other)
    settings2, digests2, _ = _key(make(path))
    assert digests2["task"][option] != digests["task"][option]


def test_a_stage_prompt_file_added_to_the_folder_changes_the_key(tmp_path):
    _write_prompt_dir(tmp_path / "p", "Say true or false.")
    _, digests, _ = _key(_cxr(tmp_path / "p"))
    assert digests["task"]["judge_prompt_dir/init.txt"] == "missing"  # the built-in text is used
    (tmp_path / "p" / "init.txt").write_text("Compare the answers.")
    _, digests2, _ = _key(_cxr(tmp_path / "p"))
    assert digests2["task"]["judge_prompt_dir/init.txt"].startswith("sha256:")
    (tmp_path / "p" / "notes.md").write_text("not read by the task")  # not a stage prompt: not in the key
    assert _key(_cxr(tmp_path / "p"))[1] == digests2


def test_tasks_without_file_options_have_no_files_part(tmp_path):
    # no "files" part; the declared parameters as given
    task = VQATask(scoring={"name": "llava_med", "candidates": ["a", "b"]})
    assert files_identity(task, {}) == ({}, {})
    assert object_settings(task)["params"]["scoring"] == {"name": "llava_med", "candidates": ["a", "b"]}
    vqa_judged = json.dumps(object_settings(_vqa_rubric_builtin()))
    assert "object" not in vqa_judged  # the judge by its identity, never by an object's name
    assert '"rubric": "correctness"' in vqa_judged


def _vqa_rubric_builtin() -> VQATask:
    return VQATask(scoring={"name": "medimg_bench", "judge": {"model": ScriptedJudge(lambda u, n: "correct"),
                                                              "rubric": "correctness"}})


def test_the_open_answer_judge_is_in_the_key():
    a = object_settings(VQATask(scoring={"name": "medimg_bench", "judge": {
        "model": ScriptedJudge(lambda u, n: "correct", tag="j1"), "rubric": "correctness"}}))
    b = object_settings(VQATask(scoring={"name": "medimg_bench", "judge": {
        "model": ScriptedJudge(lambda u, n: "correct", tag="j2"), "rubric": "correctness"}}))
    c = object_settings(VQATask(scoring={"name": "medimg_bench", "judge": {
        "model": ScriptedJudge(lambda u, n: "correct", tag="j1"), "rubric": "correctness", "repeats": 3}}))
    assert len({json.dumps(x, sort_keys=True) for x in (a, b, c)}) == 3
