"""Visual question answering with generative adapters, scored strictly: the answer is extracted
by the documented cascade of :mod:`medimg_bench.metrics.text.vqa`, never guessed."""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Mapping, Sequence
from typing import Any

from medimg_bench.metrics.text.vqa_scorer import VQAScorer
from medimg_bench.registry import register_task
from medimg_bench.tasks._generative import generation_settings, sample_images
from medimg_bench.tasks.base import Task, TaskScores

__all__ = ["VQATask", "PROFILES", "SUBMISSION_FILE"]

log = logging.getLogger(__name__)

#: written into the run directory when answers are withheld (see VQATask.write_outputs)
SUBMISSION_FILE = "submission.tsv"
_CATEGORY_COLUMNS = ("question_type", "content_type", "modality", "organ", "department",
                     "clinical_task", "perceptual_granularity", "task_label", "clinical_phase",
                     "diagnostic_task")

#: scoring profiles built (medimg_bench.metrics.text.vqa_profiles.PROFILES); see docs/vlm.md
PROFILES = ("medimg_bench", "llava_med", "llava_med_initial", "multimedeval", "lmms_eval", "vlmevalkit",
            "vlmevalkit_18fc37a")

DEFAULT_PROMPTS = {
    "closed": "<image>\n{question}\nAnswer with yes or no.",
    "open": "<image>\n{question}\nAnswer with a single word or phrase.",
    "mcq": "<image>\n{question}\n{options}\nAnswer with the option's letter from the given choices directly.",
}
_FIELDS = {"question", "options"}
#: profiles whose unparsed closed/multiple-choice answers an optional LLM judge may map to an option
JUDGED_PROFILES = ("medimg_bench", "vlmevalkit", "vlmevalkit_18fc37a")


def _profile_options(profile: str, scoring: Any) -> dict[str, Any]:
    """The options a harness profile takes from its scoring config: ``candidates`` (llava_med*:
    the list for "open accuracy", or a JSON file holding one — a list or LLaVA-Med's
    ``{"0": [...]}``) and ``variant`` (lmms_eval: the task whose split rule applies)."""
    from medimg_bench.metrics.text.vqa_profiles import PROFILES as _P

    given = dict(scoring) if isinstance(scoring, Mapping) else {}
    out: dict[str, Any] = {}
    for key in _P[profile].options:
        value = given.get(key)
        if value is None:
            continue
        if key == "candidates" and isinstance(value, str):
            value = _read_candidates(value)
        if key == "candidates" and not list(value):
            raise ValueError(f"vqa: scoring.candidates of {profile} is empty")
        out[key] = list(value) if key == "candidates" else value
    return out


def _read_candidates(path: str) -> list[Any]:
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"vqa: cannot read the candidate answer list {path!r}: {e}") from e
    if isinstance(data, dict) and "0" in data:
        data = data["0"]  # LLaVA-Med's train_open_answers.json
    if not isinstance(data, list) or not data:
        raise ValueError(f"vqa: {path!r} holds no candidate list (a JSON list, or {{\"0\": [...]}})")
    return data


def _option_files(scoring: Any, judge: Any, open_spec: Mapping[str, Any],
                  profile_options: Mapping[str, Any]) -> dict[str, str]:
    """``{option: path}`` of the files the options name whose content decides numbers: the
    candidate answer list (when the profile reads it) and the judge's rubric file."""
    out: dict[str, str] = {}
    if isinstance(scoring, Mapping) and isinstance(scoring.get("candidates"), str) and "candidates" in profile_options:
        out["scoring.candidates"] = scoring["candidates"]
    if open_spec.get("rubric_file"):
        out[f"{'judge' if judge is not None else 'scoring.judge'}.rubric_file"] = str(open_spec["rubric_file"])
    return out


def _check_template(kind: str, template: str) -> str:
    names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    unknown = names - _FIELDS
    if unknown:
        raise ValueError(f"vqa: the {kind} prompt template has unknown placeholder(s) "
                         f"{sorted(unknown)}; allowed: {sorted(_FIELDS)}")
    return template


