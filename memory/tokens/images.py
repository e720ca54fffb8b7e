"""What images, audio and files inside a message cost, by the providers' published rules.

Each rule is documented on its constant, with its source. Sizes are read from
the first bytes of an inline (base64) image without decoding it whole.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Mapping
from typing import Any

# OpenAI vision guide, "Calculating costs": detail "low" costs 85 tokens; "high"
# (and "auto", counted as high) scales the image to fit 2048x2048, then its
# shortest side down to 768 px, and costs 170 per 512 px tile plus 85.
OPENAI_LOW_DETAIL_TOKENS = 85
OPENAI_BASE_TOKENS = 85
OPENAI_TILE_TOKENS = 170
# An image whose size cannot be read (an http URL, an undecodable header) is
# counted at the most the rule can charge: 8 tiles (e.g. 768x2048 px) = 1,445.
OPENAI_UNKNOWN_IMAGE_TOKENS = OPENAI_BASE_TOKENS + 8 * OPENAI_TILE_TOKENS
# Anthropic vision guide: tokens = width * height / 750, after scaling the long
# edge down to 1568 px; larger images are scaled to about 1,600 tokens.
ANTHROPIC_MAX_LONG_EDGE = 1568
ANTHROPIC_MAX_IMAGE_TOKENS = 1600
ANTHROPIC_UNKNOWN_IMAGE_TOKENS = ANTHROPIC_MAX_IMAGE_TOKENS
# OpenAI audio input: about 1 token per 100 ms (estimate). Without a WAV header
# the duration is estimated from the size at 128 kbit/s.
AUDIO_TOKENS_PER_SECOND = 10
AUDIO_DEFAULT_BYTES_PER_SECOND = 16_000
# Files (PDF): a rough estimate per page, text plus the page image both
# providers add; the page count is read from the PDF when it is inline, else 1.
FILE_TOKENS_PER_PAGE = 2000

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
AUDIO_PART_TYPES = frozenset({"input_audio", "audio"})
FILE_PART_TYPES = frozenset({"file", "input_file", "document"})
# How much of an image is decoded to find its size: the header is in the first
# 4 KB, except in a JPEG with large EXIF/ICC segments; past 256 KB the size is
# taken as unknown.
_HEADER_PREFIX_BYTES = (4096, 65_536 + 4096, 262_144)
PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def openai_image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """Tokens of a ``width`` x ``height`` px image by OpenAI's tile rule (see the constants)."""
    if detail == "low":
        return OPENAI_LOW_DETAIL_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(round(w) / 512) * math.ceil(round(h) / 512)
    return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * max(tiles, 1)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Tokens of a ``width`` x ``height`` px image by Anthropic's rule (see the constants)."""
    w, h = float(width), float(height)
    if max(w, h) > ANTHROPIC_MAX_LONG_EDGE:
        scale = ANTHROPIC_MAX_LONG_EDGE / max(w, h)
        w, h = round(w * scale), round(h * scale)
    return max(1, min(math.ceil(w * h / 750), ANTHROPIC_MAX_IMAGE_TOKENS))


def image_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` read from the header of a PNG, JPEG, GIF or WebP file, or ``None``."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return _valid_size(width, height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return _valid_size(width, height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _valid_size(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return _valid_size(width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return _valid_size((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return _valid_size(width, height)
    return None


# Start-of-frame markers hold the size; C4 (DHT), C8 (JPG) and CC (DAC) do not.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
            continue
        if marker in _JPEG_SOF:
            if i + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return _valid_size(width, height)
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


def base64_payload(value: object) -> str | None:
    """The base64 text of a ``data:...;base64,`` URL or of raw base64 data."""
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("data:"):
        header, sep, payload = value.partition(",")
        return payload if sep and header.endswith(";base64") else None
    if value.startswith(("http://", "https://", "file://", "gs://", "s3://")):
        return None
    return value


def b64decode_prefix(payload: str, nbytes: int) -> bytes:
    """The first ``nbytes`` (or a little more) decoded bytes of ``payload``, or ``b""``."""
    chars = ((nbytes + 2) // 3) * 4
    head = "".join(payload[: chars + 64].split())[:chars]
    head = head[: len(head) - len(head) % 4]
    try:
        return base64.b64decode(head)
    except (binascii.Error, ValueError):
        return b""


def image_part_size(part: Mapping[str, Any]) -> tuple[int, int] | None:
    value: object = part.get("image_url")
    if isinstance(value, Mapping):
        value = value.get("url")
    source = part.get("source")
    if value is None and isinstance(source, Mapping):
        value = source.get("data") if source.get("type") == "base64" else source.get("url")
    payload = base64_payload(value)
    if payload is None:
        return None
    for nbytes in _HEADER_PREFIX_BYTES:
        data = b64decode_prefix(payload, nbytes)
        size = image_size(data)
        # Only a JPEG can keep its size further in (after EXIF or ICC segments).
        if size is not None or data[:2] != b"\xff\xd8" or len(data) < nbytes:
            return size
    return None


def audio_part_tokens(part: Mapping[str, Any]) -> int:
    inner = part.get("input_audio") or part.get("audio") or part
    if not isinstance(inner, Mapping):
        return AUDIO_TOKENS_PER_SECOND
    payload = base64_payload(inner.get("data"))
    if payload is None:
        return AUDIO_TOKENS_PER_SECOND
    size = len(payload) * 3 // 4
    header = b64decode_prefix(payload, 64)
    bytes_per_second = AUDIO_DEFAULT_BYTES_PER_SECOND
    if header[:4] == b"RIFF" and header[8:12] == b"WAVE" and len(header) >= 32:
        bytes_per_second = int.from_bytes(header[28:32], "little") or bytes_per_second
        size = max(size - 44, 0)
    return max(1, math.ceil(size / bytes_per_second * AUDIO_TOKENS_PER_SECOND))
