"""Strict readers of environment variables for ``settings.py``.

Each helper returns the default when the variable is unset or empty, and raises
``ImproperlyConfigured`` naming the variable when its value is nonsense, so a
typo such as ``DEBUG=ture`` stops the process instead of silently meaning off.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _raw(name: str, environ: Mapping[str, str] | None) -> str:
    return (os.environ if environ is None else environ).get(name, "").strip()


def env_str(name: str, default: str = "", environ: Mapping[str, str] | None = None) -> str:
    return _raw(name, environ) or default


def env_bool(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ).lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/0, true/false, yes/no, on/off; got {value!r}"
    )


def env_int(
    name: str, default: int, *, minimum: int = 0, environ: Mapping[str, str] | None = None
) -> int:
    value = _raw(name, environ)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {value!r}") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    return number


def env_list(name: str, default: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """A comma-separated list; empty items (``a,,b``) are nonsense, not a wildcard."""
    value = _raw(name, environ)
    if not value:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        raise ImproperlyConfigured(f"{name} has an empty item: {value!r}")
    return items


def env_choice(
    name: str, choices: frozenset[str], default: str, environ: Mapping[str, str] | None = None
) -> str:
    value = _raw(name, environ) or default
    if value not in choices:
        raise ImproperlyConfigured(
            f"{name} must be one of {', '.join(sorted(choices))}; got {value!r}"
        )
    return value


def env_url(name: str, schemes: frozenset[str], environ: Mapping[str, str] | None = None) -> str:
    """A URL whose scheme is one of ``schemes``, or ``""`` when unset."""
    value = _raw(name, environ)
    if value and value.partition("://")[0] not in schemes:
        allowed = ", ".join(sorted(schemes))
        raise ImproperlyConfigured(
            f"{name} must start with one of {allowed} then '://', got {value!r}"
        )
    return value


def local_secret_key(path: Path) -> str:
    """The secret key kept in ``path``, generated on first use.

    Only for a local run: the key never leaves the machine. The file is written
    under a temporary name and hard-linked into place, so two processes
    starting at once (``pytest -n 2``) agree on one key.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_text(secrets.token_urlsafe(50))
        temporary.chmod(0o600)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process won the race; its key is the one to use
        finally:
            temporary.unlink()
    key = path.read_text().strip()
    if len(key) < 32:
        raise ImproperlyConfigured(f"{path} holds a secret key shorter than 32 characters")
    return key
