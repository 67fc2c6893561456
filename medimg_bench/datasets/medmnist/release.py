"""What the MedMNIST v2 / MedMNIST+ release holds: per flag the task, class names, channels and
sizes, and per official file its split sizes and MD5 (:data:`RELEASES`, :func:`identify_file`).

The split sizes and MD5s are the numbers in the ``medmnist`` package's ``info.py`` (PyPI) at the
versions that point at each Zenodo record; ``tools/medmnist_release_info.py`` writes them as a
fixture and ``tests/datasets/test_medmnist_release.py`` checks these tables against it.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "MEDMNIST_INFO",
    "RELEASES",
    "FileCheck",
    "MedMNISTRelease",
    "file_md5",
    "identify_file",
    "official_md5",
    "parse_file_name",
    "split_sizes",
]

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

SIZES_2D = (28, 64, 128, 224)
SIZES_3D = (28, 64)

_SPLITS: dict[str, tuple[int, int, int]] = {
    "adrenalmnist3d": (1188, 98, 298),
    "bloodmnist": (11959, 1712, 3421),
    "breastmnist": (546, 78, 156),
    "chestmnist": (78468, 11219, 22433),
    "dermamnist": (7007, 1003, 2005),
    "fracturemnist3d": (1027, 103, 240),
    "nodulemnist3d": (1158, 165, 310),
    "octmnist": (97477, 10832, 1000),
    "organamnist": (34561, 6491, 17778),
    "organcmnist": (12975, 2392, 8216),
    "organmnist3d": (971, 161, 610),
    "organsmnist": (13932, 2452, 8827),
    "pathmnist": (89996, 10004, 7180),
    "pneumoniamnist": (4708, 524, 624),
    "retinamnist": (1080, 120, 400),
    "synapsemnist3d": (1230, 177, 352),
    "tissuemnist": (165466, 23640, 47280),
    "vesselmnist3d": (1335, 191, 382),
}
_MD5: dict[str, dict[int, str]] = {
    "adrenalmnist3d": {
        28: "bbd3c5a5576322bc4cdfea780653b1ce",
        64: "17721accfe9fb005146a47d33bc54b2f",
    },
    "bloodmnist": {
        28: "7053d0359d879ad8a5505303e11de1dc",
        64: "2b94928a2ae4916078ca51e05b6b800b",
        128: "adace1e0ed228fccda1f39692059dd4c",
        224: "b718ff6835fcbdb22ba9eacccd7b2601",
    },
    "breastmnist": {
        28: "750601b1f35ba3300ea97c75c52ff8f6",
        64: "742edef2a1fd1524b2efff4bd7ba9364",
        128: "363e4b3f8d712e9b5de15470a2aaadf1",
        224: "b56378a6eefa9fed602bb16d192d4c8b",
    },
    "chestmnist": {
        28: "02c8a6516a18b556561a56cbdd36c4a8",
        64: "9de6cd0b934ebb5b7426cfba5efbae16",
        128: "db107e5590b27930b62dbaf558aebee3",
        224: "45bd33e6f06c3e8cdb481c74a89152aa",
    },
    "dermamnist": {
        28: "0744692d530f8e62ec473284d019b0c7",
        64: "b70a2f5635c6199aeaa28c31d7202e1f",
        128: "2defd784463fa5243564e855ed717de1",
        224: "8974907d8e169bef5f5b96bc506ae45d",
    },
    "fracturemnist3d": {
        28: "6aa7b0143a6b42da40027a9dda61302f",
        64: "f01d7e6316aedf4210da0da5b7437b42",
    },
    "nodulemnist3d": {
        28: "8755a7e9e05a4d9ce80a24c3e7a256f3",
        64: "c47c5b7d457bf6332200d2ea6d64ecd8",
    },
    "octmnist": {
        28: "c68d92d5b585d8d81f7112f81e2d0842",
        64: "e229e9440236b774d9f0dfef9d07bdaf",
        128: "0a97e76651ace45c5d943ee3f65b63ae",
        224: "abc493b6d529d5de7569faaef2773ba3",
    },
    "organamnist": {
        28: "68e3f8846a6bd62f0c9bf841c0d9eacc",
        64: "2dcccc29b88e6da5a01161ef20cda288",
        128: "eeae80d0a227a8d099027e1b3cfd3b60",
        224: "50747347e05c87dd3aaf92c49f9f3170",
    },
    "organcmnist": {
        28: "b9ceb9546e10131b32923c5bbeaea2b1",
        64: "3ce34a8724ea6f548e6db4744d03b6a9",
        128: "773c1f009daa3fe5d9a2a201b2a7ed94",
        224: "050f5e875dc056f6768abf94ec9995d1",
    },
    "organmnist3d": {
        28: "a0c5a1ff56af4f155c46d46fbb45a2fe",
        64: "58a2205adf14a9d0a189cb06dc78bf10",
    },
    "organsmnist": {
        28: "9ab87b696fb54e2a387ebe992d6ed5f1",
        64: "53a6d115339d874c25e309a994ff46d3",
        128: "ded0c5fa01a95dc4978b956f613e9b8e",
        224: "b354719e553fbbb2513d5533f52a4cb1",
    },
    "pathmnist": {
        28: "a8b06965200029087d5bd730944a56c1",
        64: "55aa9c1e0525abe5a6b9d8343a507616",
        128: "ac42d08fb904d92c244187169d1fd1d9",
        224: "2c51a510bcdc9cf8ddb2af93af1eadec",
    },
    "pneumoniamnist": {
        28: "28209eda62fecd6e6a2d98b1501bb15f",
        64: "8f4eceb4ccffa70c672198ea285246c6",
        128: "05b46931834c231683c68f40c47b2971",
        224: "d6a3c71de1b945ea11211b03746c1fe1",
    },
    "retinamnist": {
        28: "bd4c0672f1bba3e3a89f0e4e876791e4",
        64: "afda852cc34dcda56f86ad2b2457dbcc",
        128: "e48e916a24454daf90583d4e6efb1a18",
        224: "eae7e3b6f3fcbda4ae613ebdcbe35348",
    },
    "synapsemnist3d": {
        28: "1235b78a3cd6280881dd7850a78eadb6",
        64: "43bd14ebf3af9d3dd072446fedc14d5e",
    },
    "tissuemnist": {
        28: "ebe78ee8b05294063de985d821c1c34b",
        64: "123ece2eba09d0aa5d698fda57103344",
        128: "61b955355d7425a89687b06cca3ce0c2",
        224: "b077128c4a949f0a4eb01517f9037b9c",
    },
    "vesselmnist3d": {
        28: "b41fd4f7e7e2feedddb201585ecafa1b",
        64: "6bb274a8846e1097066dcd64e2c4520f",
    },
}
# the 28x28 files of the earlier records that differ from the current ones: (train, val, test), MD5
_V20_DIFF: dict[str, tuple[tuple[int, int, int], str]] = {
    "nodulemnist3d": ((1158, 165, 526), "902d495e3d91ad1a7bcac1a6b58a8fa2"),
    "organamnist": ((34581, 6491, 17778), "866b832ed4eeba67bfb9edee1d5544e6"),
    "organcmnist": ((13000, 2392, 8268), "0afa5834fb105f7705a7d93372119a21"),
    "organmnist3d": ((972, 161, 610), "21f0a239e7f502e6eca33c3fc453c0b6"),
    "organsmnist": ((13940, 2452, 8829), "e5c39f1af030238290b9557d9503af9d"),
    "vesselmnist3d": ((1335, 192, 382), "2ba5b80617d705141f3f85627108fce8"),
}
_V21_DIFF: dict[str, tuple[tuple[int, int, int], str]] = {
    "organamnist": ((34581, 6491, 17778), "866b832ed4eeba67bfb9edee1d5544e6"),
    "organcmnist": ((13000, 2392, 8268), "0afa5834fb105f7705a7d93372119a21"),
    "organmnist3d": ((972, 161, 610), "21f0a239e7f502e6eca33c3fc453c0b6"),
    "organsmnist": ((13940, 2452, 8829), "e5c39f1af030238290b9557d9503af9d"),
    "vesselmnist3d": ((1335, 192, 382), "2ba5b80617d705141f3f85627108fce8"),
}


@dataclass(frozen=True)
class MedMNISTRelease:
    """One published set of MedMNIST files (a Zenodo record) and the ``medmnist`` package
    versions whose ``info.py`` describes it."""

    name: str
    zenodo: str
    package: str
    note: str

    def split_sizes(self, flag: str) -> dict[str, int]:
        """``{"train": n, "val": n, "test": n}`` of ``flag`` in this release (any image size)."""
        sizes = _diff(self.name).get(flag, (_SPLITS[_known(flag)], ""))[0]
        return dict(zip(("train", "val", "test"), sizes))

    def md5(self, flag: str, size: int = 28) -> str | None:
        """The official MD5 of ``flag`` at ``size`` in this release (None: no such file)."""
        if self.name != "v3":
            return _diff(self.name).get(flag, (None, _MD5[_known(flag)][28]))[1] if size == 28 else None
        return _MD5[_known(flag)].get(int(size))


#: the releases, newest first; file sizes and MD5s as listed by each package version's info.py
RELEASES: dict[str, MedMNISTRelease] = {
    "v3": MedMNISTRelease("v3", "10.5281/zenodo.10519652", "medmnist 2.2.x / 3.0.x",
                          "MedMNIST+: adds the 64/128/224 files; 28x28 files as in v2.1"),
    "v2.1": MedMNISTRelease("v2.1", "10.5281/zenodo.6496656", "medmnist 2.1.0",
                            "organ{a,c,s}mnist, organmnist3d and vesselmnist3d differ from v3"),
    "v2.0": MedMNISTRelease("v2.0", "10.5281/zenodo.5208230", "medmnist 2.0.x",
                            "the first v2 record; nodulemnist3d's test split has 526 volumes"),
}


def _diff(release: str) -> dict[str, tuple[tuple[int, int, int], str]]:
    return {"v2.0": _V20_DIFF, "v2.1": _V21_DIFF}.get(release, {})


def _known(flag: str) -> str:
    if flag not in _SPLITS:
        raise ValueError(f"medmnist: unknown flag {flag!r}; one of {sorted(_SPLITS)}")
    return flag


def split_sizes(flag: str, *, release: str = "v3") -> dict[str, int]:
    """The official split sizes of ``flag`` (``{"train", "val", "test"}`` → images) in
    ``release`` (a key of :data:`RELEASES`)."""
    if release not in RELEASES:
        raise ValueError(f"medmnist: unknown release {release!r}; one of {list(RELEASES)}")
    return RELEASES[release].split_sizes(flag)


def official_md5(flag: str, size: int = 28) -> dict[str, str]:
    """Release name → official MD5 of ``{flag}.npz`` (size 28) or ``{flag}_{size}.npz``; empty
    when no release has that file."""
    out = {}
    for name, rel in RELEASES.items():
        md5 = rel.md5(flag, size)
        if md5 is not None:
            out[name] = md5
    return out


def parse_file_name(name: str) -> tuple[str, int]:
    """``(flag, size)`` of an official file name: ``breastmnist.npz`` → ``("breastmnist", 28)``,
    ``pathmnist_224.npz`` → ``("pathmnist", 224)``."""
    stem = Path(name).name.removesuffix(".npz")
    flag, _, size = stem.rpartition("_")
    if flag and size.isdigit():
        return _known(flag), int(size)
    return _known(stem), 28


@dataclass(frozen=True)
class FileCheck:
    """What a MedMNIST ``.npz`` is: its MD5, whether it is an official file and of which
    release, and the official MD5 (current release) when it is not."""

    path: str
    flag: str
    size: int
    md5: str
    releases: tuple[str, ...]
    expected_md5: str | None

    @property
    def official(self) -> bool:
        return bool(self.releases)

    @property
    def release(self) -> str | None:
        """The newest release holding this exact file (None: not an official file)."""
        return self.releases[0] if self.releases else None

    def as_dict(self) -> dict[str, Any]:
        """The manifest entry: file, flag, size, md5, official, release, expected_md5."""
        return {"file": self.path, "flag": self.flag, "size": self.size, "md5": self.md5,
                "official": self.official, "releases": list(self.releases), "expected_md5": self.expected_md5}

    def message(self) -> str:
        """One line naming the file and both MD5s (or the releases it belongs to)."""
        if self.official:
            return f"{self.path}: MD5 {self.md5}, the official {self.flag} file of MedMNIST {', '.join(self.releases)}"
        want = self.expected_md5 or "none published"
        return (f"{self.path}: MD5 {self.md5} is not the official {self.flag} ({self.size}x{self.size}) file "
                f"(official MD5 {want}): the numbers may not be comparable with published ones")


def identify_file(path: str | Path, *, flag: str | None = None, size: int | None = None,
                  warn: bool = True) -> FileCheck:
    """MD5 of ``path`` compared with every release's official file for ``flag`` / ``size``
    (default: from the file name). A different MD5 warns (``warn``), naming both."""
    path = Path(path)
    if flag is None or size is None:
        f, s = parse_file_name(path.name)
        flag, size = flag or f, size or s
    digest = file_md5(path)
    known = official_md5(flag, size)
    releases = tuple(name for name, md5 in known.items() if md5 == digest)
    check = FileCheck(str(path), flag, int(size), digest, releases, next(iter(known.values()), None))
    if warn and not check.official:
        warnings.warn(check.message(), stacklevel=2)
    return check


def file_md5(path: str | Path) -> str:
    """MD5 (hex) of a file, remembered per (path, size, mtime) for the life of the process."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _MD5_SEEN:
        h = hashlib.md5(usedforsecurity=False)
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        _MD5_SEEN[key] = h.hexdigest()
    return _MD5_SEEN[key]


_MD5_SEEN: dict[tuple[str, int, int], str] = {}
