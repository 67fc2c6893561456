"""Secrets never reach a file the toolkit writes.

Two rules, applied together by :func:`redact_secrets` (dicts, lists, strings) and
:func:`redact_text` (one string):

* **by name**: the value under a key that names a credential (:func:`is_secret_key`:
  ``api_key``, ``*_api_key``, ``*apikey*``, ``*token*`` but not ``*tokens*``/``tokenizer``,
  ``*secret*``, ``*password*``/``passwd``, ``*credential*``, ``private_key``, ``passphrase``,
  ``authorization``, ``cookie``) becomes ``***``, at any depth (``extra_body.api_key``), also
  when the pair sits inside a string: ``key=value`` overrides, URL query strings
  (``?access_token=…``), JSON text (``"api_key": "…"``) and YAML-like ``key: value`` lines;
* **by look**: values that look like a credential whatever their key — the user info of a URL
  (``http://user:pw@host`` → ``http://***@host``), ``Bearer …`` / ``Basic …`` headers, and the
  token formats of common providers (OpenAI ``sk-…``, Hugging Face ``hf_…``, GitHub
  ``ghp_…``/``github_pat_…``, Slack ``xox?-…``, AWS ``AKIA…``, Google ``AIza…``, JWTs).

A core module (layer 0): datasets, models and the engine all redact through it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["REDACTED", "is_secret_key", "looks_like_secret", "secret_values", "redact_secrets",
           "redact_text", "redact_url", "redact_files", "SecretFilter", "install_log_filter",
           "environ_secret_values"]

REDACTED = "***"

_SECRET_TOKEN = re.compile(r"token(?!s|iz)")
# user info of a URL: scheme://user[:password]@
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<info>[^/@\s'\"<>]+)@")
_AUTH_HEADER = re.compile(r"\b(?P<kind>Bearer|Basic|Token)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})")
_TOKEN_FORMATS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"  # OpenAI, Anthropic
    r"|sk_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe-style
    r"|hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
    r")"
)
# a secret-named key and its value inside a longer string
_NAME = r"[A-Za-z0-9_.+~-]*(?:api[_-]?key|apikey|token(?!s|iz)|secret|password|passwd|credential|private[_-]?key|passphrase|authorization|cookie)[A-Za-z0-9_-]*"
_PAIR_JSON = re.compile(r"(?P<k>[\"']" + _NAME + r"[\"']\s*:\s*)(?P<q>[\"'])(?P<v>(?:\\.|(?!(?P=q)).)*)(?P=q)",
                        re.IGNORECASE)
_PAIR_EQ = re.compile(r"(?P<k>(?<![A-Za-z0-9_])" + _NAME + r"\s*=\s*)(?P<v>[^\s&,;'\"}\]]+)", re.IGNORECASE)
_PAIR_COLON = re.compile(r"(?P<k>(?<![A-Za-z0-9_\"'])" + _NAME + r":[ \t]+)(?P<v>[^\s,'\"{}\[\]][^\s,}\]]*)",
                         re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """True for keys that name a secret: ``api_key``, ``*_api_key``, ``*apikey*``, ``*token*``
    (not ``*tokens*``/``tokenizer``: counts and tokenizers are not secrets), ``*secret*``,
    ``*password*``, ``*passwd*``, ``*credential*``, ``private_key``, ``passphrase``,
    ``authorization``, ``cookie`` — case-insensitive, ``-`` read as ``_``, the last dotted part
    of an override key. Keys that merely contain ``key`` (``label_key``, ``api_key_env``, which
    names a variable) are not secrets."""
    k = str(key).lower().lstrip("+~").replace("-", "_")
    k = k.rsplit(".", 1)[-1]
    if k.endswith("_env"):  # the name of an environment variable, not its value
        return False
    return (k == "api_key" or k.endswith("_api_key") or "apikey" in k or bool(_SECRET_TOKEN.search(k))
            or "secret" in k or "password" in k or "passwd" in k or "credential" in k
            or k.endswith("private_key") or k == "passphrase" or k in ("authorization", "cookie", "x_api_key"))


def looks_like_secret(value: Any) -> bool:
    """True when a string value looks like a credential whatever its key: URL user info, an
    authorization header, or a known provider token format."""
    if not isinstance(value, str):
        return False
    return bool(_USERINFO.search(value) or _AUTH_HEADER.search(value) or _TOKEN_FORMATS.search(value))


def redact_url(url: str) -> str:
    """``url`` with its user info replaced: ``http://user:pw@host/v1`` → ``http://***@host/v1``."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", str(url))


def redact_text(text: str, values: Iterable[str] = ()) -> str:
    """``text`` with credentials replaced by ``***``: known secret ``values`` anywhere, URL user
    info, authorization headers, provider token formats, and the value of every secret-named
    key written as ``key=value``, ``"key": "value"`` or ``key: value``."""
    if not text:
        return text
    for v in sorted({str(v) for v in values if v is not None and len(str(v)) >= 4}, key=len, reverse=True):
        if v in text:
            text = text.replace(v, REDACTED)
    text = redact_url(text)
    text = _AUTH_HEADER.sub(lambda m: f"{m['kind']} {REDACTED}", text)
    text = _TOKEN_FORMATS.sub(REDACTED, text)
    text = _PAIR_JSON.sub(lambda m: f"{m['k']}{m['q']}{REDACTED}{m['q']}" if m["v"] != REDACTED else m[0], text)
    text = _PAIR_EQ.sub(lambda m: m["k"] + REDACTED if _redactable(m["k"], m["v"]) else m[0], text)
    text = _PAIR_COLON.sub(lambda m: m["k"] + REDACTED if _redactable(m["k"], m["v"]) else m[0], text)
    return text


