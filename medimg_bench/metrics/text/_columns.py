"""What the per-sample metrics of scored replies share (``moaks``, ``cxreasonbench_reasoning``):
one row per sample, one named column per figure in [0, 1], NaN where a sample is not covered.

Not a table reader: the columns of the tables the toolkit reads are found by the one column
matcher, :mod:`medimg_bench.datasets.columns`."""

from __future__ import annotations

import torch

from medimg_bench.metrics.base import Metric

__all__ = ["ReplyColumns"]


class ReplyColumns(Metric):
    """A per-sample metric of text replies whose :meth:`values` are a ``(N, len(columns))`` table:
    :meth:`metric_values` gives each named column (one no sample covers, all NaN, is left out) and
    :meth:`compute` each column's mean over the samples it covers. Subclasses set ``name``,
    ``columns`` and, where a column differs, ``directions``, and implement ``update`` and
    ``values``."""

    per_sample = True
    higher_is_better = True
    value_range = (0.0, 1.0)
    input_kind = "text"
    columns: tuple[str, ...] = ()

    def metric_values(self) -> dict[str, tuple[list[str], torch.Tensor]]:
        ids, table = self.values()
        return {col: (ids, table[:, j:j + 1]) for j, col in enumerate(self.columns)
                if not (table.numel() and bool(table[:, j].isnan().all()))}

    def compute(self) -> torch.Tensor:
        """Each column's mean over the samples it covers (NaN left out)."""
        return self.values()[1].nanmean(0)
