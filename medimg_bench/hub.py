"""Models by name: Hugging Face Hub ids resolved through ``huggingface_hub`` into its usual cache,
pinned to the commit they resolved to, every file checked against the digest the Hub gave.

``resolve_snapshot("org/name", revision="main")`` downloads (or finds in the cache) the files of
a repository and returns a :class:`HubSnapshot`: the local folder (the cache's
``snapshots/<commit>``), the commit hash the revision resolved to and the SHA-256 of every file.
Offline — ``offline=True`` or ``HF_HUB_OFFLINE=1`` — nothing touches the network; a missing id,
revision or file is an error naming it and the cache folder looked in.

Integrity: the Hugging Face cache names each blob by the digest the server announced (the
SHA-256 of an LFS file, the git blob SHA-1 of a small file). Every file of a snapshot is hashed
(once per file: :mod:`medimg_bench._hashing` caches digests) and compared with that name; a
mismatch (a corrupted download or a file changed on disk) is refused, naming the file.

A core module (layer 0): ``huggingface_hub`` is imported inside the functions.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["HubError", "HubSnapshot", "is_offline", "looks_like_hub_id", "split_hf_path",
           "split_hf_root", "resolve_dataset_root", "resolve_snapshot", "resolve_transformers_snapshot", "TRANSFORMERS_FILES", "resolve_file", "local_weights_record", "git_blob_sha1"]

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "true", "yes", "on"}


class HubError(OSError):
    """A hub id, revision or file that cannot be had; the message names the id, revision, file
    and cache folder. ``kind``: ``unknown_repo``, ``unknown_revision``, ``missing_file``,
    ``offline`` (not cached), ``network`` or ``corrupt``."""

    def __init__(self, message: str, kind: str = "network") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class HubSnapshot:
    """Files of one repository at one commit, on local disk."""

    repo_id: str
    revision: str | None  # what was asked for (branch, tag, commit or None: main)
    commit: str  # the commit hash it resolved to
    path: Path  # the snapshot folder in the Hugging Face cache
    files: dict[str, str] = field(default_factory=dict)  # relative name -> SHA-256
    repo_type: str = "model"  # or "dataset"

    def record(self) -> dict[str, Any]:
        """What the manifest keeps: source, id, revision asked, commit, SHA-256 of every file
        (and ``repo_type`` for a dataset repository)."""
        out = {"source": "huggingface_hub", "repo_id": self.repo_id, "revision": self.revision,
               "commit": self.commit, "files": dict(sorted(self.files.items()))}
        return out if self.repo_type == "model" else {**out, "repo_type": self.repo_type}


def is_offline(offline: bool | None = None) -> bool:
    """True when ``offline`` is set or the environment says so (``HF_HUB_OFFLINE``)."""
    if offline:
        return True
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def looks_like_hub_id(value: Any) -> bool:
    """Whether ``value`` reads as a hub id (``org/name``, ``name`` or ``hf-hub:org/name``) rather
    than a local path: it does not exist on disk, is not absolute or relative-dotted and has no
    file suffix of a weights file."""
    s = str(value or "")
    if s.startswith("hf-hub:"):
        return True
    if not s or s.startswith(("/", ".", "~")) or Path(s).expanduser().exists():
        return False
    if s.endswith((".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".json")):
        return False
    return bool(_REPO_ID.match(s))


def split_hf_path(value: str) -> tuple[str, str | None, str]:
    """``hf://org/name[@revision]/path/in/repo`` → ``(repo_id, revision, path)``."""
    rest = str(value).removeprefix("hf://")
    parts = rest.split("/")
    if len(parts) < 3 or not all(parts[:3]):
        raise ValueError(f"{value!r}: expected hf://org/name[@revision]/path/to/file")
    name, _, revision = parts[1].partition("@")
    return f"{parts[0]}/{name}", revision or None, "/".join(parts[2:])


def split_hf_root(value: str) -> tuple[str, str | None, str]:
    """``hf://OWNER/NAME[@REVISION][/sub/folder]`` (a dataset root) → ``(repo_id, revision,
    subfolder)``; the subfolder is ``""`` for the repository's top."""
    parts = str(value).removeprefix("hf://").strip("/").split("/")
    name, at, revision = parts[1].partition("@") if len(parts) > 1 else ("", "", "")
    if not parts[0] or not name or (at and not revision):
        raise ValueError(f"dataset root {value!r}: expected hf://OWNER/NAME[@REVISION][/folder] "
                         "(a Hugging Face dataset repository)")
    return f"{parts[0]}/{name}", revision or None, "/".join(p for p in parts[2:] if p)