@register_task("vqa", tags=("vqa", "generative"))
class VQATask(Task):
    """Prompts a generative adapter with each question (options listed as "A. …" for multiple
    choice) and scores the answer. Options: ``scoring`` (profile name or config dict:
    ``medimg_bench``, ``llava_med``, ``llava_med_initial``, ``multimedeval``, ``lmms_eval``,
    ``vlmevalkit`` or ``vlmevalkit_18fc37a``; a dict may add the profile's ``candidates`` /
    ``variant``), ``prompts`` (``closed`` / ``open`` / ``mcq`` templates with
    ``{question}`` and ``{options}``; ``<image>`` marks where the images go), ``system``,
    ``max_new_tokens``, ``circular`` (CircularEval for multiple choice), ``judge`` (a generative
    adapter, or ``{model, options}``; also ``scoring.judge``: asked to map closed/multiple-choice
    answers the profile's rule left unparsed to an option, see
    :mod:`medimg_bench.metrics.text.judge`; profiles ``medimg_bench`` and ``vlmevalkit*``)."""

    name = "vqa"
    default_metrics = {"vqa": {}}

    def __init__(
        self,
        *,
        scoring: str | Mapping[str, Any] | None = "medimg_bench",
        prompts: Mapping[str, str] | None = None,
        system: str | None = None,
        max_new_tokens: int | None = 64,
        circular: bool = False,
        judge: Any = None,
        volume_sampling: str | Mapping[str, Any] | None = None,
    ) -> None:
        profile = scoring.get("name") if isinstance(scoring, Mapping) else (scoring or "medimg_bench")
        if profile not in PROFILES:
            raise ValueError(f"vqa: scoring profile {profile!r} is not built; available: {list(PROFILES)}")
        self.profile = profile
        self.profile_options = _profile_options(profile, scoring)
        self._scorer = VQAScorer(profile, options=self.profile_options)  # decided by the two above
        profile_prompts = dict(scoring.get("prompts") or {}) if isinstance(scoring, Mapping) else {}
        merged = {**DEFAULT_PROMPTS, **profile_prompts, **dict(prompts or {})}  # task options win
        self.prompts = {k: _check_template(k, v) for k, v in merged.items()}
        self.system, self.max_new_tokens, self.circular = system, max_new_tokens, bool(circular)
        from medimg_bench.metrics.text.judge import build_judge
        from medimg_bench.tasks._open_judge import OpenAnswerGrader, split_judge_spec
        from medimg_bench.tasks.volume_prompts import resolve_sampling

        spec = judge if judge is not None else (scoring.get("judge") if isinstance(scoring, Mapping) else None)
        letter_spec, open_spec = split_judge_spec(spec)
        judge_adapter = build_judge(letter_spec)
        # open answers graded under a rubric (any profile: the harness figures are left as they are)
        self.grader = OpenAnswerGrader.from_spec(judge_adapter, open_spec)
        self._files = _option_files(scoring, judge, open_spec, self.profile_options)
        # the letter-extraction judge extends the strict rules only
        self.judge = judge_adapter if profile in JUDGED_PROFILES or self.grader is None else None
        if self.judge is not None and profile not in JUDGED_PROFILES:
            raise ValueError(f"vqa: an LLM judge extends the strict rules only (scoring={list(JUDGED_PROFILES)}); "
                             f"the {profile} profile reproduces its harness, which has no judge "
                             "(a rubric, scoring.judge.rubric, grades open answers under any profile)")
        self.volume_sampling = resolve_sampling(volume_sampling)

    def key_files(self) -> dict[str, str]:
        """``{option: path}`` of the candidate list and rubric files: a run's key holds their content."""
        return dict(self._files)

    def metric_kwargs(self, classes: Sequence[str] | None) -> dict[str, Any]:
        kw: dict[str, Any] = {"profile": self.profile}  # the vqa metric keeps the profile's harness figures
        if self.grader is not None:  # and the open-answer judge's verdicts, for their agreement
            kw["judge_categories"] = list(self.grader.rubric.categories)
            kw["judge_repeats"] = self.grader.repeats
        return kw

    def manifest_notes(self) -> dict[str, Any]:
        """``manifest.json`` additions: the open-answer judge pinned (rubric, prompt hash, judge
        identity, temperature 0 settings) and the volume sampling, when used."""
        out: dict[str, Any] = {}
        if self.grader is not None:
            out["judge"] = self.grader.identity()
        if self.volume_sampling is not None:
            out["volume_sampling"] = self.volume_sampling.to_dict()
        return out

    def build_metrics(self, spec: Any, classes: Sequence[str] | None) -> dict[str, Any]:
        if spec and not any(n == "vqa" or (o or {}).get("metric") == "vqa" for n, o in dict(spec).items()):
            spec = None  # the root config's default classification metrics do not apply
        return super().build_metrics(spec, None)

    def _prompt(self, question: str, kind: str, options: Sequence[str] | None) -> str:
        listed = "\n".join(f"{chr(ord('A') + i)}. {o}" for i, o in enumerate(options or []))
        return self.prompts[kind].format(question=question, options=listed)

    def predict(self, model: Any, batch: dict[str, Any]) -> dict[str, Any]:
        from medimg_bench.metrics.text.vqa import rotate_options
        from medimg_bench.models.vlm.base import GenerationRequest

        settings = generation_settings("vqa", model, self.max_new_tokens)
        requests, owners, sampled = [], [], []
        for i, sid in enumerate(batch["id"]):
            kind, options = batch["answer_type"][i], batch["options"][i]
            images, extra = self._images(batch, i)
            sampled.append(extra)
            shifts = range(len(options)) if (self.circular and kind == "mcq" and options) else [0]
            for shift in shifts:
                opts = rotate_options(options, "A", shift)[0] if kind == "mcq" and options else options
                requests.append(GenerationRequest(
                    images=images, user=self._prompt(batch["question"][i], kind, opts),
                    system=self.system, settings=settings, sample_id=f"{sid}" if shift == 0 else f"{sid}#rot{shift}",
                    key_extra=extra,
                ))
                owners.append((i, shift))
        responses = model.generate(requests)
        per_sample: list[list[tuple[int, Any]]] = [[] for _ in batch["id"]]
        for (i, shift), resp in zip(owners, responses):
            per_sample[i].append((shift, resp))
        out: dict[str, Any] = {"responses": per_sample, "volume_sampling": sampled}
        if self.judge is not None:  # the rule's scores made to choose what to ask are kept
            out["judge"], out["cascade"] = self._ask_judge(batch, per_sample)
        if self.grader is not None:
            out["open_judge"] = self._grade_open(batch, per_sample)
        return out

    def _images(self, batch: dict[str, Any], i: int) -> tuple[list[Any], dict[str, Any] | None]:
        """Sample ``i``'s images for the model and the request's ``key_extra``: a 3D volume
        (``C×X×Y×Z``) becomes images under ``volume_sampling`` (recorded), 2D images pass as they are."""
        from medimg_bench.tasks.volume_prompts import volume_images

        column = batch.get("image")
        raw = column[i] if column is not None else None
        if raw is not None and not isinstance(raw, list | tuple) and getattr(raw, "ndim", 0) == 4:
            if self.volume_sampling is None:
                raise ValueError(f"sample {batch['id'][i]!r}: a 3D volume of shape {tuple(raw.shape)} needs "
                                 f"task.options.volume_sampling (a name of SAMPLINGS or a dict of fields)")
            meta = (batch.get("meta") or [{}] * len(batch["id"]))[i] or {}
            return volume_images(raw, meta, self.volume_sampling, sample_id=str(batch["id"][i]))
        return sample_images(batch, i), None

    def _grade_open(self, batch: dict[str, Any], per_sample: list[list[tuple[int, Any]]]) -> list[Any]:
        """The open-answer judge's verdicts for each open question with a reference (None for
        the other questions), all of the batch in one call per judge."""
        items, owners = [], []
        for i, rotations in enumerate(per_sample):
            resp = rotations[0][1]
            if batch["answer_type"][i] != "open" or batch["answer"][i] is None or resp.error:
                continue
            items.append((str(batch["id"][i]), batch["question"][i], batch["answer"][i], resp.text or ""))
            owners.append(i)
        graded: list[Any] = [None] * len(per_sample)
        for i, one in zip(owners, self.grader.grade(items)):
            graded[i] = one
        return graded

    def _ask_judge(self, batch: dict[str, Any],
                   per_sample: list[list[tuple[int, Any]]]) -> tuple[list[dict[int, Any]], list[dict[int, Any]]]:
        """One judge request per (sample, rotation) whose answer the profile's rule left unparsed,
        all in one ``generate`` call (served from the judge's response cache where possible).
        Returns the judge's responses and the rule's scores (per sample, by rotation), which
        scoring reuses."""
        from medimg_bench.metrics.text.judge import judge_prompt
        from medimg_bench.models.vlm.base import GenerationRequest

        requests, owners = [], []
        first: list[dict[int, Any]] = [{} for _ in per_sample]
        for i, rotations in enumerate(per_sample):
            kind = batch["answer_type"][i]
            for shift, resp in rotations:
                if resp.error:
                    continue
                scored, shown = self._scorer.first_pass(resp.text or "", answer=batch["answer"][i], kind=kind,
                                                       options=batch["options"][i], shift=shift)
                first[i][shift] = scored
                if shown is None:
                    continue
                sid = batch["id"][i]
                requests.append(GenerationRequest(
                    images=[], user=judge_prompt(batch["question"][i], shown, resp.text or ""),
                    settings=self.judge.settings, sample_id=f"{sid}#judge" if shift == 0 else f"{sid}#rot{shift}#judge",
                ))
                owners.append((i, shift))
        judged: list[dict[int, Any]] = [{} for _ in per_sample]
        if requests:
            for (i, shift), resp in zip(owners, self.judge.generate(requests)):
                judged[i][shift] = resp
        return judged, first

    def _score(self, batch: dict[str, Any], i: int, rotations: list[tuple[int, Any]],
               judged: Mapping[int, Any] | None = None, graded: Mapping[str, Any] | None = None,
               first: Mapping[int, Any] | None = None) -> dict[str, Any]:
        """Sample ``i``'s answers scored by :class:`~medimg_bench.metrics.text.vqa_scorer.VQAScorer`."""
        return self._scorer.question(
            [(shift, resp.text or "") for shift, resp in rotations], answer=batch["answer"][i],
            kind=batch["answer_type"][i], options=batch["options"][i],
            judge_replies={shift: resp.text for shift, resp in (judged or {}).items()}, first=first,
            graded=graded, rubric=self.grader.rubric if self.grader is not None else None)

    def _scored(self, batch: dict[str, Any], outputs: dict[str, Any]) -> list[dict[str, Any]]:
        """Each sample's answer scored once (rotations and judge verdicts included); a failed
        request (the model's or a judge's) fails its sample."""
        from medimg_bench.models.vlm.requests import GenerationFailed  # tagged [predict]

        scored = []
        judged = outputs.get("judge") or [None] * len(batch["id"])
        graded = outputs.get("open_judge") or [None] * len(batch["id"])
        first = outputs.get("cascade") or [None] * len(batch["id"])
        for i, (sid, rotations) in enumerate(zip(batch["id"], outputs["responses"])):
            for _, resp in rotations:
                if resp.error:  # a failed request fails its sample, so a resumed run asks again
                    raise GenerationFailed(f"sample {sid!r}: generation failed: {resp.error}")
            for resp in (judged[i] or {}).values():
                if resp.error:  # likewise for the judge: nothing is guessed in its place
                    raise GenerationFailed(f"sample {sid!r}: the judge's request failed: {resp.error}")
            if graded[i] is not None and graded[i].get("error"):
                raise GenerationFailed(graded[i]["error"])
            one = self._score(batch, i, rotations, judged[i], graded[i], first[i])
            if batch["answer"][i] is None:  # withheld (GMAI-MMBench TEST): parsed, not scored
                one["withheld"] = True
            scored.append(one)
        return scored

    def score(self, batch: dict[str, Any], outputs: dict[str, Any], *,
              classes: Sequence[str] | None = None) -> TaskScores:
        """The scored answers and answer types the ``vqa`` metric takes, and the records, from
        one scoring of each answer."""
        scored = self._scored(batch, outputs)
        return TaskScores(scored, list(batch["answer_type"]), self._records(batch, outputs, scored))

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        preds, targets, _ = self.score(batch, outputs)
        return preds, targets

    def sample_records(self, batch: dict[str, Any], outputs: dict[str, Any], classes: Any) -> list[dict[str, Any]]:
        return self.score(batch, outputs, classes=classes).records

    def _records(self, batch: dict[str, Any], outputs: dict[str, Any],
                 scored_all: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        rows = []
        judged = outputs.get("judge") or [None] * len(batch["id"])
        graded = outputs.get("open_judge") or [None] * len(batch["id"])
        sampled = outputs.get("volume_sampling") or [None] * len(batch["id"])
        for i, (sid, rotations) in enumerate(zip(batch["id"], outputs["responses"])):
            first = rotations[0][1]
            scored = scored_all[i]
            meta = (batch.get("meta") or [{}] * len(batch["id"]))[i] or {}
            row = {"id": sid, "question": batch["question"][i], "answer": batch["answer"][i],
                   "answer_type": batch["answer_type"][i], "response": first.text,
                   "parsed": scored.get("parsed"), "rule": scored.get("rule"),
                   "correct": scored.get("correct"), "unparsed": scored.get("unparsed"),
                   "prompt": first.prompt, "cached": bool(first.cached), "profile": self.profile}
            answers = [r for _, r in rotations] + list((judged[i] or {}).values())
            row["n_answers"], row["n_cached_answers"] = len(answers), sum(bool(r.cached) for r in answers)
            if "circular_correct" in scored:
                row["circular_correct"] = scored["circular_correct"]
            if batch["answer"][i] is None:
                row["answer_withheld"] = True
            if batch["options"][i]:
                row["options"] = json.dumps(list(batch["options"][i]))
            row["parsed_by"] = scored.get("parsed_by")  # "cascade" (the profile's rule), "judge" or None
            if self.judge is not None:
                row["judge_response"] = scored.get("judge_response")
            if self.grader is not None:
                row.update(self._graded_row(graded[i], scored))
            if sampled[i]:
                row["volume_sampling"] = sampled[i]["volume_sampling"]["name"]
                row["volume_slices"] = json.dumps(sampled[i]["volume_sampling"]["slices"])
            for key in _CATEGORY_COLUMNS:
                if key in meta:
                    row[key] = meta[key]
            rows.append(row)
        return rows

    def _graded_row(self, graded: Mapping[str, Any] | None, scored: Mapping[str, Any]) -> dict[str, Any]:
        """Per-sample columns of the open-answer judge (empty values for ungraded questions)."""
        g = graded or {}
        row = {"judge_score": scored.get("judge_score"),
               "judge_verdicts": json.dumps(g["labels"]) if g.get("labels") is not None else None,
               "judge_replies": json.dumps(g["replies"]) if g.get("replies") is not None else None}
        if self.grader.second is not None:
            row["judge2_verdict"] = g.get("second_label")
            row["judge2_reply"] = g.get("second_reply")
        return row

    def write_outputs(self, results: Any, run_dir: Any) -> list[Any]:
        """Files of a finished run beside ``summary.json`` (called by ``Results.save``):

        * ``per_category.csv`` — ``summary["subgroups"]`` flat: attribute, metric, group, value,
          ci_low, ci_high, n (when ``subgroups=[...]`` ran);
        * ``submission.tsv`` — when answers are withheld (GMAI-MMBench TEST): one row per
          question in dataset order, laid out as VLMEvalKit's prediction file with
          ``PRED_FORMAT=tsv`` (the dataset's columns without ``image``: ``index``, ``question``,
          option columns ``A``…, category columns, then ``prediction`` = the raw response), plus
          ``parsed`` (our extracted letter, empty when unparsed), ``unparsed`` and ``error``
          (a question whose request failed has an empty prediction and its error). TSV, not
          VLMEvalKit's default ``.xlsx``: no spreadsheet writer (openpyxl) is a dependency.
        """
        from pathlib import Path

        import pandas as pd

        from medimg_bench.tasks.tables import subgroup_table

        run_dir, written = Path(run_dir), []
        if results.summary.get("subgroups"):
            path = run_dir / "per_category.csv"
            subgroup_table(results.summary).to_csv(path, index=False)
            written.append(path)
        samples = results.samples.drop_duplicates("id")
        if "answer_withheld" not in samples.columns or not samples["answer_withheld"].astype(str).eq("True").any():
            return written
        rows = []
        for _, r in samples.iterrows():
            ok = r.get("status", "ok") == "ok"
            row: dict[str, Any] = {"index": r["id"], "question": r.get("question")}
            try:
                options = json.loads(r["options"]) if isinstance(r.get("options"), str) else []
            except ValueError:
                options = []
            row.update({chr(ord("A") + k): o for k, o in enumerate(options)})
            row.update({c: r.get(c) for c in _CATEGORY_COLUMNS if c in samples.columns})
            parsed = r.get("parsed") if ok else None
            row.update(prediction=(r.get("response") if ok else "") or "",
                       parsed="" if parsed is None or str(parsed) in ("None", "nan") else str(parsed),
                       unparsed=r.get("unparsed") if ok else None,
                       error="" if ok else str(r.get("error") or ""))
            rows.append(row)
        frame = pd.DataFrame(rows)
        letters = sorted(c for c in frame.columns if len(c) == 1 and c.isupper())
        lead = ["index", "question", *letters]
        frame = frame[lead + [c for c in frame.columns if c not in lead]]
        path = run_dir / SUBMISSION_FILE
        frame.to_csv(path, sep="\t", index=False)
        n_failed = int((frame["error"] != "").sum())
        if n_failed:
            log.warning("vqa: %s has %d question(s) without a prediction (failed requests); "
                        "resume the run to ask again before submitting", path, n_failed)
        written.append(path)
        return written