def _redactable(key_part: str, value: str) -> bool:
    key = key_part.rstrip(" \t=:").strip()
    return value not in (REDACTED, "null", "None", "none", "") and is_secret_key(key)


def secret_values(config: Any, overrides: Sequence[str] = ()) -> set[str]:
    """The values to keep out of every file: those under secret keys in ``config`` and in
    ``key=value`` overrides, and the secret parts of values that look like credentials (the
    password of a URL's user info, a bearer token, a provider token)."""
    found: set[str] = set()

    def take(value: Any) -> None:
        if isinstance(value, str):
            found.update(_secret_parts(value))

    def walk(obj: Any) -> None:
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                if is_secret_key(str(k)) and v not in (None, "") and not isinstance(v, (Mapping, list, tuple)):
                    found.add(str(v))
                else:
                    walk(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v)
        else:
            take(obj)

    walk(config)
    for o in overrides:
        take(str(o))
        if "=" in str(o):
            k, v = str(o).split("=", 1)
            v = v.strip("'\"")
            if is_secret_key(k) and v not in ("", "null"):
                found.add(v)
            elif v.startswith("{"):  # +model.options.extra_body={api_key:...}: nested secret keys
                found.update(_inline_dict_secrets(v))
    return {v for v in found if len(v) >= 4 and v != REDACTED}


def _secret_parts(text: str) -> set[str]:
    out: set[str] = set()
    for m in _USERINFO.finditer(text):
        info = m["info"]
        out.add(info.split(":", 1)[1] if ":" in info else info)
    out.update(m["value"] for m in _AUTH_HEADER.finditer(text))
    out.update(m[0] for m in _TOKEN_FORMATS.finditer(text))
    return out


def _inline_dict_secrets(text: str) -> set[str]:
    """Values of secret keys in a Hydra inline dict ``{a: 1, api_key: x}``."""
    out = set()
    for m in re.finditer(r"([A-Za-z0-9_.-]+)\s*:\s*([^,{}\s]+)", text):
        if is_secret_key(m.group(1)):
            out.add(m.group(2).strip("'\""))
    return out


def redact_secrets(obj: Any, values: set[str] | None = None) -> Any:
    """A copy of ``obj`` (dicts, lists, strings) with the values of secret keys (at any depth),
    secret ``key=value`` pairs inside strings, credential-looking values and any occurrence of a
    known secret value (``values``, default: :func:`secret_values` of ``obj``) replaced by ``***``."""
    known = values if values is not None else secret_values(obj)

    def walk(o: Any) -> Any:
        if isinstance(o, Mapping):
            return {k: (REDACTED if is_secret_key(str(k)) and v is not None
                        and not isinstance(v, (Mapping, list, tuple)) else walk(v)) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [walk(v) for v in o]
        if isinstance(o, str):
            return redact_text(o, known)
        return o

    return walk(obj)


def redact_files(paths: Sequence[str | Path], values: set[str]) -> None:
    """Rewrite YAML files (Hydra's ``.hydra/*.yaml``, ``multirun.yaml``) with secrets replaced by
    ``***``, atomically (temporary file, then rename). Files without a secret are left as they are."""
    import yaml

    from medimg_bench._fs import atomic_write

    for path in paths:
        path = Path(path)
        if not path.is_file():
            continue
        text = path.read_text()
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            data = None
        if isinstance(data, (Mapping, list)):
            redacted = redact_secrets(data, values)
            new = text if redacted == data else yaml.safe_dump(redacted, sort_keys=False, allow_unicode=True)
        else:
            new = text
        new = redact_text(new, values)
        if new != text:
            with atomic_write(path, mode="w") as f:
                f.write(new)


class SecretFilter(logging.Filter):
    """A logging filter that redacts every record's message (see :func:`redact_text`) before a
    handler writes it; install it on handlers (``cli.log``, the console)."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        super().__init__()
        self.values = set(values)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format: leave it to the handler
            return True
        clean = redact_text(message, self.values)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info), self.values)
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text, self.values)
        return True


def install_log_filter(values: Iterable[str] = (), logger: logging.Logger | None = None) -> SecretFilter:
    """Add one :class:`SecretFilter` to every handler of ``logger`` (default: the root logger);
    returns it (its ``values`` may be extended later)."""
    target = logger or logging.getLogger()
    filt = next((f for h in target.handlers for f in h.filters if isinstance(f, SecretFilter)), None)
    if filt is None:
        filt = SecretFilter(values)
    else:
        filt.values.update(values)
    for h in target.handlers:
        if filt not in h.filters:
            h.addFilter(filt)
    return filt


def environ_secret_values() -> set[str]:
    """Values of environment variables whose name names a secret (``OPENAI_API_KEY``…)."""
    return {v for k, v in os.environ.items() if is_secret_key(k) and v and len(v) >= 4}
