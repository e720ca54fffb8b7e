"""Import conversation files into the dashboard.

Formats, detected from the content (see ``detect.py``): Motus JSONL logs
(including the reference implementation's older ones), OpenAI chat messages
as JSON (a list of messages, an object with ``messages``/``traj``/``history``,
or a list of such runs) and JSONL with one ``{"messages": [...]}`` per line.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import BinaryIO

from .detect import Format, detect_format
from .parsers import parse_json, parse_messages_jsonl, parse_motus_log
from .sources import Problem
from .writer import ImportOptions, ImportReport, Skipped, Writer

__all__ = [
    "Format",
    "ImportOptions",
    "ImportReport",
    "Problem",
    "Skipped",
    "import_path",
    "import_stream",
]


def import_stream(stream: BinaryIO, source: str, options: ImportOptions) -> ImportReport:
    """Import every session in ``stream`` (binary, seekable); ``source`` names it in messages.

    Each session is written in its own transaction; problems are reported
    with their line (JSONL) or record (JSON) and never leave half a session.
    Call from sync code: chat transcripts run through a memory under
    ``asyncio.run``.
    """
    digest = _digest(stream)
    stem = Path(source).stem
    match detect_format(stream):
        case Format.MOTUS_LOG:
            found = parse_motus_log(stream, source)
        case Format.MESSAGES_JSONL:
            found = parse_messages_jsonl(stream, source, stem)
        case Format.JSON:
            found = parse_json(stream, source, stem)
    writer = Writer(source, digest, options)
    for item in found:
        writer.take(item)
    return writer.report


def import_path(path: Path, options: ImportOptions) -> ImportReport:
    with path.open("rb") as stream:
        return import_stream(stream, str(path), options)


def _digest(stream: BinaryIO) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        digest.update(chunk)
    stream.seek(0)
    return digest.hexdigest()[:32]
