"""Radiology report generation: a generative adapter writes a report from the study's image(s);
the reference is the section the dataset option ``section`` chooses (findings by default).

``scoring`` names the text pipeline whose corpus-level figures go into ``summary.json``
(``metrics.BLEU_1`` ... with a bootstrap interval over patients), beside the per-report means of
``report_nlg``: ``coco`` (default: PTB tokenizer + pycocoevalcap's scorers), ``r2gen`` (R2Gen's
evaluation path; options ``variant``, ``dataset``, ``threshold``, ``max_seq_length``,
``train_split``) or ``rexrank`` (CXR-Report-Metric's per-report ``bleu_score``, ``bertscore``,
``semb_score``, ``radgraph_combined``, ``RadCliQ-v0``, ``RadCliQ-v1``: columns of the sample table,
their means in ``summary.json``; the model-based ones need the models their options name, else
they are absent and ``summary.json`` says why). See :mod:`medimg_bench.metrics.text.pipelines`,
:mod:`medimg_bench.metrics.text.rexrank` and docs/reports.md."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medimg_bench._fs import atomic_write
from medimg_bench.registry import register_task
from medimg_bench.tasks._generative import generation_settings, sample_images
from medimg_bench.tasks.base import Task

__all__ = ["ReportGenerationTask"]

_BOOTSTRAP_KEYS = ("n_resamples", "confidence", "seed")

DEFAULT_PROMPT = (
    "You are a radiologist. Write the findings section of the radiology report for this chest "
    "X-ray in a few sentences."
)


@register_task("report_generation", tags=("report", "generative"))
class ReportGenerationTask(Task):
    """Prompts a generative adapter (``model.generate``) with each study's images; scores the
    generated report against the reference (``report``) with the text and factuality metrics.

    Options: ``prompt`` (``<image>`` marks where images go; images not placed come first),
    ``system``, ``max_new_tokens``, ``scoring`` (pipeline name or ``{name, ...options}``)."""

    name = "report_generation"
    default_metrics = {
        "report_nlg": {},
        "chexpert_f1": {"observations": "14"},
        "chexpert_5_micro_f1": {"metric": "chexpert_f1", "observations": "5", "average": "micro"},
        "chexpert_14_micro_f1": {"metric": "chexpert_f1", "observations": "14", "average": "micro"},
    }

    def __init__(
        self,
        *,
        prompt: str = DEFAULT_PROMPT,
        system: str | None = None,
        max_new_tokens: int | None = 256,
        scoring: str | Mapping[str, Any] | None = "coco",
    ) -> None:
        from medimg_bench.metrics.text.pipelines import SCORING_PIPELINES

        self.prompt, self.system, self.max_new_tokens = prompt, system, max_new_tokens
        spec = dict(scoring) if isinstance(scoring, Mapping) else {"name": scoring or "coco"}
        self.scoring = str(spec.pop("name", "coco"))
        if self.scoring not in SCORING_PIPELINES:
            raise ValueError(f"report_generation: scoring {self.scoring!r} is not built; "
                             f"available: {list(SCORING_PIPELINES)}")
        self.scoring_options = spec
        self._rexrank = None
        if self.scoring == "rexrank":  # a wrong model path is refused now, naming its option
            from medimg_bench.metrics.text.rexrank import RexrankScorer

            self._rexrank = RexrankScorer(**{k: v for k, v in spec.items() if k not in _BOOTSTRAP_KEYS})

    def key_files(self) -> dict[str, Any]:
        """``{"scoring.<option>": local path}`` of the models and annotation file ``scoring=rexrank``
        reads: a run's key holds their content (see :meth:`RexrankScorer.files`)."""
        if self._rexrank is None:
            return {}
        return {f"scoring.{k}": v for k, v in self._rexrank.files().items()}

    def build_metrics(self, spec: Any, classes: Sequence[str] | None) -> dict[str, Any]:
        # the root config's default (classification) metrics do not apply to reports
        if spec and not any(name in ("report_nlg", "chexpert_f1") or (opts or {}).get("metric") in
                            ("report_nlg", "chexpert_f1") for name, opts in dict(spec).items()):
            spec = None
        return super().build_metrics(spec, None)

    def predict(self, model: Any, batch: dict[str, Any]) -> dict[str, Any]:
        from medimg_bench.models.vlm.base import GenerationRequest

        settings = generation_settings("report_generation", model, self.max_new_tokens)
        requests = [
            GenerationRequest(images=sample_images(batch, i), user=self.prompt, system=self.system,
                              settings=settings, sample_id=str(sid))
            for i, sid in enumerate(batch["id"])
        ]
        return {"responses": model.generate(requests)}

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        from medimg_bench.models.vlm.requests import GenerationFailed  # tagged [predict]

        generated, references = [], []
        for sid, resp, ref in zip(batch["id"], outputs["responses"], batch["report"]):
            if resp.error:  # failed requests are failed samples, so a resumed run retries them
                raise GenerationFailed(f"sample {sid!r}: generation failed: {resp.error}")
            if not isinstance(ref, str) or not ref.strip():
                raise ValueError(f"sample {sid!r}: no reference report")
            generated.append(resp.text or "")
            references.append(ref)
        return generated, references

    def sample_records(self, batch: dict[str, Any], outputs: dict[str, Any], classes: Any) -> list[dict[str, Any]]:
        from medimg_bench.metrics.text.chexpert_labeler import label_reports

        gen = [r.text or "" for r in outputs["responses"]]
        refs = list(batch["report"])
        g_lab, r_lab = label_reports(gen), label_reports(refs)
        rows = []
        for i, (sid, resp) in enumerate(zip(batch["id"], outputs["responses"])):
            row = {"id": sid, "generated": gen[i], "reference": refs[i], "prompt": resp.prompt,
                   "tokens_out": resp.tokens_out, "finish_reason": resp.finish_reason,
                   "cached": bool(resp.cached)}
            for obs in g_lab.columns:
                row[f"gen_{obs}"] = float(g_lab[obs].iloc[i])
                row[f"ref_{obs}"] = float(r_lab[obs].iloc[i])
            rows.append(row)
        if self._rexrank is not None:  # per report, under the names CXR-Report-Metric writes
            for name, values in self._rexrank.score(gen, refs).items():
                for row, value in zip(rows, values):
                    row[name] = float(value)
        return rows

    def write_outputs(self, results: Any, run_dir: Path) -> None:
        """Adds the scoring pipeline's corpus-level figures to ``summary.json`` (``metrics``,
        ``kind: corpus``, under the names the pipeline's code prints) with a bootstrap interval
        over patients; the per-report means stay beside them."""
        from medimg_bench.metrics.text.pipelines import corpus_figures

        samples = results.samples
        if samples is None or "generated" not in samples or not len(samples):
            return
        ok = samples.dropna(subset=["generated", "reference"]).drop_duplicates("id")
        if ok.empty:
            return
        opts = {k: v for k, v in self.scoring_options.items() if v is not None}
        boot = {k: opts.pop(k) for k in _BOOTSTRAP_KEYS if k in opts}
        summary = results.summary
        boot.setdefault("n_resamples", int(summary.get("n_resamples") or 1000))
        boot.setdefault("confidence", float(summary.get("confidence") or 0.95))
        if self.scoring == "r2gen":
            opts["train_reports"] = self._train_reports(run_dir, opts.pop("train_split", "train"))
            opts.setdefault("dataset", "mimic_cxr" if "mimic" in str(self._dataset_cfg(run_dir).get("name")) else "iu_xray")
        else:
            opts.pop("train_split", None)
        shown, per_report = dict(opts), None
        if self._rexrank is not None:  # the model scores are the sample table's columns: averaged, not rerun
            opts = {}
            per_report = {c: ok[c].astype(float).to_numpy() for c in self._rexrank.columns
                          if c != "bleu_score" and c in ok}
        groups = ok["patient_id"].astype(str).tolist() if "patient_id" in ok else None
        figures = corpus_figures(ok["generated"].astype(str).tolist(), ok["reference"].astype(str).tolist(),
                                 groups=groups, scoring=self.scoring, per_report=per_report, **boot, **opts)
        path = run_dir / "summary.json"
        on_disk = json.loads(path.read_text()) if path.exists() else {}
        for target in (summary, on_disk):
            metrics = target.setdefault("metrics", {})
            for name, fig in figures.items():
                metrics[name] = {"kind": "corpus", "pipeline": self.scoring, "n": len(ok), "mean": dict(fig)}
            target["report_text"] = {"pipeline": self.scoring, "figures": list(figures),
                                     "options": {k: v for k, v in shown.items() if k != "train_reports"},
                                     "interval": "percentile bootstrap over patient_id"}
            if self._rexrank is not None:
                target["report_text"]["absent"] = dict(self._rexrank.absent)
        with atomic_write(path, mode="w", encoding="utf-8") as fh:
            fh.write(json.dumps(on_disk, indent=2))

    @staticmethod
    def _dataset_cfg(run_dir: Path) -> dict[str, Any]:
        manifest = json.loads((run_dir / "manifest.json").read_text())
        return dict((manifest.get("config") or {}).get("dataset") or {})

    def _train_reports(self, run_dir: Path, split: str) -> list[str]:
        """The reference reports of the run dataset's training split (R2Gen's vocabulary)."""
        from medimg_bench.registry import create_dataset

        dcfg = self._dataset_cfg(run_dir)
        if not dcfg.get("name"):
            raise ValueError("scoring=r2gen: the run's dataset config is not in manifest.json")
        kwargs = dict(dcfg.get("options") or {})
        if dcfg.get("root") is not None:
            kwargs["root"] = dcfg["root"]
        train = create_dataset(dcfg["name"], split=split, **kwargs)
        reports = [str(r) for r in train.manifest["report"]]
        if not reports:
            raise ValueError(f"scoring=r2gen: the {split!r} split of {dcfg['name']!r} has no reports")
        return reports

    def plots(self, results: Any, out_dir: Path) -> list[Path]:
        """Writes ``report_scores.json`` next to the plots: corpus-level text metrics as
        pycocoevalcap computes them, the factuality variants and the measurement checks."""
        from medimg_bench.metrics.text.factuality import factuality_scores
        from medimg_bench.metrics.text.measurements import measurement_scores
        from medimg_bench.metrics.text.nlg import report_text_scores

        samples = results.samples
        if samples is None or "generated" not in samples or not len(samples):
            return []
        ok = samples.dropna(subset=["generated", "reference"]).drop_duplicates("id")
        if ok.empty:
            return []
        gen, refs = ok["generated"].astype(str).tolist(), ok["reference"].astype(str).tolist()
        scores = {
            "n_reports": len(gen),
            "text": report_text_scores(gen, refs),
            "factuality": {conv: factuality_scores(gen, refs, uncertain=conv) for conv in ("positive", "negative")},
            "measurements": measurement_scores(gen, refs),
        }
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "report_scores.json"
        path.write_text(json.dumps(scores, indent=2, default=float))
        return [path]

