"""Score predictions that already exist (``model=predictions model.options.root=...``): another
tool's outputs are looked up by sample id and go through this package's metrics and conventions.

* classification scores: a CSV or Parquet file (``root`` itself, or ``predictions.csv`` /
  ``predictions.parquet`` in the folder ``root``) with an ``id`` column and one column per class
  (``classes`` picks and orders them; default: every other column, in file order);
* segmentation label maps: a folder of NIfTI files named ``<id>.nii.gz`` (or ``.nii``), checked
  against the image grid with the loaders' rule (:mod:`medimg_bench.datasets.grid`: flips and
  axis order re-oriented, anything else a per-sample error naming both files);
* VQA or report answers: a JSONL file (``root`` itself, or ``predictions.jsonl``) with ``id`` and
  ``text`` per line, served through the generative protocol (``generate``).

A prediction missing for a sample fails that sample with its id (a missed case never vanishes
from the mean). Predictions for ids the dataset does not have are counted and logged once, when
the run first asks for a prediction.
"""

from __future__ import annotations

from medimg_bench.models.predictions.answers import AnswersFromFile
from medimg_bench.models.predictions.factory import predictions
from medimg_bench.models.predictions.label_maps import LabelMapsFromFolder
from medimg_bench.models.predictions.scores import ScoresFromFile

__all__ = ["ScoresFromFile", "LabelMapsFromFolder", "AnswersFromFile", "predictions"]
