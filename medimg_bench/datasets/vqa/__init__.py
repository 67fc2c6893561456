"""Medical visual question answering datasets, read from their released layouts.

Samples: ``id``, ``image`` (float ``C×H×W`` in ``[0, 1]``, or a list of them for multi-image
datasets), ``question``, ``options`` (list of option texts in letter order, or None),
``answer`` (the option letter for multiple choice, the answer text otherwise; None where the
release withholds answers), ``answer_type`` (``closed`` / ``open`` / ``mcq``) and ``meta``
(``patient_id`` = the image or source video, so splits keep questions on one image together;
``answer_type_original`` when the dataset's own type differs; ``answer_text`` for mcq).

Bad rows (unknown answer letter, missing fields) raise ``ValueError`` naming the file and row
at construction, or are skipped with a logged count with ``on_error="skip"``; unreadable images
raise :class:`~medimg_bench.sample.SampleError` naming the sample and file when loaded.
"""

from __future__ import annotations

from medimg_bench.datasets.vqa.base import LETTERS, VQADataset
from medimg_bench.datasets.vqa.cxreasonbench import cxreasonbench
from medimg_bench.datasets.vqa.gmai_mmbench import gmai_mmbench
from medimg_bench.datasets.vqa.medframeqa import medframeqa
from medimg_bench.datasets.vqa.medxpertqa import medxpertqa_mm
from medimg_bench.datasets.vqa.omnibrainbench import omnibrainbench
from medimg_bench.datasets.vqa.omnimedvqa import omnimedvqa
from medimg_bench.datasets.vqa.pathvqa import pathvqa
from medimg_bench.datasets.vqa.pmc_vqa import pmc_vqa
from medimg_bench.datasets.vqa.readers import decode_image
from medimg_bench.datasets.vqa.slake import slake
from medimg_bench.datasets.vqa.spinebench import spinebench
from medimg_bench.datasets.vqa.synthetic_vqa import synthetic_vqa
from medimg_bench.datasets.vqa.vqa_rad import vqa_rad

__all__ = [
    "LETTERS",
    "VQADataset",
    "decode_image",
    "cxreasonbench",
    "gmai_mmbench",
    "medframeqa",
    "medxpertqa_mm",
    "omnibrainbench",
    "omnimedvqa",
    "pathvqa",
    "pmc_vqa",
    "slake",
    "spinebench",
    "synthetic_vqa",
    "vqa_rad",
]
