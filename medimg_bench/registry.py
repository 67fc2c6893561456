"""One registry pattern for datasets, models, metrics and tasks.

Modelled on timm: a decorator registers a factory under a name, ``create(name, **kwargs)``
builds it and ``list()`` shows what exists. Entries live in the modules of a package; the
registry imports those modules the first time it is asked for a name, so adding a component is
one new module (plus its Hydra config) and ``import medimg_bench`` stays light.

Registering a factory also makes it record its declared parameters on what it builds, however it
is called (:func:`medimg_bench.identity.declaring`): that record is the component's identity
(``neutral={name: reason}`` names the parameters that decide no value).
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
import os
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Registry",
    "RegistryEntry",
    "DATASETS",
    "MODELS",
    "METRICS",
    "TASKS",
    "register_dataset",
    "create_dataset",
    "list_datasets",
    "register_model",
    "create_model",
    "list_models",
    "register_metric",
    "create_metric",
    "list_metrics",
    "register_task",
    "create_task",
    "list_tasks",
]


def absolute_root(value: Any) -> Any:
    """A data location relative to the working directory, made absolute (``~`` expanded); its
    type is kept (``str`` or ``Path``). URLs (``hf://…``, ``s3://…``), absolute paths, ``None``
    and non-paths come back as they are."""
    if not isinstance(value, (str, os.PathLike)):
        return value
    text = os.fspath(value)
    if not text or "://" in text:
        return value
    path = os.path.abspath(os.path.expanduser(text))
    return path if isinstance(value, str) else type(value)(path)


@dataclass(frozen=True)
class RegistryEntry:
    """A registered factory and what is known about it without calling it."""

    name: str
    factory: Callable[..., Any]
    module: str
    tags: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def doc(self) -> str:
        return (self.factory.__doc__ or "").strip().splitlines()[0] if self.factory.__doc__ else ""


class Registry:
    """A flat name → factory table for one kind of component.

    Args:
        kind: what the entries are ("dataset", "model", ...), used in messages.
        package: the package whose submodules hold the entries; they are imported on the
            first lookup (``None``: entries only come from explicit registration).
    """

    def __init__(
        self, kind: str, package: str | None = None, *,
        prepare: Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]] | None = None,
    ) -> None:
        self.kind = kind
        self.package = package
        # datasets: relative roots made absolute and ``root=hf://…`` a local snapshot folder
        # before the factory sees them; returns (options, attributes to set on the object)
        self.prepare = prepare
        self._entries: dict[str, RegistryEntry] = {}
        self._discovered = package is None
        self._lock = threading.RLock()

    # -- registration -------------------------------------------------------------------------
    def register(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        tags: tuple[str, ...] | list[str] = (),
        overwrite: bool = False,
        neutral: dict[str, str] | None = None,
        **defaults: Any,
    ) -> Callable[..., Any]:
        """Decorator registering a factory (a class or function) under ``name``.

        Usable bare (``@reg.register``) or called (``@reg.register("name", tags=[...])``).
        Keyword ``defaults`` are passed to the factory unless ``create`` overrides them, which
        lets one class be registered several times under different names. The factory records
        its declared parameters on what it builds (a function is returned wrapped, a class gets
        its ``__init__`` wrapped); ``neutral``: ``{parameter: reason}`` of a function factory's
        parameters that decide no value (a class says so in ``NEUTRAL_PARAMS``).
        """
        from medimg_bench.identity import declaring

        def decorator(factory: Callable[..., Any]) -> Callable[..., Any]:
            entry_name = name if isinstance(name, str) else factory.__name__
            factory = declaring(factory, neutral=neutral)
            with self._lock:
                if entry_name in self._entries and not overwrite:
                    old = self._entries[entry_name]
                    if _unwrapped(old.factory) is not _unwrapped(factory) or old.defaults != defaults:
                        raise ValueError(
                            f"{self.kind} {entry_name!r} is already registered by {old.module}; "
                            "pass overwrite=True to replace it"
                        )
                self._entries[entry_name] = RegistryEntry(
                    name=entry_name,
                    factory=factory,
                    module=getattr(factory, "__module__", "?"),
                    tags=tuple(tags),
                    defaults=dict(defaults),
                )
            return factory

        if callable(name) and not isinstance(name, str):
            return decorator(name)
        return decorator

    # -- lookup -------------------------------------------------------------------------------
    def _discover(self) -> None:
        if self._discovered:
            return
        with self._lock:
            if self._discovered:
                return
            pkg = importlib.import_module(self.package)  # type: ignore[arg-type]
            for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
                leaf = info.name.rsplit(".", 1)[-1]
                if leaf.startswith("_"):
                    continue
                importlib.import_module(info.name)
            self._discovered = True

    def entry(self, name: str) -> RegistryEntry:
        """Return the entry registered as ``name``; ``KeyError`` with close matches if absent."""
        self._discover()
        try:
            return self._entries[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._entries), n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(
                f"unknown {self.kind} {name!r}{hint} "
                f"(medimg_bench list {self.kind}s shows all {len(self._entries)})"
            ) from None

    def get(self, name: str) -> Callable[..., Any]:
        """Return the factory registered as ``name``."""
        return self.entry(name).factory

    def create(self, name: str, /, **kwargs: Any) -> Any:
        """Build the entry ``name`` with its registered defaults updated by ``kwargs``."""
        entry = self.entry(name)
        kwargs = {**entry.defaults, **kwargs}
        attrs: dict[str, Any] = {}
        if self.prepare is not None:
            kwargs, attrs = self.prepare(kwargs)
        obj = entry.factory(**kwargs)
        if attrs and hasattr(obj, "__dict__"):
            obj.__dict__.update(attrs)
        return obj

    def list(self, pattern: str | None = None, *, tag: str | None = None) -> list[str]:
        """Sorted names, optionally filtered by a glob ``pattern`` and a ``tag``."""
        self._discover()
        names = sorted(self._entries)
        if pattern:
            names = [n for n in names if fnmatch.fnmatch(n, pattern)]
        if tag:
            names = [n for n in names if tag in self._entries[n].tags]
        return names

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._entries

    def __len__(self) -> int:
        self._discover()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, package={self.package!r})"


def _unwrapped(factory: Callable[..., Any]) -> Callable[..., Any]:
    return getattr(factory, "__wrapped__", factory) if getattr(factory, "__declared__", False) else factory


def _dataset_roots(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A dataset's locations, resolved once before any loader joins them with the paths it
    lists: ``root`` (and ``*_root``) relative to the working directory made absolute, and
    ``root=hf://OWNER/NAME@REVISION[/folder]`` the dataset repository's snapshot in the Hugging
    Face cache, with ``hub_source`` (id, revision, commit, SHA-256 of every file:
    :meth:`medimg_bench.hub.HubSnapshot.record`) for the dataset's identity and the run's
    manifest."""
    kwargs = {k: absolute_root(v) if k == "root" or k.endswith("_root") else v for k, v in kwargs.items()}
    root = kwargs.get("root")
    if not (isinstance(root, str) and root.startswith("hf://")):
        return kwargs, {}
    from medimg_bench.hub import resolve_dataset_root

    local, snap, sub = resolve_dataset_root(root)
    return {**kwargs, "root": str(local)}, {"hub_source": {**snap.record(), "folder": sub, "root": root}}


DATASETS = Registry("dataset", "medimg_bench.datasets", prepare=_dataset_roots)
MODELS = Registry("model", "medimg_bench.models")
METRICS = Registry("metric", "medimg_bench.metrics")
TASKS = Registry("task", "medimg_bench.tasks")

register_dataset = DATASETS.register
create_dataset = DATASETS.create
list_datasets = DATASETS.list
register_model = MODELS.register
create_model = MODELS.create
list_models = MODELS.list
register_metric = METRICS.register
create_metric = METRICS.create
list_metrics = METRICS.list
register_task = TASKS.register
create_task = TASKS.create
list_tasks = TASKS.list
