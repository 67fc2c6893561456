"""What every predictions-on-disk adapter shares: lookup by sample id, unknown-id warnings, file discovery."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)


class Lookup:
    """Shared parts: ``to``/``eval``/``train`` for the engine, identity for checkpoints."""

    name = "predictions"
    #: stored predictions read no pixel: the dataset is told so (``bind_dataset``) and, in a run
    #: from a config, built inside :func:`medimg_bench.datasets.base.without_pixels`
    needs_pixels = False

    NEUTRAL_PARAMS: dict[str, str] = {  # noqa: RUF012 - read only
        k: "where the predictions lie: the content of every file read is in the identity"
        for k in ("root", "source", "path")
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        from medimg_bench.identity import declaring

        declaring(cls)  # every reader records its declared parameters: they are its identity

    def __init__(self, source: Path) -> None:
        self.source = source
        self.device = torch.device("cpu")
        self.module = torch.nn.Identity()  # the engine counts parameters in reprs; there are none

    def to(self, device: Any) -> Lookup:
        self.device = torch.device(device)
        return self

    def eval(self) -> Lookup:
        return self

    def train(self, mode: bool = True) -> Lookup:
        return self

    def parameters(self) -> Any:
        return iter(())

    def fingerprint(self) -> dict[str, Any]:
        """The reader, its declared parameters (:func:`medimg_bench.identity.param_identity`:
        ``threshold``, ``resize``, ``scores`` … — those ``model=predictions`` was given, or the
        reader's own) and the name and SHA-256 of every predictions file (a changed byte is
        another model; the same files in another folder are the same)."""
        from medimg_bench.identity import param_identity

        return {"kind": type(self).__name__, "params": param_identity(self), "files": file_digests(self.source)}

    def _missing(self, sid: str) -> KeyError:
        return KeyError(f"no prediction for sample {sid!r} in {str(self.source)!r}")

    def _known_ids(self) -> set[str]:
        if hasattr(self, "scores"):
            return set(self.scores)
        return {p.name.removesuffix(".gz").removesuffix(".nii") for p in self.source.glob("*.nii*")}

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about predictions whose id the dataset does not have; returns their count."""
        return warn_unknown(self._known_ids(), ids, self.source)

    def unknown_ids(self, ids: Sequence[Any]) -> list[str]:
        """The stored ids the dataset (``ids``) does not have, sorted: counted as exclusions."""
        return sorted(self._known_ids() - {str(i) for i in ids})


def skip_pixels(dataset: Any) -> None:
    """Tell ``dataset`` the model reads no pixel (stored predictions): one that can skip its
    images (:meth:`~medimg_bench.datasets.base.ManifestDataset.skip_pixels`) does."""
    if callable(getattr(dataset, "skip_pixels", None)):
        dataset.skip_pixels()


def file_digests(source: Path) -> list[list[str]]:
    """``[name, SHA-256]`` of ``source`` (a file) or of the files directly in it (a folder); each
    digest computed once per file version (``medimg_bench._hashing``)."""
    from medimg_bench._hashing import hash_files, path_key

    files = [source] if source.is_file() else sorted(p for p in source.glob("*") if p.is_file())
    digests = hash_files(files, what=f"predictions {source}")
    return [[p.name, digests[path_key(p)]] for p in files]


def warn_unknown(known: set[str], ids: Sequence[Any], source: Path) -> int:
    extra = sorted(known - {str(i) for i in ids})
    if extra:
        log.warning("predictions %s: %d prediction(s) for ids the dataset does not have "
                    "(ignored), e.g. %s", source, len(extra), extra[:5])
    return len(extra)


#: file suffixes a stored id may carry when it names a sample by its image file (``<id>.png``)
FILE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".dicom", ".tif", ".tiff", ".bmp", ".nii.gz", ".nii",
                 ".nrrd", ".mha", ".npy", ".h5")


def match_stored_ids(stored: Sequence[str], dataset_ids: Sequence[Any], *, where: str) -> dict[str, str]:
    """``{stored id: sample id}``: a stored id that is a sample id is that sample; one that is not,
    but is a sample id plus a file suffix (:data:`FILE_SUFFIXES`, any case: the CheXNet
    reproduction's ``Image Index`` ``00000010_000.png``), is that sample. Two stored ids for one
    sample are refused naming both; ids matching no sample are kept as they are (counted by
    ``check_ids``)."""
    known = {str(i) for i in dataset_ids}
    out: dict[str, str] = {}
    owner: dict[str, str] = {}
    for sid in stored:
        target = sid
        if sid not in known:
            low = sid.lower()
            suffix = next((s for s in FILE_SUFFIXES if low.endswith(s) and sid[: -len(s)] in known), None)
            target = sid[: -len(suffix)] if suffix else sid
        if target in owner and target in known:
            raise ValueError(f"{where}: ids {owner[target]!r} and {sid!r} both name sample {target!r}; "
                             "one row per sample")
        owner[target], out[sid] = sid, target
    return out


def find(root: Path, names: Sequence[str]) -> Path | None:
    if root.is_file():
        return root
    return next((root / n for n in names if (root / n).exists()), None)
