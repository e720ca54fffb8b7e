"""Import conversation files into the dashboard.

Formats, detected from the content (``formats.detect``): Motus JSONL logs
(including the reference implementation's older ones), OpenAI chat messages
as JSON (a list of messages, an object with ``messages``/``traj``/``history``,
or a list of such runs) and JSONL with one ``{"messages": [...]}`` per line,
read here; Claude Code, Codex CLI, ChatGPT, Claude.ai, Gemini CLI and
Anthropic Messages files, read by ``formats``. Any of them may be
gzip-compressed (by extension or magic bytes) and carry a UTF-8 byte order
mark, CRLF line ends and blank lines.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import BinaryIO

from django.db import InterfaceError, OperationalError

from . import formats
from .detect import Format, detect_format
from .formats import FormatProblem
from .formats._io import (
    HEAD_SIZE,
    PlainTooLarge,
    bounded_plain,
    cut_short,
    encoding_problem,
    open_plain,
    plain_head,
)
from .formats.claude_code import subagent_files
from .parsers import EXPECTED, parse_json, parse_messages_jsonl, parse_motus_log, skip_bom
from .sources import AgentSession, Found, Problem
from .writer import (
    INTERNAL_ERROR,
    ImportCancelled,
    ImportOptions,
    ImportReport,
    Outcome,
    Progress,
    Skipped,
    Writer,
)

__all__ = [
    "Format",
    "ImportCancelled",
    "ImportOptions",
    "ImportReport",
    "Outcome",
    "Problem",
    "Progress",
    "Skipped",
    "first_problem",
    "import_path",
    "import_stream",
]

logger = logging.getLogger(__name__)

# A damaged gzip stream (truncated, bad CRC) or a failing disk, met while reading.
_UNREADABLE = (EOFError, OSError, zlib.error)


def import_stream(
    stream: BinaryIO,
    source: str,
    options: ImportOptions,
    subagents: list[tuple[BinaryIO, str]] | None = None,
) -> ImportReport:
    """Import every session in ``stream`` (binary, seekable); ``source`` names it in messages.

    Sessions are written in short committed transactions (``commits``), a
    long one in several, shown only once complete; problems are reported with
    the file's name, the line or record, and the field, and never leave half
    a session. ``subagents`` are a Claude Code session's subagent
    transcripts. Call from sync code (not inside a running event loop).
    When ``options.checkpoint`` raises ``ImportCancelled``, the report says
    ``cancelled`` and holds the sessions finished before (committed). A gzip file that expands
    past ``options.max_plain_bytes`` stops there (``stopped``, with a problem);
    the sessions committed before stay.
    """
    writer: Writer | None = None
    try:
        digest = _digest(stream)
        writer = Writer(source, digest, options)
        plain = bounded_plain(stream, options.max_plain_bytes)
        # Leaving this block commits what is written (also when the import stops on
        # a cap, a cancel or a bug), and rolls it back only when the database failed.
        with writer.transactions:
            for found in _found(plain, source, subagents or [], options.max_messages):
                writer.take(found)
                if writer.report.stopped:
                    break
        if why := cut_short(plain):
            writer.report.warnings.append(Problem(source, "", why, warning=True))
    except PlainTooLarge as error:
        report = writer.report if writer is not None else ImportReport()
        report.stopped = True
        report.problems.append(
            Problem(
                source,
                "",
                f"{error}, the most an upload may expand to: "
                "import it on the server with `manage.py import_sessions FILE`",
            )
        )
        return report
    except ImportCancelled:
        report = writer.report if writer is not None else ImportReport()
        report.cancelled = True
        return report
    except _UNREADABLE as error:
        report = writer.report if writer is not None else ImportReport()
        report.problems.append(Problem(source, "", f"the file cannot be read to its end: {error}"))
        return report
    except (OperationalError, InterfaceError):
        raise  # the database failed: the caller (an import job) says so and stops
    except Exception as error:
        # A parser's bug must not fail the page: the rest of the file is not read.
        logger.exception("reading %s failed", source)
        report = writer.report if writer is not None else ImportReport()
        report.problems.append(Problem(source, "", f"{INTERNAL_ERROR} ({type(error).__name__})"))
        return report
    return writer.report


def import_path(path: Path, options: ImportOptions) -> ImportReport:
    """``import_stream`` a file on disk, with a Claude Code session's subagent files."""
    with path.open("rb") as stream:
        files = subagent_files(path)
        handles = [child.open("rb") for child in files]
        try:
            pairs: list[tuple[BinaryIO, str]] = [
                (handle, str(file)) for handle, file in zip(handles, files, strict=True)
            ]
            return import_stream(stream, str(path), options, pairs)
        finally:
            for handle in handles:
                handle.close()


