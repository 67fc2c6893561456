"""Radiology report generation: a generative adapter writes a report from the study's image(s);
the reference is the section the dataset option ``section`` chooses (findings by default)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.registry import register_task
from medimg_bench.tasks._generative import sample_images
from medimg_bench.tasks.base import Task

__all__ = ["ReportGenerationTask"]

DEFAULT_PROMPT = (
    "You are a radiologist. Write the findings section of the radiology report for this chest "
    "X-ray in a few sentences."
)


@register_task("report_generation", tags=("report", "generative"))
class ReportGenerationTask(Task):
    """Prompts a generative adapter (``model.generate``) with each study's images; scores the
    generated report against the reference (``report``) with the text and factuality metrics.

    Options: ``prompt`` (``<image>`` marks where images go; images not placed come first),
    ``system``, ``max_new_tokens``."""

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
    ) -> None:
        self.prompt, self.system, self.max_new_tokens = prompt, system, max_new_tokens

    def build_metrics(self, spec: Any, classes: Sequence[str] | None) -> dict[str, Any]:
        # the root config's default (classification) metrics do not apply to reports
        if spec and not any(name in ("report_nlg", "chexpert_f1") or (opts or {}).get("metric") in
                            ("report_nlg", "chexpert_f1") for name, opts in dict(spec).items()):
            spec = None
        return super().build_metrics(spec, None)

    def predict(self, model: Any, batch: dict[str, Any]) -> dict[str, Any]:
        from medimg_bench.models.vlm.base import GenerationRequest

        if not hasattr(model, "generate"):
            raise TypeError(f"task report_generation needs a generative adapter (model.generate); got {type(model).__name__}")
        settings = model.settings
        if self.max_new_tokens is not None:
            settings = dataclasses.replace(settings, max_new_tokens=int(self.max_new_tokens))
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
        return rows

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