def resolve_dataset_root(value: str, *, offline: bool | None = None) -> tuple[Path, HubSnapshot, str]:
    """A dataset root given as ``hf://OWNER/NAME[@REVISION][/folder]``: the repository's files
    at that revision downloaded into the Hugging Face cache (``snapshot_download`` with
    ``repo_type="dataset"``; offline — ``HF_HUB_OFFLINE=1`` — the cache only), every file
    checked against the digest the Hub announced. Returns ``(local folder to read as the root,
    snapshot, subfolder)``; raises :class:`HubError` naming the id and revision."""
    repo_id, revision, sub = split_hf_root(value)
    snap = resolve_snapshot(repo_id, revision=revision, offline=offline, what="dataset", repo_type="dataset",
                            allow_patterns=[f"{sub}/*"] if sub else None)
    root = snap.path / sub if sub else snap.path
    if not root.is_dir():
        raise HubError(f"dataset root {value!r}: the repository {repo_id!r} at commit {snap.commit} has no "
                       f"folder {sub!r}", "missing_file")
    return root, snap, sub


def _cache_dir() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _hub_error(exc: Exception, repo_id: str, revision: str | None, what: str, offline: bool) -> HubError:
    """One clear message for whatever huggingface_hub raised."""
    from huggingface_hub import errors

    rev = revision or "main"
    where = f"{what}: hub id {repo_id!r} (revision {rev!r})"
    cache = _cache_dir()
    if isinstance(exc, errors.LocalEntryNotFoundError) and offline:
        return HubError(f"{where}: not in the local cache {cache} and offline mode is on "
                        f"(HF_HUB_OFFLINE=1{'' if what.startswith('dataset') else ' or model.options.offline=true'}); "
                        "run once online to download "
                        "it, or give a local folder", "offline")
    if isinstance(exc, errors.RevisionNotFoundError):
        return HubError(f"{where}: the repository has no revision {rev!r}", "unknown_revision")
    if isinstance(exc, errors.RemoteEntryNotFoundError):
        return HubError(f"{where}: the repository has no such file ({exc})", "missing_file")
    if isinstance(exc, (errors.RepositoryNotFoundError, errors.GatedRepoError)):
        noun = "dataset" if what.startswith("dataset") else "model"
        return HubError(f"{where}: no such {noun} on {_endpoint()} (or it is private/gated and no token "
                        f"is set: HF_TOKEN), and no local folder {os.path.abspath(repo_id)} either; check the "
                        "id or the path", "unknown_repo")
    return HubError(f"{where}: could not be downloaded from {_endpoint()} and is not complete in the "
                    f"local cache {cache}: {type(exc).__name__}: {exc}")


def _endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def resolve_snapshot(
    repo_id: str, *, revision: str | None = None, offline: bool | None = None,
    allow_patterns: Sequence[str] | None = None, what: str = "model", verify: bool = True,
    repo_type: str = "model",
) -> HubSnapshot:
    """The files of ``repo_id`` (a ``repo_type`` repository: ``model`` or ``dataset``) at
    ``revision`` (``allow_patterns``: only those), downloaded with
    ``huggingface_hub.snapshot_download`` into its cache unless already there; offline (see
    :func:`is_offline`) only the cache is read. Raises :class:`HubError`."""
    from huggingface_hub import snapshot_download

    repo_id = repo_id.removeprefix("hf-hub:")
    off = is_offline(offline)
    try:
        folder = snapshot_download(repo_id, revision=revision, local_files_only=off, repo_type=repo_type,
                                   allow_patterns=list(allow_patterns) if allow_patterns else None)
    except Exception as exc:
        raise _hub_error(exc, repo_id, revision, what, off) from exc
    path = Path(folder)
    files = _verified_files(path, repo_id=repo_id, revision=revision, what=what, verify=verify)
    return HubSnapshot(repo_id=repo_id, revision=revision, commit=path.name, path=path, files=files,
                       repo_type=repo_type)


