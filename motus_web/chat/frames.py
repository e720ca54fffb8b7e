"""The frames a browser may send over the session socket, checked before use.

Every frame is one JSON object with a ``type``; anything else is refused with
a ``FrameError`` naming what is wrong (the consumer answers it with an
``error`` frame and keeps the socket open). The types:

``{"type": "resume", "last_pos": int}``
    Send me every record after log position ``last_pos`` (``-1``: all), then
    new ones as they are stored.
``{"type": "send", "text": str, "model": str?}``
    Add ``text`` as the user's message and run a turn (owner or staff only).
``{"type": "retry", "model": str?}``
    Run the turn again from the stored context, after a provider error.
``{"type": "stop"}``
    Stop the running turn (or replay) of this session.
``{"type": "replay", "speed": number}``
    Start the replay this session was created for; ``speed`` is messages per
    second, ``0`` as fast as possible.
``{"type": "compact", "token": str, "instructions": str?}``
    Compact the session's context now (owner or staff only), keeping what
    ``instructions`` name. ``token`` is the form's one-time token (20 to 64
    letters, digits, ``-``, ``_``: ``once.TOKEN_RULE``): a second frame with
    the same token does nothing and is told so.

A frame nested deeper than JSON parsers keep on their stack (a few thousand
brackets) is refused like any other malformed one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from motus_web.sessions import once

MAX_FRAME_BYTES = 64 * 1024  # a frame over this closes the socket (1009)
MAX_TEXT_CHARS = 20_000
MAX_SPEED = 100.0
MAX_INSTRUCTIONS_CHARS = 2_000


class FrameError(ValueError):
    """A frame that is not JSON, has an unknown type, or fields of the wrong shape."""


@dataclass(frozen=True, slots=True)
class Resume:
    last_pos: int


@dataclass(frozen=True, slots=True)
class Send:
    text: str
    model: str | None


@dataclass(frozen=True, slots=True)
class Retry:
    model: str | None


@dataclass(frozen=True, slots=True)
class Stop:
    pass


@dataclass(frozen=True, slots=True)
class StartReplay:
    speed: float


@dataclass(frozen=True, slots=True)
class Compact:
    token: str
    instructions: str | None


Frame = Resume | Send | Retry | Stop | StartReplay | Compact

_FIELDS: dict[str, set[str]] = {
    "resume": {"last_pos"},
    "send": {"text", "model"},
    "retry": {"model"},
    "stop": set(),
    "replay": {"speed"},
    "compact": {"token", "instructions"},
}


def parse_frame(text: str) -> Frame:
    """The typed frame of ``text``. Raises ``FrameError``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise FrameError("a frame must be a JSON object") from None
    except RecursionError:
        raise FrameError("a frame must not be nested this deeply") from None
    if not isinstance(data, dict):
        raise FrameError("a frame must be a JSON object")
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _FIELDS:
        raise FrameError(f"unknown frame type; one of {', '.join(sorted(_FIELDS))}")
    unknown = set(data) - _FIELDS[kind] - {"type"}
    if unknown:
        raise FrameError(f"{kind} frames have no field {sorted(unknown)[0]!r}")
    if kind == "resume":
        return Resume(_integer(data, "last_pos", minimum=-1))
    if kind == "send":
        text_value = data.get("text")
        if not isinstance(text_value, str) or not text_value.strip():
            raise FrameError("send needs a non-empty text")
        if len(text_value) > MAX_TEXT_CHARS:
            raise FrameError(f"a message is at most {MAX_TEXT_CHARS} characters")
        return Send(text_value, _model(data))
    if kind == "retry":
        return Retry(_model(data))
    if kind == "stop":
        return Stop()
    if kind == "compact":
        return _compact(data)
    speed = data.get("speed")
    if (
        isinstance(speed, bool)
        or not isinstance(speed, int | float)
        or not math.isfinite(speed)
        or not 0 <= speed <= MAX_SPEED
    ):
        raise FrameError(f"speed must be a number from 0 to {MAX_SPEED:g}")
    return StartReplay(float(speed))


def _compact(data: dict[str, Any]) -> Compact:
    token = data.get("token")
    if not once.is_token(token):
        raise FrameError(f"compact needs a token of {once.TOKEN_RULE}")
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise FrameError("instructions must be a text")
    if instructions is not None and len(instructions) > MAX_INSTRUCTIONS_CHARS:
        raise FrameError(f"instructions are at most {MAX_INSTRUCTIONS_CHARS} characters")
    return Compact(token, (instructions or "").strip() or None)


def _integer(data: dict[str, Any], key: str, *, minimum: int) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FrameError(f"{key} must be an integer >= {minimum}")
    return value


def _model(data: dict[str, Any]) -> str | None:
    model = data.get("model")
    if model is None:
        return None
    if not isinstance(model, str) or not 0 < len(model) <= 100:
        raise FrameError("model must be the name of a configured model")
    return model