def first_problem(stream: BinaryIO, source: str) -> Problem | None:
    """Why ``stream`` cannot be imported, read from its first 64 KB alone, or ``None``.

    ``None`` says only that the start looks importable; the import reads the
    rest. A gzip stream that breaks within the head is left to the import,
    which says where. The stream is rewound.
    """
    try:
        head = plain_head(open_plain(stream).read(HEAD_SIZE))
    except _UNREADABLE:
        return None
    finally:
        stream.seek(0)
    return _head_problem(head, source, formats.detect(head, source))


def _head_problem(head: bytes, name: str, format_: str | None) -> Problem | None:
    """What the head (decompressed) of a file in ``format_`` says is wrong, if anything."""
    if problem := encoding_problem(head):
        return Problem(name, "", problem)
    if format_ is None and (reason := _reason(head)):
        return _problem(formats.unrecognised(name, reason))
    return None


def _found(
    stream: BinaryIO,
    name: str,
    subagents: list[tuple[BinaryIO, str]],
    max_messages: int | None = None,
) -> Iterator[Found]:
    plain = open_plain(stream)
    head = plain_head(plain.read(HEAD_SIZE))
    plain.seek(0)
    format_ = formats.detect(head, name)
    if problem := _head_problem(head, name, format_):
        yield problem
        return
    if format_ == "motus-log":
        yield from parse_motus_log(skip_bom(plain), name, max_messages)
    elif format_ == "openai-chat":
        plain = skip_bom(plain)
        if detect_format(plain) == Format.MESSAGES_JSONL:
            yield from parse_messages_jsonl(skip_bom(plain), name, _stem(name))
        else:
            yield from parse_json(skip_bom(plain), name, _stem(name))
    elif format_ is None and not _reason(head):
        # JSON whose messages lie past the head (an SWE-agent trajectory): look for them.
        for found in parse_json(skip_bom(plain), name, _stem(name)):
            unknown = (
                isinstance(found, Problem) and found.message == EXPECTED and not found.location
            )
            yield _problem(formats.unrecognised(name)) if unknown else found
    else:
        stream.seek(0)
        index = 0  # sessions only: the warnings before one do not shift its number
        for item in formats.parse(stream, name, subagents, max_messages):
            if isinstance(item, FormatProblem):
                yield _problem(item)
            else:
                index += 1
                yield AgentSession(index, item)


def _problem(problem: FormatProblem) -> Problem:
    what = f"field {problem.field!r}: {problem.message}" if problem.field else problem.message
    return Problem(problem.source, problem.location, what, problem.warning)


def _reason(head: bytes) -> str | None:
    if not head.strip():
        return "The file is empty"
    if head.lstrip()[:1] not in (b"{", b"["):
        return "The file is not JSON or JSONL"
    return None


def _stem(name: str) -> str:
    return PurePath(PurePath(name).name.removesuffix(".gz")).stem


def _digest(stream: BinaryIO) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        digest.update(chunk)
    stream.seek(0)
    return digest.hexdigest()[:32]
