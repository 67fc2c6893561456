"""What the MedMNIST v2 / MedMNIST+ release holds: per flag the task, class names, channels and sizes."""

from __future__ import annotations

__all__ = ["MEDMNIST_INFO"]

_ORGAN = [
    "bladder",
    "femur-left",
    "femur-right",
    "heart",
    "kidney-left",
    "kidney-right",
    "liver",
    "lung-left",
    "lung-right",
    "pancreas",
    "spleen",
]

#: flag → (task, channels, 3D?, class names) as published with MedMNIST (medmnist/info.py, v3.0).
MEDMNIST_INFO: dict[str, tuple[str, int, bool, tuple[str, ...]]] = {
    "pathmnist": (
        "multi-class",
        3,
        False,
        (
            "adipose",
            "background",
            "debris",
            "lymphocytes",
            "mucus",
            "smooth muscle",
            "normal colon mucosa",
            "cancer-associated stroma",
            "colorectal adenocarcinoma epithelium",
        ),
    ),
    "chestmnist": (
        "multi-label",
        1,
        False,
        (
            "atelectasis",
            "cardiomegaly",
            "effusion",
            "infiltration",
            "mass",
            "nodule",
            "pneumonia",
            "pneumothorax",
            "consolidation",
            "edema",
            "emphysema",
            "fibrosis",
            "pleural",
            "hernia",
        ),
    ),
    "dermamnist": (
        "multi-class",
        3,
        False,
        (
            "actinic keratoses and intraepithelial carcinoma",
            "basal cell carcinoma",
            "benign keratosis-like lesions",
            "dermatofibroma",
            "melanoma",
            "melanocytic nevi",
            "vascular lesions",
        ),
    ),
    "octmnist": (
        "multi-class",
        1,
        False,
        ("choroidal neovascularization", "diabetic macular edema", "drusen", "normal"),
    ),
    "pneumoniamnist": ("binary-class", 1, False, ("normal", "pneumonia")),
    "retinamnist": ("ordinal-regression", 3, False, ("0", "1", "2", "3", "4")),
    "breastmnist": ("binary-class", 1, False, ("malignant", "normal, benign")),
    "bloodmnist": (
        "multi-class",
        3,
        False,
        (
            "basophil",
            "eosinophil",
            "erythroblast",
            "immature granulocytes(myelocytes, metamyelocytes and promyelocytes)",
            "lymphocyte",
            "monocyte",
            "neutrophil",
            "platelet",
        ),
    ),
    "tissuemnist": (
        "multi-class",
        1,
        False,
        (
            "Collecting Duct, Connecting Tubule",
            "Distal Convoluted Tubule",
            "Glomerular endothelial cells",
            "Interstitial endothelial cells",
            "Leukocytes",
            "Podocytes",
            "Proximal Tubule Segments",
            "Thick Ascending Limb",
        ),
    ),
    "organamnist": ("multi-class", 1, False, tuple(_ORGAN)),
    "organcmnist": ("multi-class", 1, False, tuple(_ORGAN)),
    "organsmnist": ("multi-class", 1, False, tuple(_ORGAN)),
    "organmnist3d": (
        "multi-class",
        1,
        True,
        (
            "liver",
            "kidney-right",
            "kidney-left",
            "femur-right",
            "femur-left",
            "bladder",
            "heart",
            "lung-right",
            "lung-left",
            "spleen",
            "pancreas",
        ),
    ),
    "nodulemnist3d": ("binary-class", 1, True, ("benign", "malignant")),
    "adrenalmnist3d": ("binary-class", 1, True, ("normal", "hyperplasia")),
    "fracturemnist3d": (
        "multi-class",
        1,
        True,
        ("buckle rib fracture", "nondisplaced rib fracture", "displaced rib fracture"),
    ),
    "vesselmnist3d": ("binary-class", 1, True, ("vessel", "aneurysm")),
    "synapsemnist3d": ("binary-class", 1, True, ("inhibitory synapse", "excitatory synapse")),
}

_SIZES_2D = (28, 64, 128, 224)
_SIZES_3D = (28, 64)
