"""MedMNIST v2 / MedMNIST+ from the official ``{flag}.npz`` / ``{flag}_{size}.npz`` files.

Each file holds ``{train,val,test}_images`` (2D: N×H×W grey or N×H×W×3 RGB; 3D: N×D×H×W) and
``{split}_labels`` (N×1 class index, or N×14 0/1 for ChestMNIST) as uint8.

Memory: an ``.npz`` is a zip archive and NumPy cannot memory-map its members. This loader
(``mmap=True``, default) memory-maps a member in place when it is stored uncompressed (what
``np.savez`` writes: the array bytes sit contiguously in the zip at a known offset); when the member
is deflate-compressed (``np.savez_compressed``) it is extracted once to
``{cache_dir}/{file stem}/{split}_images.npy`` (default cache dir: ``$MEDIMG_BENCH_CACHE`` or
``~/.cache/medimg_bench``, then ``medmnist``) and that file is memory-mapped, so DataLoader
workers share pages instead of each holding a copy. ``mmap=False`` loads the split into memory.
Labels are always loaded (a few bytes per sample).

What the official release holds — the split sizes and MD5 of every flag at every size, per
Zenodo record — is in ``release.py`` (:func:`split_sizes`, :func:`official_md5`,
:func:`identify_file`); ``MedMNISTDataset.file_check()`` says whether a split's file is official.
"""

from __future__ import annotations

from medimg_bench.datasets.medmnist.dataset import MedMNISTDataset, MedMNISTSource, medmnist
from medimg_bench.datasets.medmnist.npz import npz_member
from medimg_bench.datasets.medmnist.release import (
    MEDMNIST_INFO,
    RELEASES,
    FileCheck,
    identify_file,
    official_md5,
    split_sizes,
)

__all__ = [
    "MEDMNIST_INFO",
    "RELEASES",
    "FileCheck",
    "MedMNISTDataset",
    "MedMNISTSource",
    "identify_file",
    "medmnist",
    "npz_member",
    "official_md5",
    "split_sizes",
]
