"""Parsers of the Motus formats: each yields transcripts or logs, and problems with their place.

Every parser takes the file's plain bytes (gzip already undone, see
``formats._io.open_plain``), positioned after any UTF-8 byte order mark.
JSONL is read line by line and a JSON list of messages is streamed with
``ijson``, so a large file never sits in memory whole: what is held at once is
one session (a run of a list of runs, a line of JSONL, a Motus log).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import ijson
import orjson

from memory import load_json as loads
from memory.log import LogProblem, parse_lines, records

from .formats._io import BOM, NUL_RUN, Overlong, capped_lines
from .formats._json import READ_BYTES, TOO_DEEP, has_lone_surrogate_escape, nesting_too_deep
from .sources import Found, MotusLog, Problem, Refused, Transcript

# Where runs keep their messages: OpenAI-style exports, tau-bench, SWE-agent.
MESSAGE_KEYS = ("messages", "traj", "history")
_TITLE_KEYS = ("title", "task_id", "trial")
NOT_UTF8 = "the file is not UTF-8 text: save it as UTF-8"


def skip_bom(stream: BinaryIO) -> BinaryIO:
    """``stream`` rewound to its start, past a UTF-8 byte order mark if it has one."""
    stream.seek(0)
    if stream.read(len(BOM)) != BOM:
        stream.seek(0)
    return stream


def parse_motus_log(
    stream: BinaryIO, source: str, max_messages: int | None = None
) -> Iterator[Found]:
    """Each ``session_meta`` line starts a log (files of several runs are concatenated
    logs). A line that cannot be read (cut short by a crash, NUL padding, not
    JSON) is skipped with a warning naming it, as a restore skips it; a record
    the log store refuses still refuses its own log, and the others import.

    ``max_messages`` (an upload's cap) is counted while reading: past it the
    file is read no further, and the log being read ends at the first message
    over the cap, which the writer refuses. So the records held stay within
    the cap whatever the file's length.
    """
    found: list[dict[str, Any]] = []
    lines: list[int] = []
    index = 0
    messages = 0
    last = _LastLine(stream)
    for number, item in parse_lines(last):
        yield from last.padding(source, up_to=number)
        if isinstance(item, LogProblem):
            detail = f"{item.error} (a torn last line)" if item.torn else item.error
            detail = detail if _is_utf8(last.raw) else NOT_UTF8
            yield Problem(source, f"line {number}", f"skipped: {detail}", warning=True)
            continue
        if item["type"] == records.SESSION_META and found:
            index += 1
            yield from _motus_log(found, lines, source, index)
            found, lines = [], []
        found.append(item)
        lines.append(number)
        if item["type"] == records.MESSAGE:
            messages += 1
            if max_messages is not None and messages > max_messages:
                break
    yield from last.padding(source, up_to=None)
    index += 1
    yield from _motus_log(found, lines, source, index)


def _motus_log(
    found: list[dict[str, Any]], lines: list[int], source: str, index: int
) -> Iterator[Found]:
    if found and found[0]["type"] != records.SESSION_META:
        yield Problem(source, f"line {lines[0]}", "a Motus log starts with session_meta")
    elif found:
        yield MotusLog(found, lines, index)


class _LastLine:
    """Iterates the lines of a stream, without NUL padding, and remembers the last
    one (to explain a bad line) and which lines held NULs or were past the cap
    of a line (line -> what was skipped). A line with lone NULs and no run of
    padding is damaged: skipped whole."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.raw = b""
        self.padded: dict[int, str] = {}

    def __iter__(self) -> Iterator[bytes]:
        for number, raw in enumerate(capped_lines(self.stream), start=1):
            if isinstance(raw, Overlong):
                self.padded[number] = raw.why()
                raw = raw.after or b"\n"
            elif b"\x00" in raw:
                nuls = raw.count(b"\x00")
                if NUL_RUN.search(raw):
                    self.padded[number] = f"{nuls:,} NUL bytes (padding left by a crash) skipped"
                    raw = raw.replace(b"\x00", b"")
                else:
                    self.padded[number] = f"a damaged line ({nuls:,} NUL bytes in it) skipped"
                    raw = b"\n"
            self.raw = raw
            yield raw

    def padding(self, source: str, up_to: int | None) -> Iterator[Problem]:
        """A warning for each line with NULs up to line ``up_to`` (all: ``None``), once."""
        for number in [n for n in self.padded if up_to is None or n <= up_to]:
            yield Problem(source, f"line {number}", self.padded.pop(number), warning=True)


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse_messages_jsonl(stream: BinaryIO, source: str, stem: str) -> Iterator[Found]:
    """One session per line; a bad line (or one past the cap of a line) is
    reported and the others still import."""
    for number, raw in enumerate(capped_lines(stream), start=1):
        location = f"line {number}"
        if isinstance(raw, Overlong):
            yield Problem(source, location, raw.why())
            continue
        if not raw.strip():
            continue
        try:
            item = loads(raw)
        except orjson.JSONDecodeError as error:
            why = f"invalid JSON: {error.msg}" if _is_utf8(raw) else NOT_UTF8
            yield Problem(source, location, why)
            continue
        messages = item.get("messages") if isinstance(item, dict) else None
        if not isinstance(messages, list):
            yield Problem(source, location, "expected an object with a 'messages' list")
            continue
        yield Transcript(number, location, _title(item, stem, number), messages)


def parse_json(stream: BinaryIO, source: str, stem: str) -> Iterator[Found]:
    """A list of messages, an object with messages, or a list of such objects (runs).

    A list of messages and the messages of an object are streamed; each run of
    a list of runs is read whole (it is one session).
    """
    start = stream.tell()
    head = stream.read(4096).lstrip()
    stream.seek(start)
    if nesting_too_deep(stream):
        yield Problem(source, "", TOO_DEEP)
    elif has_lone_surrogate_escape(stream):
        # ijson cannot decode such an escape: read the document whole (the
        # upload limit bounds it) with the parser that turns them into U+FFFD.
        yield from _json_document(stream, source, stem)
    elif head.startswith(b"["):
        yield from _json_list(stream, source, stem)
    elif head.startswith(b"{"):
        yield from _json_object(stream, source, stem, start)
    else:
        yield Problem(source, "", EXPECTED)


# The most a JSON document with an escaped lone surrogate may hold: it is read
# whole (ijson cannot stream it), and the standard library's parse of it costs
# about 15 times its size.
WHOLE_DOCUMENT_MAX_BYTES = 32 * 1024 * 1024


def _json_document(stream: BinaryIO, source: str, stem: str) -> Iterator[Found]:
    data = stream.read(WHOLE_DOCUMENT_MAX_BYTES + 1)
    if len(data) > WHOLE_DOCUMENT_MAX_BYTES:
        yield Problem(
            source,
            "",
            f"the file holds an escaped lone surrogate (half an emoji, say), so it is read "
            f"whole, and it is larger than {WHOLE_DOCUMENT_MAX_BYTES:,} bytes: save it as "
            "JSONL, or replace the escape",
        )
        return
    try:
        document = loads(data)
    except orjson.JSONDecodeError as error:
        yield Problem(source, f"line {error.lineno} column {error.colno}", _json_error(error))
        return
    if isinstance(document, list) and document and _looks_like_message(document[0]):
        yield Transcript(1, "", stem, document)
    elif isinstance(document, list) and document:
        yield from _runs(document, source, stem)
    elif isinstance(document, dict) and (messages := _messages_of(document)) is not None:
        yield Transcript(1, "", _title(document, stem, None), messages)
    else:
        yield Problem(source, "", EXPECTED)


def _json_list(stream: BinaryIO, source: str, stem: str) -> Iterator[Found]:
    items = _items(stream, "item", stream.tell())
    try:
        first = next(items, None)
    except Refused as error:
        yield Problem(source, error.location, str(error))
        return
    if first is None:
        yield Problem(source, "", EXPECTED)
    elif _looks_like_message(first):
        yield Transcript(1, "", stem, _chain(first, items))
    else:
        yield from _runs(_chain(first, items), source, stem)


def _runs(runs: Iterable[Any], source: str, stem: str) -> Iterator[Found]:
    index = 0
    try:
        for index, run in enumerate(runs, start=1):
            location = f"record {index}"
            messages = _messages_of(run) if isinstance(run, dict) else None
            if messages is None:
                yield Problem(source, location, EXPECTED)
            else:
                yield Transcript(index, location, _title(run, stem, index), messages)
    except Refused as error:
        yield Problem(source, error.location or f"record {index + 1}", str(error))


def _json_object(stream: BinaryIO, source: str, stem: str, start: int) -> Iterator[Found]:
    """Two passes: the object's top-level keys and short values, then its messages, streamed."""
    keys: list[str] = []
    scalars: dict[str, Any] = {}
    try:
        for prefix, event, value in ijson.parse(stream, use_float=True, buf_size=READ_BYTES):
            if prefix == "" and event == "map_key":
                keys.append(value)
            elif prefix in _TITLE_KEYS and event in ("string", "number", "integer"):
                scalars[prefix] = value
    except ijson.JSONError as error:
        location, message = _locate(stream, start)
        yield Problem(source, location, message or _json_error(error))
        return
    key = next((k for k in MESSAGE_KEYS if k in keys), None)
    if key is None:
        yield Problem(source, "", EXPECTED)
        return
    stream.seek(start)
    messages = _items(stream, f"{key}.item", start)
    yield Transcript(1, "", _title(scalars, stem, None), messages)


def _items(stream: BinaryIO, prefix: str, start: int) -> Iterator[Any]:
    """The values at ``prefix``, one at a time; raises ``Refused`` where the JSON breaks."""
    try:
        yield from ijson.items(stream, prefix, use_float=True, buf_size=READ_BYTES)
    except ijson.JSONError as error:
        location, message = _locate(stream, start)
        raise Refused(location, message or _json_error(error)) from None
    except UnicodeDecodeError:
        raise Refused("", NOT_UTF8) from None


_LOCATE_MAX_BYTES = 32 * 1024 * 1024


def _locate(stream: BinaryIO, start: int) -> tuple[str, str | None]:
    """Line and column of a JSON error, read again with orjson, which says them.

    Only for files up to ``_LOCATE_MAX_BYTES`` (every upload): past that the
    problem says what broke without where.
    """
    stream.seek(start)
    data = stream.read(_LOCATE_MAX_BYTES + 1)
    if len(data) > _LOCATE_MAX_BYTES:
        return "", None
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if not _is_utf8(data):
            return "", NOT_UTF8
        return f"line {error.lineno} column {error.colno}", f"invalid JSON: {error.msg}"
    return "", None


def _json_error(error: Exception) -> str:
    text = str(error)
    if "invalid bytes in UTF8" in text or "invalid UTF-8" in text:
        return NOT_UTF8
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return f"invalid JSON: {first}"


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


EXPECTED = (
    "expected chat messages: a list of messages, an object with a "
    + ", ".join(repr(k) for k in MESSAGE_KEYS)
    + " list, or a list of such objects"
)


def _looks_like_message(item: object) -> bool:
    return isinstance(item, dict) and "role" in item


def _messages_of(run: dict[str, Any]) -> list[Any] | None:
    for key in MESSAGE_KEYS:
        if isinstance(run.get(key), list):
            return list(run[key])
    return None


def _title(run: dict[str, Any], stem: str, index: int | None) -> str:
    """The run's own title, else the file name with task and trial (tau-bench) or index."""
    title = run.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()[:200]
    parts = [stem[:120]]
    parts += [f"{key.replace('_id', '')} {run[key]}" for key in ("task_id", "trial") if key in run]
    if len(parts) == 1 and index is not None:
        parts.append(f"#{index}")
    return " · ".join(parts)[:200]
