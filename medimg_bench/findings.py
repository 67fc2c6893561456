"""Names of findings shared by the dataset loaders and the metrics (a core module: it imports
nothing of the package, so both rooms can use it)."""

from __future__ import annotations

__all__ = ["CHEXPERT_PATHOLOGIES"]

#: The 14 observations of the CheXpert labeler (also used by MIMIC-CXR-JPG), CSV column order.
CHEXPERT_PATHOLOGIES = (
    "No Finding",
    "Enlarged Cardiomediastinum",
    "Cardiomegaly",
    "Lung Opacity",
    "Lung Lesion",
    "Edema",
    "Consolidation",
    "Pneumonia",
    "Atelectasis",
    "Pneumothorax",
    "Pleural Effusion",
    "Pleural Other",
    "Fracture",
    "Support Devices",
)
