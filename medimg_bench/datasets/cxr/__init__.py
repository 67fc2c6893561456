"""Chest X-ray datasets in their official on-disk layouts.

Every loader builds a manifest (one row per image: ``id``, ``path`` relative to ``root``,
``patient_id``, ``study_id``, ``view``, subgroup columns and one column per label) without reading
pixels, and returns a :class:`CXRDataset`. Multi-label datasets give ``label`` as a float vector in
``classes`` order with NaN = unlabelled; multi-class ones an int index into ``classes``.
Intensity handling: see :mod:`medimg_bench.datasets.cxr.pixels` (option ``normalize=``, default
``"auto"``: bit-depth range → [0, 1], DICOM MONOCHROME1 inverted).

Options shared by every loader: ``normalize``, ``channels`` (1 grey or 3), ``views`` (keep rows
whose ``view`` is in the list, e.g. ``["PA", "AP"]``), ``transform``, and ``on_missing``:
``"error"`` (default: a listed image absent from disk raises, naming the CSV row and file),
``"skip"`` (drop such rows, logging how many) or ``"lazy"`` (no check; error when read).


Modules: ``base`` (the shared loader), ``_layout`` (what the loaders share in reading their
layouts, and ``cxr_loader``, which registers them with the shared options), one module per dataset (``nih_cxr14``, ``chexpert``,
``mimic_cxr``, ``rsna_pneumonia``, ``siim_pneumothorax``, ``vindr_cxr``, ``image_csv`` = the
generic ``csv`` loader), ``pixels`` (intensity handling) and ``labels`` (label names and
harmonisation).
"""

from __future__ import annotations

from medimg_bench.datasets.cxr.base import IMAGE_SUFFIXES, CXRDataset
from medimg_bench.datasets.cxr.chexpert import chexpert
from medimg_bench.datasets.cxr.image_csv import csv_dataset
from medimg_bench.datasets.cxr.labels import (
    CHEXPERT_PATHOLOGIES,
    NIH_PATHOLOGIES,
    PATHOLOGIES,
    SYNONYMS,
    apply_uncertainty,
    canonical_name,
    harmonize_labels,
)
from medimg_bench.datasets.cxr.mimic_cxr import mimic_cxr
from medimg_bench.datasets.cxr.nih_cxr14 import nih_cxr14
from medimg_bench.datasets.cxr.pixels import (
    NORMALIZE_MODES,
    decode_siim_rle,
    dicom_header,
    encode_siim_rle,
    load_cxr_image,
)
from medimg_bench.datasets.cxr.rsna_pneumonia import RSNA_CLASSES, rsna_pneumonia
from medimg_bench.datasets.cxr.siim_pneumothorax import siim_pneumothorax
from medimg_bench.datasets.cxr.vindr_cxr import vindr_cxr

__all__ = [
    "CHEXPERT_PATHOLOGIES",
    "CXRDataset",
    "IMAGE_SUFFIXES",
    "NIH_PATHOLOGIES",
    "NORMALIZE_MODES",
    "PATHOLOGIES",
    "RSNA_CLASSES",
    "SYNONYMS",
    "apply_uncertainty",
    "canonical_name",
    "chexpert",
    "csv_dataset",
    "decode_siim_rle",
    "dicom_header",
    "encode_siim_rle",
    "harmonize_labels",
    "load_cxr_image",
    "mimic_cxr",
    "nih_cxr14",
    "rsna_pneumonia",
    "siim_pneumothorax",
    "vindr_cxr",
]
