"""The ``fastmri`` dataset: fastMRI HDF5 volumes (Zbontar et al. 2018; ``facebookresearch/fastMRI``).

Layout: a folder of ``*.h5`` files, each with ``kspace`` (slices, coils, rows, cols) complex
(multicoil) or (slices, rows, cols) (singlecoil) and the reference ``reconstruction_rss``
(multicoil) or ``reconstruction_esc`` (singlecoil), attributes ``acquisition`` and ``max``.
Test files without a reference are refused (no target). One sample per file; the patient is the
file (fastMRI publishes no patient ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.mri_recon.base import ReconDataset
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = ["FastMRIDataset", "fastmri"]


class FastMRIDataset(ReconDataset):
    """fastMRI volumes; the target key is ``reconstruction_rss`` or ``reconstruction_esc``."""

    def read_arrays(self, row: Mapping[str, Any], path: Path) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        import h5py

        try:
            with h5py.File(path, "r") as f:
                key = next((k for k in ("reconstruction_rss", "reconstruction_esc") if k in f), None)
                if "kspace" not in f or key is None:
                    raise SampleError(f"fastMRI file needs 'kspace' and a reference reconstruction "
                                      f"(has {sorted(f.keys())})", sample_id=str(row["id"]), path=str(path))
                kspace = f["kspace"][()]
                target = f[key][()]
        except OSError as exc:
            raise SampleError(f"cannot read HDF5: {exc}", sample_id=str(row["id"]), path=str(path)) from exc
        if kspace.ndim == 3:  # singlecoil: one coil
            kspace = kspace[:, None]
        return kspace, None, target


@register_dataset("fastmri", tags=("mri", "reconstruction", "2d"))
def fastmri(root: str | Path, split: str | None = None, **options: Any) -> FastMRIDataset:
    """A folder of fastMRI ``*.h5`` volumes; ``split`` names the rows (all belong to it)."""
    r = Path(root).expanduser()
    if not r.is_dir():
        raise FileNotFoundError(f"fastmri: dataset root {str(r)!r} does not exist or is not a directory")
    files = sorted(p.name for p in r.glob("*.h5"))
    if not files:
        raise FileNotFoundError(f"fastmri: no *.h5 file in {str(r)!r}")
    rows = [{"id": Path(f).stem, "file": f, "split": split, "modality": "MR"} for f in files]
    return FastMRIDataset(pd.DataFrame(rows), root=r, name="fastmri", **options)
