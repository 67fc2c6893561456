"""Reconstructions from a folder: fastMRI's submission format ``<id>.h5`` (``reconstruction``,
optionally ``segmentation``) or ``<id>.npy``, one volume ``(S, H, W)`` per sample."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from medimg_bench.models.predictions.lookup import Lookup

__all__ = ["ReconsFromFolder"]


class ReconsFromFolder(Lookup):
    """``predict(batch) -> {"recon"[, "labels"]}`` from ``<id>.h5`` / ``<id>.npy``. A stored
    ``segmentation`` is a label map, decoded by the one mask decoder: a float one with fractions
    (soft or probability values) is refused naming the file, as from a NIfTI file, never cast."""

    task = "reconstruction"
    num_classes: int | None = None  # the dataset's label count, once bound: larger labels are refused

    def bind_dataset(self, dataset: Any) -> None:
        """Remember the dataset's label count (``classes`` include the background)."""
        classes = getattr(dataset, "classes", None)
        self.num_classes = len(classes) if classes else None

    def _known_ids(self) -> set[str]:
        return {p.stem for p in self.source.glob("*.h5")} | {p.stem for p in self.source.glob("*.npy")}

    def _read(self, sid: str) -> tuple[np.ndarray, np.ndarray | None]:
        h5, npy = self.source / f"{sid}.h5", self.source / f"{sid}.npy"
        if h5.exists():
            import h5py

            try:
                with h5py.File(h5, "r") as f:
                    if "reconstruction" not in f:
                        raise ValueError(f"{str(h5)!r} has no 'reconstruction' dataset (has {sorted(f.keys())})")
                    recon = f["reconstruction"][()]
                    seg = f["segmentation"][()] if "segmentation" in f else None
            except OSError as exc:
                raise ValueError(f"cannot read {str(h5)!r}: {exc}") from exc
        elif npy.exists():
            recon, seg = np.load(npy, allow_pickle=False), None
        else:
            raise self._missing(sid)
        where = h5 if h5.exists() else npy
        if np.iscomplexobj(recon):
            raise ValueError(f"{str(where)!r}: complex reconstruction; store its magnitude")
        if recon.ndim != 3 or not np.isfinite(recon).all():
            raise ValueError(f"{str(where)!r}: reconstruction must be a finite (slices, H, W) array, "
                             f"got shape {recon.shape}")
        if seg is not None:
            from medimg_bench.datasets.masks import check_label_map

            seg = check_label_map(seg, f"{where}:segmentation", num_classes=self.num_classes, what="segmentation")
        return recon, seg

    def predict(self, batch: dict[str, Any]) -> dict[str, Any]:
        recons, segs = [], []
        for sid in batch["id"]:
            try:
                recon, seg = self._read(str(sid))
            except Exception as exc:
                exc.stage = "predict"  # type: ignore[attr-defined]
                raise
            recons.append(torch.from_numpy(np.ascontiguousarray(recon, dtype=np.float32)).to(self.device))
            segs.append(None if seg is None else torch.from_numpy(np.ascontiguousarray(seg)).to(self.device))
        out: dict[str, Any] = {"recon": torch.stack(recons) if len({r.shape for r in recons}) == 1 else recons}
        if all(s is not None for s in segs):
            out["labels"] = torch.stack(segs) if len({s.shape for s in segs}) == 1 else segs
        return out
