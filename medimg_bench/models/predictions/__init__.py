"""Score predictions that already exist (``model=predictions model.options.root=...``): another
tool's outputs are looked up by sample id and go through this package's metrics and conventions.

* classification scores: a CSV or Parquet file (``root`` itself, or ``predictions.csv`` /
  ``predictions.parquet`` in the folder ``root``) with an ``id`` column and one column per class,
  matched to the dataset's classes by name in any order (columns without class names only in
  the order of ``classes``); probabilities, or logits with ``scores=logits``;
* segmentation label maps: a folder of NIfTI files named ``<id>.nii.gz`` (or ``.nii``), checked
  against the image grid with the loaders' rule (:mod:`medimg_bench.datasets.grid`: flips and
  axis order re-oriented, anything else a per-sample error naming both files);
* VQA answers or generated reports: a CSV, Parquet or JSONL file (``root`` itself, or
  ``predictions.jsonl`` / ``.csv`` / ``.parquet``) with an id and a text column (found by the names
  report-generation repositories commit: ``dicom_id,report``, ``study_id,report``, ``id,text``...;
  or ``id_column`` / ``text_column``), served through the generative protocol (``generate``).
  Such a run reads no pixels: the dataset is told to skip its images.
* 2D maps: a folder of ``<id>.png`` / ``<id>.npy`` probability maps (:mod:`.maps`), served as
  float64 ``maps`` and thresholded ``labels``; a size mismatch with the mask names both files.

Every prediction is checked when loaded (:mod:`.checks`): a refusal names the file and the line.
A prediction missing for a sample fails that sample with its id (a missed case never vanishes
from the mean). Predictions for ids the dataset does not have are counted and logged once, when
the run first asks for a prediction.
"""

from __future__ import annotations

from medimg_bench.models.predictions.answers import AnswersFromFile
from medimg_bench.models.predictions.factory import predictions
from medimg_bench.models.predictions.label_maps import LabelMapsFromFolder
from medimg_bench.models.predictions.maps import MapsFromFolder, read_map
from medimg_bench.models.predictions.scores import ScoresFromFile

__all__ = ["ScoresFromFile", "LabelMapsFromFolder", "MapsFromFolder", "AnswersFromFile", "predictions",
           "read_map"]
