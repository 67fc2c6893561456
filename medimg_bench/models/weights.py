"""Where an adapter's weights come from, by the names people use: a local path, a Hugging Face
hub id (``org/name`` or ``hf-hub:org/name``), timm's ``pretrained=True`` or an open_clip
pretrained tag. Hub files go through :mod:`medimg_bench.hub` (``huggingface_hub`` into its
cache, pinned to the resolved commit, every file checked); the library is then handed the local
folder (``local-dir:`` for timm and open_clip), so it never touches the network itself.

Each function also returns the *weight sources*, the records ``manifest.json`` keeps under
``model_weights`` (hub id, revision asked, commit, SHA-256 of every file; or local paths and
their SHA-256).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medimg_bench.hub import (
    HubError,
    is_offline,
    local_weights_record,
    looks_like_hub_id,
    resolve_file,
    resolve_snapshot,
    resolve_transformers_snapshot,
)
from medimg_bench.models.preprocess import require_local_path

__all__ = ["timm_source", "open_clip_source", "hf_model_folder", "sources_identity"]

_TIMM_FILES = ["config.json", "model.safetensors"]
_OPEN_CLIP_FILES = ["open_clip_config.json", "open_clip_model.safetensors", "*.json", "*.txt", "*.model"]


def sources_identity(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The part of the weight sources a resume must match: hub id and resolved commit (the
    weights' own digest is in the fingerprint already)."""
    return [{"repo_id": s["repo_id"], "commit": s["commit"]} for s in sources if s.get("commit")]


def timm_source(model_name: str, pretrained: bool | str, *, revision: str | None = None,
                offline: bool = False) -> tuple[str, bool, list[dict[str, Any]]]:
    """``(name for timm.create_model, pretrained flag, weight sources)``.

    ``hf-hub:org/name`` and ``pretrained=True`` of a hub-hosted timm weight (its
    ``pretrained_cfg.hf_hub_id``) become ``local-dir:<snapshot>`` after the download;
    ``pretrained`` may also be a hub id (``org/name``) directly."""
    hub_id: str | None = None
    if model_name.startswith("hf-hub:"):
        hub_id = model_name.removeprefix("hf-hub:")
    elif isinstance(pretrained, str) and pretrained.lower() not in ("true", "false", ""):
        if not looks_like_hub_id(pretrained):
            raise ValueError(f"model.options.pretrained={pretrained!r}: expected true/false or a hub id "
                             "(org/name); a local file goes in model.options.checkpoint")
        hub_id = pretrained
    elif pretrained is True or str(pretrained).lower() == "true":
        import timm

        cfg = timm.models.get_pretrained_cfg(model_name)
        hub_id = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
        if not hub_id:
            raise ValueError(f"timm model {model_name!r} has no pretrained weights on the Hugging Face "
                             "Hub (pretrained_cfg.hf_hub_id is empty); give model.options.checkpoint")
    if hub_id is None:
        return model_name, False, []
    snap = _timm_snapshot(hub_id, revision=revision, offline=offline)
    return f"local-dir:{snap.path}", True, [snap.record()]


def _timm_snapshot(hub_id: str, *, revision: str | None, offline: bool) -> Any:
    snap = resolve_snapshot(hub_id, revision=revision, offline=offline, allow_patterns=_TIMM_FILES,
                            what="timm weights")
    if "model.safetensors" in snap.files:
        return snap
    # repositories with only pytorch_model.bin (timm reads it with weights_only=True)
    snap = resolve_snapshot(hub_id, revision=snap.commit, offline=offline,
                            allow_patterns=["config.json", "pytorch_model.bin"], what="timm weights")
    if "pytorch_model.bin" not in snap.files:
        raise HubError(f"timm weights: hub id {hub_id!r} (commit {snap.commit}) has neither "
                       "model.safetensors nor pytorch_model.bin", "missing_file")
    return snap


