"""Identity from declared parameters: what every registered component is known by.

A component's identity (response and embedding cache keys, checkpoint and shard keys,
``reproduce`` reuse, ``compare``'s data check) is derived, never written by hand, from

* its **declared parameters**: the arguments of its constructor (or registered factory), defaults
  filled in. Every registered factory records them when it is called, however it is called
  (:func:`declaring`, installed by ``Registry.register``). An object that carries no record is
  read the scikit-learn way (``get_params``): every parameter of ``type(obj).__init__`` must be
  stored under its own name, and one that is not is an :class:`IdentityError` naming it;
* the **content** of the files it declares it reads (its ``key_files()``: ``{option: path}``),
  by SHA-256; the option's path itself is not part of the identity, so the same files elsewhere
  give the same identity.

A parameter may be left out only when it is declared **neutral, with the reason**: a class-level
``NEUTRAL_PARAMS = {"num_workers": "does not change any value"}`` (merged over the class's bases),
or ``neutral={...}`` where a factory function is registered. An empty reason is refused; a subclass
whose parameter of a base's neutral name does decide values says ``{"seed": None}``.

A core module (layer 0): no heavy imports.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["IdentityError", "NEUTRAL_ATTR", "declaring", "record_call", "bind_params", "declared_params",
           "neutral_params", "recorded_params", "recorded_factory", "identity_value", "declared_files", "param_identity", "component_identity",
           "IDENTITY_VERSION", "CONTENT"]

#: the class attribute declaring neutral parameters: ``{name: reason}``
NEUTRAL_ATTR = "NEUTRAL_PARAMS"
#: bumped when what an identity holds changes: a checkpoint keyed by another rule is refused
#: with "made by an older version, re-run" instead of a field-by-field difference
IDENTITY_VERSION = 2
#: what a declared file's option holds in ``params`` (its content is in ``files``)
CONTENT = "<content: files>"
_RECORD = "_declared"


class IdentityError(TypeError):
    """A component whose identity cannot be derived (a parameter not stored under its own name,
    a neutral parameter without a reason)."""


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def bind_params(fn: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: Mapping[str, Any] | None = None,
                ) -> dict[str, Any]:
    """The arguments a call of ``fn`` receives, defaults filled in, ``self`` left out, the
    entries of ``**kwargs`` flattened in (each is a parameter of its own)."""
    sig = inspect.signature(fn)
    bound = sig.bind_partial(*args, **dict(kwargs or {}))
    bound.apply_defaults()
    out: dict[str, Any] = {}
    for name, p in sig.parameters.items():
        if name == "self" or name not in bound.arguments:
            continue
        value = bound.arguments[name]
        if p.kind is p.VAR_KEYWORD:
            out.update(value or {})
        elif p.kind is p.VAR_POSITIONAL:
            out[name] = list(value or ())
        else:
            out[name] = value
    return out


def record_call(obj: Any, factory: Callable[..., Any], params: Mapping[str, Any],
                neutral: Mapping[str, str] | None = None) -> None:
    """Remember on ``obj`` that ``factory`` built it from ``params`` (nothing for objects without
    a ``__dict__``). The outermost call records last, so it wins. Secrets (secret-named keys,
    URL user info, tokens) are kept as ``***``: the object, pickled into another process, carries
    no credential in its record."""
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        from medimg_bench._secrets import redact_secrets

        d[_RECORD] = {"factory": factory, "params": redact_secrets(dict(params)), "neutral": dict(neutral or {})}


def _check_reasons(owner: str, neutral: Mapping[str, str]) -> dict[str, str]:
    bad = [k for k, why in neutral.items() if not isinstance(why, str) or not why.strip()]
    if bad:
        raise IdentityError(f"{owner}: neutral parameter(s) {bad} without a reason; "
                            "say why each decides no value")
    return dict(neutral)


def declaring(factory: Any, *, neutral: Mapping[str, str] | None = None) -> Any:
    """``factory`` made to record its declared parameters on what it builds: a function is
    wrapped (the wrapper is returned), a class gets its ``__init__`` wrapped in place."""
    neutral = _check_reasons(_qualname(factory), neutral or {})
    if inspect.isclass(factory):
        init = factory.__init__
        if getattr(init, "__declared_for__", None) is factory:
            return factory

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)  # first, so a wrong call fails with the factory's own message
            record_call(self, factory, bind_params(init, (self, *args), kwargs), neutral)

        __init__.__declared_for__ = factory  # type: ignore[attr-defined]
        factory.__init__ = __init__
        return factory
    if getattr(factory, "__declared__", False):
        return factory

    @functools.wraps(factory)
    def made(*args: Any, **kwargs: Any) -> Any:
        obj = factory(*args, **kwargs)  # first, so a wrong call fails with the factory's own message
        record_call(obj, made, bind_params(factory, args, kwargs), neutral)
        return obj

    made.__declared__ = True  # type: ignore[attr-defined]
    made.NEUTRAL_PARAMS = neutral  # type: ignore[attr-defined]
    return made


def neutral_params(obj: Any) -> dict[str, str]:
    """``{parameter: reason}`` of ``obj``'s neutral parameters: ``NEUTRAL_PARAMS`` of its class
    and bases, and those its factory was registered with."""
    out: dict[str, str | None] = {}
    for klass in reversed(type(obj).__mro__):
        out.update(klass.__dict__.get(NEUTRAL_ATTR) or {})
    rec = (getattr(obj, "__dict__", None) or {}).get(_RECORD)
    if rec:
        out.update(rec["neutral"])
    # ``None``: a subclass whose parameter of that name decides values (a base said neutral)
    return _check_reasons(type(obj).__qualname__, {k: v for k, v in out.items() if v is not None})


def _record_applies(rec: Mapping[str, Any], obj: Any) -> bool:
    # a class record describes ``obj`` unless a subclass that was not registered defines another
    # ``__init__`` (its own parameters are then read from its attributes)
    f = rec["factory"]
    return not inspect.isclass(f) or type(obj) is f or type(obj).__init__ is f.__init__


def _stored_params(obj: Any, neutral: Mapping[str, str], forwarded: Mapping[str, Any] | None) -> dict[str, Any]:
    # ``forwarded``: what a declared base class's constructor recorded (a subclass passing
    # ``**kwargs`` on to it): a parameter not stored under its name is read from there
    init = type(obj).__init__
    if init is object.__init__:
        return {}
    out: dict[str, Any] = {}
    missing = []
    for name, p in inspect.signature(init).parameters.items():
        if name == "self" or p.kind is p.VAR_POSITIONAL or name in neutral:
            continue
        if p.kind is p.VAR_KEYWORD:
            if hasattr(obj, name):
                out.update(getattr(obj, name) or {})
            elif forwarded is not None:
                out.update({k: v for k, v in forwarded.items() if k not in out})
            else:
                missing.append(name)
        elif hasattr(obj, name):
            out[name] = getattr(obj, name)
        elif forwarded is not None and name in forwarded:
            out[name] = forwarded[name]
        else:
            missing.append(name)
    if missing:
        raise IdentityError(
            f"{_qualname(type(obj))}: parameter(s) {missing} are not stored under their own name, so "
            "its identity would forget them; store each as self.<name>, build it through the registry, "
            f"or declare it in {NEUTRAL_ATTR} with the reason it decides no value")
    return out


def recorded_params(obj: Any) -> dict[str, Any] | None:
    """What ``obj``'s registered factory was called with (neutral parameters left out), or None
    when no record applies to it."""
    rec = (getattr(obj, "__dict__", None) or {}).get(_RECORD)
    if not rec or not _record_applies(rec, obj):
        return None
    neutral = neutral_params(obj)
    return {k: v for k, v in rec["params"].items() if k not in neutral}


def recorded_factory(obj: Any) -> str | None:
    """The qualified name of the factory that built ``obj`` (None when none recorded it)."""
    rec = (getattr(obj, "__dict__", None) or {}).get(_RECORD)
    return _qualname(rec["factory"]) if rec else None


def declared_params(obj: Any) -> dict[str, Any]:
    """``obj``'s declared parameters, neutral ones left out: what its factory or constructor was
    called with (recorded, see :func:`declaring`), else its attributes of the same names."""
    neutral = neutral_params(obj)
    rec = (getattr(obj, "__dict__", None) or {}).get(_RECORD)
    if rec and _record_applies(rec, obj):
        params = dict(rec["params"])
    else:
        params = _stored_params(obj, neutral, rec["params"] if rec else None)
    return {k: v for k, v in params.items() if k not in neutral}


def identity_value(value: Any, *, depth: int = 0) -> Any:
    """A parameter's value as a plain, process-independent description: containers item by item,
    a generative adapter by its ``cache_identity()`` (no server asked), an object with a
    ``fingerprint()`` by it, a function or method by
    :func:`~medimg_bench._hashing.callable_identity` (code, captured values), a class by name,
    anything else (a transform object, whose repr shows its settings) by
    :func:`~medimg_bench._hashing.plain_value`."""
    from medimg_bench._hashing import callable_identity, plain_value

    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # NaN is not equal to itself: two equal keys would differ
    if depth > 8 or value is None or isinstance(value, (bool, int, float, str, os.PathLike)):
        return plain_value(value)
    if isinstance(value, Mapping):
        return {str(k): identity_value(v, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [identity_value(v, depth=depth + 1) for v in value]
    if inspect.isclass(value):
        return f"<class {_qualname(value)}>"
    for attr in ("cache_identity", "fingerprint"):
        hook = getattr(value, attr, None)
        if callable(hook) and not inspect.isclass(value):
            return {attr: plain_value(hook())}
    if inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value):
        return callable_identity(value)
    return plain_value(value)  # a transform object's repr shows its settings


def declared_files(obj: Any) -> dict[str, str]:
    """``{option: local path}`` of the files and folders ``obj`` declares it reads (its
    ``key_files()``; none without one)."""
    hook = getattr(obj, "key_files", None)
    files = hook() if callable(hook) else {}
    return {str(k): os.fspath(v) for k, v in (files or {}).items() if v is not None}


def _mark_content(params: dict[str, Any], option: str) -> None:
    """Replace the path a declared file's option holds by :data:`CONTENT` (``a.b``: key ``b`` of
    the mapping ``a``; ``a/b``: a file inside the folder option ``a``)."""
    if option in params:
        params[option] = CONTENT
        return
    for sep in (".", "/"):
        head, _, rest = option.partition(sep)
        if rest and head in params:
            inner = params[head]
            if sep == "." and isinstance(inner, dict):
                _mark_content(inner, rest)
            elif sep == "/":
                params[head] = CONTENT
            return


def param_identity(obj: Any) -> dict[str, Any]:
    """``obj``'s declared, non-neutral parameters as plain values (:func:`identity_value`), the
    paths of the files it declares (:func:`declared_files`) replaced by :data:`CONTENT`."""
    params = {k: identity_value(v) for k, v in sorted(declared_params(obj).items())}
    for option in declared_files(obj):
        _mark_content(params, option)
    return params


def component_identity(obj: Any, *, files: bool = True) -> dict[str, Any]:
    """``{"class", "params", "files"}``: the class, :func:`param_identity` and (with ``files``)
    the content digest of every declared file (``files`` absent when none is declared)."""
    out: dict[str, Any] = {"class": _qualname(type(obj)), "params": param_identity(obj)}
    declared = declared_files(obj) if files else {}
    if declared:
        from medimg_bench._hashing import content_digests

        out["files"] = content_digests(declared)
    return out