#: what a transformers model folder needs: configs, tokenizers, chat templates, remote code and
#: safetensors weights (not the ONNX / TF / Flax / GGUF copies many repositories also hold)
TRANSFORMERS_FILES = ("*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken", "*.py")


def resolve_transformers_snapshot(repo_id: str, *, revision: str | None = None, offline: bool | None = None,
                                  what: str = "model") -> HubSnapshot:
    """:func:`resolve_snapshot` of the files a transformers model needs (:data:`TRANSFORMERS_FILES`);
    a repository without safetensors weights also gets its ``*.bin`` files (read by transformers
    with ``weights_only=True``)."""
    snap = resolve_snapshot(repo_id, revision=revision, offline=offline, allow_patterns=TRANSFORMERS_FILES,
                            what=what)
    if any(f.endswith(".safetensors") for f in snap.files):
        return snap
    full = resolve_snapshot(repo_id, revision=snap.commit, offline=offline,
                            allow_patterns=[*TRANSFORMERS_FILES, "*.bin"], what=what)
    return HubSnapshot(repo_id=snap.repo_id, revision=revision, commit=full.commit, path=full.path,
                       files=full.files)


def resolve_file(
    repo_id: str, filename: str, *, revision: str | None = None, offline: bool | None = None,
    what: str = "model",
) -> tuple[Path, HubSnapshot]:
    """One file of a repository (``hf_hub_download``), checked like :func:`resolve_snapshot`;
    returns its local path and the snapshot record holding only that file."""
    from huggingface_hub import hf_hub_download

    repo_id = repo_id.removeprefix("hf-hub:")
    off = is_offline(offline)
    try:
        local = Path(hf_hub_download(repo_id, filename, revision=revision, local_files_only=off))
    except Exception as exc:
        raise _hub_error(exc, repo_id, revision, f"{what} file {filename!r}", off) from exc
    snapshot_dir = local
    for _ in Path(filename).parts:
        snapshot_dir = snapshot_dir.parent
    digest = _check_blob(local, filename, repo_id=repo_id, revision=revision, what=what)
    snap = HubSnapshot(repo_id=repo_id, revision=revision, commit=snapshot_dir.name, path=snapshot_dir,
                       files={filename: digest})
    return local, snap


def git_blob_sha1(path: str | os.PathLike[str]) -> str:
    """Git's blob id of a file: SHA-1 of ``b"blob <size>\\0"`` + its bytes (what the Hub gives
    as the ETag of a file not stored in LFS)."""
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _check_blob(file: Path, rel: str, *, repo_id: str, revision: str | None, what: str) -> str:
    """SHA-256 of ``file``; :class:`HubError` when the cache's blob name (the digest announced by
    the Hub) disagrees with the content."""
    from medimg_bench._hashing import hash_files, path_key

    blob = Path(os.path.realpath(file))
    sha256 = hash_files([blob], what=f"{repo_id} {rel}")[path_key(blob)]
    expected = blob.name
    actual = sha256 if _SHA256.match(expected) else git_blob_sha1(blob) if _SHA1.match(expected) else None
    if actual is not None and actual != expected:
        raise HubError(f"{what}: hub id {repo_id!r} (revision {revision or 'main'!r}), file {rel!r}: "
                       f"the content in the cache ({blob}) does not match the digest the Hub announced "
                       f"({expected}; got {actual}): the download is corrupted or the file was changed. "
                       f"Delete {blob} and run again to download it anew", "corrupt")
    return sha256


def _verified_files(path: Path, *, repo_id: str, revision: str | None, what: str,
                    verify: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        if verify:
            out[rel] = _check_blob(f, rel, repo_id=repo_id, revision=revision, what=what)
        else:
            from medimg_bench._hashing import hash_files, path_key

            out[rel] = hash_files([f])[path_key(f)]
    return out


def local_weights_record(paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest record of weights read from local files: ``{"source": "local", "files":
    {path: SHA-256}}`` (a folder: every file under it)."""
    from medimg_bench._hashing import hash_files, tree_files

    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files: list[Path] = []
    for p in items:
        q = Path(p).expanduser()
        files.extend(tree_files(q) if q.is_dir() else [q])
    return {"source": "local", "files": {str(k): v for k, v in sorted(hash_files(files).items())}}