def open_clip_source(model_name: str, pretrained: str | None, *, revision: str | None = None,
                     offline: bool = False) -> tuple[str, str | None, list[dict[str, Any]]]:
    """``(model name for open_clip, weights file or None, weight sources)``.

    * ``model_name="hf-hub:org/name"``: the repository's snapshot, as ``local-dir:<folder>``;
    * ``pretrained`` a local file or folder: that file (a folder: its weights file);
    * ``pretrained`` an open_clip tag (``laion2b_s34b_b88k``) hosted on the Hub: its file;
      a tag hosted elsewhere (a URL): open_clip's own download (online only);
    * ``pretrained`` a hub id: that repository's ``open_clip_model.safetensors``."""
    if model_name.startswith("hf-hub:"):
        snap = resolve_snapshot(model_name, revision=revision, offline=offline, allow_patterns=_OPEN_CLIP_FILES,
                                what="open_clip model")
        if not any(f.endswith((".safetensors", ".bin")) for f in snap.files):
            snap = resolve_snapshot(model_name, revision=revision, offline=offline,
                                    allow_patterns=[*_OPEN_CLIP_FILES, "open_clip_pytorch_model.bin"],
                                    what="open_clip model")
        return f"local-dir:{snap.path}", None, [snap.record()]
    if not pretrained:
        return model_name, None, []
    local = Path(str(pretrained)).expanduser()
    if local.exists() or str(pretrained).startswith(("/", ".", "~")):
        path = weights_file(require_local_path(pretrained, "model.options.pretrained"))
        return model_name, str(path), [local_weights_record(path)]
    import open_clip

    cfg = open_clip.get_pretrained_cfg(model_name, str(pretrained))
    if cfg:
        return _open_clip_tag(model_name, str(pretrained), cfg, revision=revision, offline=offline)
    if looks_like_hub_id(pretrained):
        return _open_clip_hub_file(model_name, str(pretrained), None, revision=revision, offline=offline)
    raise ValueError(f"model.options.pretrained={pretrained!r} is neither a local file, an open_clip tag of "
                     f"{model_name!r} (open_clip.list_pretrained_tags_by_model: "
                     f"{open_clip.list_pretrained_tags_by_model(model_name)}) nor a hub id")


def _open_clip_tag(model_name: str, tag: str, cfg: dict[str, Any], *, revision: str | None,
                   offline: bool) -> tuple[str, str | None, list[dict[str, Any]]]:
    hub = str(cfg.get("hf_hub") or "")
    if hub:
        parts = hub.split("/")  # "org/name/" or "org/name/file.bin"
        repo_id, filename = "/".join(parts[:2]), "/".join(parts[2:]) or None
        return _open_clip_hub_file(model_name, repo_id, filename, revision=revision, offline=offline)
    if is_offline(offline):
        raise HubError(f"open_clip {model_name} pretrained={tag!r} is downloaded from {cfg.get('url')!r}, "
                       "and offline mode is on; give model.options.pretrained a local weights file")
    import open_clip

    path = open_clip.download_pretrained(cfg)
    return model_name, path, [{"source": "url", "url": cfg.get("url"), **local_weights_record(path)}]


def _open_clip_hub_file(model_name: str, repo_id: str, filename: str | None, *, revision: str | None,
                        offline: bool) -> tuple[str, str | None, list[dict[str, Any]]]:
    names = [filename] if filename else ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]
    if filename and filename.endswith(".bin"):
        names.insert(0, filename[:-4] + ".safetensors")
    for i, name in enumerate(names):
        try:
            path, snap = resolve_file(repo_id, name, revision=revision, offline=offline,
                                      what=f"open_clip {model_name}")
            return model_name, str(path), [snap.record()]
        except HubError as exc:
            if exc.kind not in ("missing_file", "offline") or i == len(names) - 1:
                raise
    raise AssertionError("unreachable")


def weights_file(path: Path) -> Path:
    if not path.is_dir():
        return path
    files = sorted([*path.glob("open_clip_model.safetensors"), *path.glob("open_clip_pytorch_model.bin"),
                    *path.glob("*.safetensors"), *path.glob("*.bin")])
    if not files:
        raise FileNotFoundError(f"model.options.pretrained={str(path)!r}: the folder holds no "
                                ".safetensors or .bin weights file")
    return files[0]


def hf_model_folder(path: Any, *, revision: str | None = None, offline: bool = False,
                    option: str = "model.options.path") -> tuple[Path, list[dict[str, Any]]]:
    """A transformers model folder: ``path`` itself when it exists, else the snapshot of the hub
    id ``path`` (downloaded unless cached); with its weight sources."""
    if path is None or str(path) == "":
        raise ValueError(f"{option} is not set: give a local model folder or a hub id (org/name)")
    local = Path(str(path)).expanduser()
    if local.exists() or not looks_like_hub_id(path):
        local = require_local_path(path, option)
        return local, [local_weights_record(local)]
    snap = resolve_transformers_snapshot(str(path), revision=revision, offline=offline, what=option)
    return snap.path, [snap.record()]
