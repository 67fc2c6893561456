"""``task=cxreasonbench_reasoning``: CXReasonBench's multi-stage protocol, one conversation per
case, each stage asked only when the harness would ask it (ttumyche/CXReasonBench commit 72357fe).

Path 1 (``evaluation/evaluate_reasoning.py`` lines 97-278): the initial question with the chest
X-ray; unless its judged score is IDK (-1, line 125) the criteria questions one by one, stopping
at the first not judged True (lines 134-155); when all were True, the custom criteria (tasks with
a ``stage1.5``; lines 157-186); when that is True (or absent), the body-part questions with their
segmentation images, stopping at the first not True (lines 188-220); when all were True, the
measurement (lines 222-246); when True, the final decision (lines 248-278). Path 2, the guidance
(``evaluation/evaluate_guidance.py`` lines 96-228), for the cases whose initial or custom-criteria
answer was IDK (the ``dicom_lst_idk_*`` lists, evaluate_reasoning.py lines 309-318), continues the
same conversation (the harness rebuilds it from the saved turns, lines 96-135): every guidance
body-part question (the first with its images; no early stop, lines 148-166), then when all were
True the measurement with the point image (lines 168-194), then when True the final decision
(lines 196-228). The review after guidance (``re-path1`` on a randomly drawn other case, lines
230-377) is not run.

Every turn goes to the model with the whole conversation so far (``GenerationRequest.history``)
and the harness's judge verdict decides what comes next: the stage rubrics of
:mod:`medimg_bench.metrics.text.cxreasonbench` (``judge_prompt_dir=`` swaps in the harness's
prompt texts), one judgment per answer at temperature 0. A round asks every live conversation of
the batch its next turn in one ``generate`` call, then judges all replies in one call.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medimg_bench.registry import register_task
from medimg_bench.tasks._generative import (
    as_uint8,
    generation_settings,
    own_metric_spec,
    sample_images,
)
from medimg_bench.tasks.base import Task

__all__ = ["CXReasonBenchReasoningTask", "DEFAULT_SYSTEM", "PATH1_HEADER", "GUIDANCE_HEADER"]

#: our wording of the model's system message (prompt.py ``system_message`` says what it asks);
#: ``system=`` takes the harness's own text
DEFAULT_SYSTEM = (
    "You are a radiologist answering multiple-choice questions about a chest X-ray. Judge the "
    "radiograph itself, not any labels or annotations in its upper corners, and rely on anatomical "
    "and radiographic features. Give your answer as FINAL ANSWER: [your answer], with the letter "
    "of your choice and the option (e.g. FINAL ANSWER: (A) Yes); state your choice first, then "
    "explain if needed."
)
PATH1_HEADER = ("init", "criteria", "custom_criteria", "bodypart", "measurement", "final")
GUIDANCE_HEADER = ("guidance-bodypart", "guidance-measurement", "guidance-final")


@dataclass
class _Ask:
    """One turn a conversation wants: what to send and how its reply is judged."""

    stage: str  # the harness's key (init, criteria_0, guidance-bodypart_1 ...)
    query: str
    images: list[Any]
    answer: str
    rubric: str  # a key of STAGE_RUBRICS
    question: str = ""


@dataclass
class _Case:
    sid: str
    task: str
    stages: Mapping[str, Any]
    images: Mapping[str, Any]
    scoring: dict[str, Any] = field(default_factory=dict)
    guidance: dict[str, Any] = field(default_factory=dict)
    turns: list[dict[str, Any]] = field(default_factory=list)
    history: list[Any] = field(default_factory=list)
    error: str | None = None

    def content(self, key: str) -> Mapping[str, Any]:
        return self.stages[key]["content"]

    def shown(self, kind: str, entries: Any) -> list[Any]:
        entries = [entries] if isinstance(entries, str) else [e for e in entries or [] if e]
        return [as_uint8(self.images[f"{kind}:{e}"]) for e in entries]


def _path1(case: _Case, init_images: list[Any]) -> Generator[_Ask, int, None]:
    """evaluate_reasoning.py lines 105-278 as a conversation: yields each turn, receives its score."""
    from medimg_bench.metrics.text.cxreasonbench import MULTI_BODYPART_TASKS

    s, init = case.scoring, case.content("path1/init")
    s["init"] = yield _Ask("init", str(init["question"]), init_images, str(init["answer"]), "init",
                           str(init["question"]))
    if s["init"] == -1:
        return
    crit = case.content("path1/stage1")
    for k, (q, a) in enumerate(zip(crit["question"], crit["answer"])):
        s[f"criteria_{k}"] = yield _Ask(f"criteria_{k}", str(q), [], str(a), "criteria")
        if s[f"criteria_{k}"] != 1:
            break
    subs = [v for key, v in s.items() if key.startswith("criteria_")]
    if len(subs) != sum(subs):
        return
    custom_score = 1
    if "path1/stage1.5" in case.stages:
        c = case.content("path1/stage1.5")
        custom_score = s["custom_criteria"] = yield _Ask("custom_criteria", str(c["question"]), [], str(c["answer"]),
                                                         "custom_criteria")
    if custom_score != 1:
        return
    body = case.content("path1/stage2")
    kind = "bodypart_all" if case.task in MULTI_BODYPART_TASKS else "bodypart_one"
    for k, q in enumerate(body["question"]):
        s[f"bodypart_{k}"] = yield _Ask(f"bodypart_{k}", str(q), case.shown("segmask", body["img_path"][k]),
                                        str(body["answer"][k]), kind)
        if s[f"bodypart_{k}"] != 1:
            break
    subs = [v for key, v in s.items() if key.startswith("bodypart_")]
    if len(subs) != sum(subs):
        return
    yield from _measure_and_decide(case, case.content("path1/stage3"), case.content("path1/stage4"), s, "")


def _measure_and_decide(case: _Case, measure: Mapping[str, Any], final: Mapping[str, Any], s: dict[str, Any],
                        prefix: str, measure_images: list[Any] | None = None) -> Generator[_Ask, int, None]:
    """The measurement, then (when judged True) the final decision, of either path."""
    kind = "measurement_projection" if case.task == "projection" and not prefix else "measurement"
    s[f"{prefix}measurement"] = yield _Ask(f"{prefix}measurement", str(measure["question"]), measure_images or [],
                                           str(measure["answer"]), kind)
    if s[f"{prefix}measurement"] != 1:
        return
    s[f"{prefix}final"] = yield _Ask(f"{prefix}final", str(final["question"]), [], str(final["answer"]), "final",
                                     str(final["question"]))
    # the harness asks its judge for the value here (return_measured_value_result); metric.py
    # reads the value from the final response instead, so only the marker is kept
    s["measured_value" + ("_guidance" if prefix else "")] = ""


def _guidance(case: _Case) -> Generator[_Ask, int, None]:
    """evaluate_guidance.py lines 142-228: guidance body parts (no early stop), measurement, final."""
    g = case.guidance
    body = case.content("path2/stage1")
    for k, q in enumerate(body["question"]):
        images = case.shown("segmask", body.get("img_path")) if k == 0 else []
        g[f"guidance-bodypart_{k}"] = yield _Ask(f"guidance-bodypart_{k}", str(q), images, str(body["answer"][k]),
                                                 "bodypart_one")
    subs = [v for key, v in g.items() if key.startswith("guidance-bodypart_")]
    if len(subs) != sum(subs):
        return
    measure = case.content("path2/stage2")
    yield from _measure_and_decide(case, measure, case.content("path2/stage3"), g, "guidance-",
                                   case.shown("pnt", measure.get("img_path")))


def _conversation(case: _Case, init_images: list[Any], guidance: bool) -> Generator[_Ask, int, None]:
    yield from _path1(case, init_images)
    idk = case.scoring.get("init") == -1 or case.scoring.get("custom_criteria") == -1
    if guidance and idk and "path2/stage1" in case.stages:
        yield from _guidance(case)


@register_task("cxreasonbench_reasoning", tags=("vqa", "generative", "reasoning"))
class CXReasonBenchReasoningTask(Task):
    """Runs CXReasonBench's stages as conversations (module docstring). Options: ``judge`` (a
    generative adapter or ``{model, options}``; also ``scoring.judge``), ``judge_prompt_dir``
    (files ``<stage kind>.txt`` replacing the judge instructions), ``system`` (the model's
    system message; None: :data:`DEFAULT_SYSTEM`, ``""``: none), ``max_new_tokens``,
    ``guidance`` (run path 2 for the IDK cases)."""

    name = "cxreasonbench_reasoning"
    default_metrics = {"cxreasonbench_reasoning": {}}

    def __init__(self, *, judge: Any = None, scoring: Mapping[str, Any] | str | None = None,
                 judge_prompt_dir: str | None = None, system: str | None = None,
                 max_new_tokens: int | None = 512, guidance: bool = True) -> None:
        from medimg_bench.metrics.text.cxreasonbench import stage_rubrics
        from medimg_bench.metrics.text.judge import build_judge

        spec = judge if judge is not None else (scoring.get("judge") if isinstance(scoring, Mapping) else None)
        if isinstance(spec, Mapping):  # scoring.judge may carry the VQA task's rubric keys: not used here
            spec = {k: v for k, v in spec.items() if k in ("model", "options")}
        self.judge = build_judge(spec)
        if self.judge is None:
            raise ValueError("cxreasonbench_reasoning: every stage is judged; set task.options.judge "
                             "(or scoring.judge) to {model: NAME, options: {...}}")
        self.rubrics = stage_rubrics(judge_prompt_dir)
        self._prompt_dir = judge_prompt_dir
        # the config's null and the signature's default are the same: our wording
        self.system = DEFAULT_SYSTEM if system is None else (system or None)
        self.max_new_tokens, self.guidance = max_new_tokens, bool(guidance)

    def build_metrics(self, spec: Any, classes: Sequence[str] | None) -> dict[str, Any]:
        return super().build_metrics(own_metric_spec(spec, self.name), None)

    def key_files(self) -> dict[str, Any]:
        """``{"judge_prompt_dir/<stage kind>.txt": path}`` for every stage kind when a prompt folder
        is set: a run's key holds each file's content (``missing``: the built-in text is used)."""
        if self._prompt_dir is None:
            return {}
        from pathlib import Path

        return {f"judge_prompt_dir/{k}.txt": Path(self._prompt_dir).expanduser() / f"{k}.txt" for k in self.rubrics}

    def manifest_notes(self) -> dict[str, Any]:
        """``manifest.json["judge"]``: each stage rubric's identity and the judge's fingerprint."""
        return {"judge": {"rubrics": {k: r.identity() for k, r in self.rubrics.items()},
                          "judge": self.judge.fingerprint(), "settings": self._judge_settings().to_dict()}}

    def _judge_settings(self) -> Any:
        return dataclasses.replace(self.judge.settings, temperature=0.0, max_new_tokens=500)

    def _cases(self, batch: dict[str, Any]) -> list[_Case]:
        cases = []
        for i, sid in enumerate(batch["id"]):
            meta = (batch.get("meta") or [{}] * len(batch["id"]))[i] or {}
            if "stages" not in meta:
                raise ValueError(f"sample {sid!r}: cxreasonbench_reasoning needs the stage files: "
                                 "build the dataset with dataset.options.stages=true")
            cases.append(_Case(str(sid), str(meta.get("diagnostic_task")), meta["stages"], meta.get("stage_images") or {}))
        return cases

    def predict(self, model: Any, batch: dict[str, Any]) -> dict[str, Any]:
        settings = generation_settings(self.name, model, self.max_new_tokens)
        cases = self._cases(batch)
        live: dict[int, tuple[Generator[_Ask, int, None], _Ask]] = {}
        for i, case in enumerate(cases):
            gen = _conversation(case, sample_images(batch, i), self.guidance)
            live[i] = (gen, next(gen))
        while live:
            replies = self._ask(model, settings, cases, live)
            verdicts = self._judge(cases, live, replies)
            for i in list(live):
                gen, ask = live.pop(i)
                case = cases[i]
                if case.error is not None:
                    continue
                score, judge_reply = verdicts[i]
                self._record(case, ask, replies[i], score, judge_reply)
                try:
                    live[i] = (gen, gen.send(score))
                except StopIteration:
                    pass
        return {"cases": cases}

    def _ask(self, model: Any, settings: Any, cases: list[_Case], live: Mapping[int, tuple[Any, _Ask]]) -> dict[int, Any]:
        from medimg_bench.models.vlm.base import GenerationRequest

        order = list(live)
        requests = [GenerationRequest(images=live[i][1].images, user=live[i][1].query, system=self.system,
                                      settings=settings, sample_id=f"{cases[i].sid}#{live[i][1].stage}",
                                      history=list(cases[i].history) or None) for i in order]
        out = {}
        for i, resp in zip(order, model.generate(requests)):
            if resp.error:
                cases[i].error = f"sample {cases[i].sid!r}: generation failed at stage {live[i][1].stage}: {resp.error}"
            out[i] = resp
        return out

    def _judge(self, cases: list[_Case], live: Mapping[int, tuple[Any, _Ask]],
               replies: Mapping[int, Any]) -> dict[int, tuple[int, str]]:
        from medimg_bench.metrics.text.cxreasonbench import verdict_score
        from medimg_bench.models.vlm.base import GenerationRequest

        order = [i for i in live if cases[i].error is None]
        requests = []
        for i in order:
            ask = live[i][1]
            system, user = self.rubrics[ask.rubric].messages(ask.question, ask.answer, replies[i].text or "")
            requests.append(GenerationRequest(images=[], user=user, system=system, settings=self._judge_settings(),
                                              sample_id=f"{cases[i].sid}#{ask.stage}#grade"))
        out: dict[int, tuple[int, str]] = {}
        for i, resp in zip(order, self.judge.generate(requests) if requests else []):
            ask = live[i][1]
            if resp.error:
                cases[i].error = f"sample {cases[i].sid!r}: the judge's request failed at stage {ask.stage}: {resp.error}"
                continue
            out[i] = (verdict_score(self.rubrics[ask.rubric].parse(resp.text)), resp.text)
        return out

    @staticmethod
    def _record(case: _Case, ask: _Ask, reply: Any, score: int, judge_reply: str) -> None:
        from medimg_bench.models.vlm.base import ChatTurn

        case.history.append(ChatTurn(user=ask.query, reply=reply.text or "", images=list(ask.images)))
        case.turns.append({"stage": ask.stage, "query": ask.query, "n_images": len(ask.images),
                           "response": reply.text, "answer": ask.answer, "judge_rubric": ask.rubric,
                           "judge_reply": judge_reply, "score": score,
                           "cached": bool(reply.cached)})

    def _case_row(self, case: _Case) -> dict[str, Any]:
        """The metric's numbers for one case (CASE_COLUMNS of the metric module)."""
        from medimg_bench.metrics.text.cxreasonbench import (
            MEASUREMENT_TASKS,
            collapse_stages,
            measurement_match,
        )

        p1 = collapse_stages(case.scoring, PATH1_HEADER)
        row: dict[str, Any] = {"has_custom": float("path1/stage1.5" in case.stages), **{k: float(v) for k, v in p1.items()}}
        by_stage = {t["stage"]: t for t in case.turns}
        row["match"] = float("measured_value" in case.scoring and case.task in MEASUREMENT_TASKS
                             and measurement_match(case.task, by_stage["measurement"]["answer"],
                                                   by_stage["final"]["response"] or ""))
        g = collapse_stages(case.guidance, GUIDANCE_HEADER)
        row["guidance"] = float(bool(case.guidance))
        row.update({"g_" + k.split("-", 1)[1]: float(v) for k, v in g.items()})
        row["g_match"] = float("measured_value_guidance" in case.guidance and case.task in MEASUREMENT_TASKS
                               and measurement_match(case.task, by_stage["guidance-measurement"]["answer"],
                                                     by_stage["guidance-final"]["response"] or ""))
        return row

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        from medimg_bench.models.vlm.requests import GenerationFailed  # tagged [predict]

        rows, tasks = [], []
        for case in outputs["cases"]:
            if case.error is not None:  # a failed request fails its case, so a resumed run asks again
                raise GenerationFailed(case.error)
            rows.append(self._case_row(case))
            tasks.append(case.task)
        return rows, tasks

    @staticmethod
    def _references(case: _Case) -> str:
        """Every stage's reference answer (asked or not), as JSON: what the case is judged against,
        the same in two runs on the same release whatever their conversations reached."""
        return json.dumps({key: (stage.get("content") or {}).get("answer") for key, stage in case.stages.items()},
                          sort_keys=True)

    def sample_records(self, batch: dict[str, Any], outputs: dict[str, Any], classes: Any) -> list[dict[str, Any]]:
        rows = []
        for case in outputs["cases"]:
            row: dict[str, Any] = {"id": case.sid, "diagnostic_task": case.task, "n_turns": len(case.turns),
                                   "reference": self._references(case),
                                   "last_stage": case.turns[-1]["stage"] if case.turns else None,
                                   "guidance": bool(case.guidance), "turns": json.dumps(case.turns),
                                   "scores": json.dumps({**case.scoring, **case.guidance}),
                                   "n_cached_answers": sum(t["cached"] for t in case.turns)}
            if case.error is None:
                row.update({f"stage_{k}": v for k, v in self._case_row(case).items()
                            if k not in ("has_custom", "guidance")})
            rows.append(row)
        return rows
