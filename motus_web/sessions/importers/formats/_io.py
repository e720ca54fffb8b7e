"""Reading agent files: gzip, byte order marks, and JSONL one line at a time.

Real exports come gzip-compressed, with a UTF-8 byte order mark (Windows editors),
CRLF line ends, blank lines and no final newline; all of these read as the plain
file would. JSONL is read line by line so a large file never sits in memory whole,
and no line is held past ``LINE_MAX_BYTES`` (``capped_lines``): a longer one (a
crash's gigabytes of NUL padding, a runaway tool output) is skipped in chunks and
reported with its byte offset, and the lines around it are read.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

import orjson

from .model import FormatProblem

HEAD_SIZE = 64 * 1024
MAX_PROBLEMS = 20  # per file: a file of garbage gets a few problems and a count, not one per line
BOM = b"\xef\xbb\xbf"
GZIP_MAGIC = b"\x1f\x8b"
_UTF16_32_BOMS = (b"\xff\xfe", b"\xfe\xff")
# A run of NUL bytes this long is a crash's padding (a file extended before its
# data reached the disk), not text in another encoding, which has lone NULs.
NUL_RUN = re.compile(rb"\x00{16,}")
_NULS = re.compile(rb"\x00+")
# The most one JSONL line may hold (bytes): parsed, a line costs several times
# its size, so this bounds what one line costs. Claude Code writes a pasted
# image as one base64 line of a few MB; no tool writes a line near this.
LINE_MAX_BYTES = 32 * 1024 * 1024
_SKIP_BYTES = 1024 * 1024  # what is read at a time while a line past the cap is skipped


@dataclass(frozen=True, slots=True)
class Overlong:
    """A line longer than the cap, skipped: where it starts in the plain text
    (``offset``, bytes), how long it is (``size``, bytes, newline included), how
    many of them are NUL bytes, and ``after``: the text after its last NUL (a
    line written after a crash's padding), read as the line in its place."""

    offset: int
    size: int
    nuls: int
    cap: int
    after: bytes = b""

    def why(self) -> str:
        padding = f", {self.nuls:,} of them NUL bytes (padding left by a crash)"
        padding = padding if self.nuls else ""
        return (
            f"{self.size:,} bytes from byte {self.offset:,} with no line end within the "
            f"{self.cap:,}-byte cap of a line{padding}: skipped"
        )


def capped_lines(stream: BinaryIO, cap: int | None = None) -> Iterator[bytes | Overlong]:
    """Each line of ``stream`` (newline included), one item per line; a line past
    ``cap`` bytes (default ``LINE_MAX_BYTES``) is an ``Overlong``, read past in
    chunks of ``_SKIP_BYTES`` and never held whole. Memory: at most ``cap`` plus
    one chunk, whatever the file holds."""
    cap = LINE_MAX_BYTES if cap is None else cap
    offset = 0
    while line := stream.readline(cap + 1):
        if len(line) <= cap or line.endswith(b"\n"):
            offset += len(line)
            yield line
            continue
        size, nuls, after = len(line), line.count(b"\x00"), _after_nuls(line, b"")
        while not line.endswith(b"\n") and (line := stream.readline(_SKIP_BYTES)):
            size += len(line)
            nuls += line.count(b"\x00")
            after = _after_nuls(line, after)
            after = after if after is None or len(after) <= cap else None
        yield Overlong(offset, size, nuls, cap, after if nuls and after else b"")
        offset += size


def _after_nuls(chunk: bytes, before: bytes | None) -> bytes | None:
    """The text after the last NUL so far, ``chunk`` read after ``before``;
    ``None`` once it has outgrown the cap (it is skipped with the line)."""
    if b"\x00" in chunk:
        return chunk[chunk.rindex(b"\x00") + 1 :]
    return None if before is None else before + chunk


def plain_head(head: bytes) -> bytes:
    """``head`` decompressed as far as it goes (gzip) and without a UTF-8 BOM."""
    if head.startswith(GZIP_MAGIC):
        try:
            # Bounded: a small compressed head may stand for gigabytes.
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 16 * HEAD_SIZE)
        except zlib.error:
            return b""
    # Padding is skipped line by line when the file is read (json_lines).
    return NUL_RUN.sub(b"", head).removeprefix(BOM)


def open_plain(stream: BinaryIO) -> BinaryIO:
    """``stream`` (binary, seekable), decompressed when it is gzip, rewound.

    A gzip stream that breaks (cut short, a bad checksum) reads to its break,
    then ends; ``cut_short`` says why it ended there."""
    magic = stream.read(2)
    stream.seek(0)
    if magic == GZIP_MAGIC:
        return cast(BinaryIO, io.BufferedReader(_GzipToItsBreak(stream)))
    return stream


def cut_short(plain: BinaryIO) -> str | None:
    """Why ``plain`` (from ``open_plain`` or ``bounded_plain``) ended before its
    file did, as a warning; ``None`` when it did not (or is no gzip stream)."""
    inner = plain.inner if isinstance(plain, Bounded) else plain
    raw = getattr(inner, "raw", None)
    if not isinstance(raw, _GzipToItsBreak) or raw.cut is None:
        return None
    return (
        f"the gzip stream breaks after {raw.good:,} bytes of text ({raw.cut}): "
        "what comes before was read, the rest of the file is lost"
    )


class _GzipToItsBreak(io.RawIOBase):
    """The plain bytes of a gzip stream up to where its compressed data breaks:
    a file cut short (a download or a copy that stopped) still holds all it
    decompresses to, and its lines are read like any file's (the last one, cut
    mid-line, is a torn line). ``cut`` says why it broke, ``good`` where."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self._gzip = gzip.GzipFile(fileobj=stream, mode="rb")
        self.cut: str | None = None
        self.good = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._gzip.read1(len(buffer))
        except (EOFError, zlib.error, gzip.BadGzipFile) as error:
            self.cut = str(error) or type(error).__name__
            self.good = max(self.good, self._gzip.tell())
            return 0
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._gzip.seek(offset, whence)

    def tell(self) -> int:
        return self._gzip.tell()


class PlainTooLarge(Exception):
    """Raised while reading a compressed file that expands past its bound (bytes)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the file expands past {limit:,} bytes when decompressed")
        self.limit = limit


class Bounded(io.BufferedIOBase):
    """A decompressed stream that raises ``PlainTooLarge`` past ``limit`` bytes.

    Counted where the bytes come out, before a caller holds them: no read or
    line is ever longer than what is left of the bound plus one byte, so a
    small gzip of gigabytes (or of one endless line) costs at most ``limit``.
    Rewinding starts the count again, as the bytes are read again.
    """

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        super().__init__()
        self.inner = inner
        self.limit = limit

    def _left(self) -> int:
        left = self.limit - self.inner.tell()
        if left < 0:
            raise PlainTooLarge(self.limit)
        return left

    def _checked(self, data: bytes) -> bytes:
        if self.inner.tell() > self.limit:
            raise PlainTooLarge(self.limit)
        return data

    def read(self, size: int | None = -1) -> bytes:
        left = self._left() + 1
        want = left if size is None or size < 0 else min(size, left)
        return self._checked(self.inner.read(want))

    def read1(self, size: int = -1) -> bytes:
        return self.read(size)

    def readline(self, size: int | None = -1) -> bytes:
        left = self._left() + 1
        want = left if size is None or size < 0 else min(size, left)
        return self._checked(self.inner.readline(want))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.inner.seek(offset, whence)

    def tell(self) -> int:
        return self.inner.tell()


def bounded_plain(stream: BinaryIO, limit: int | None) -> BinaryIO:
    """``stream`` decompressed (when gzip) and bounded to ``limit`` plain bytes."""
    plain = open_plain(stream)
    if limit is None or plain is stream:
        return plain  # a plain file's size is the upload's, bounded already
    return cast(BinaryIO, Bounded(plain, limit))


def encoding_problem(head: bytes) -> str | None:
    """Why ``head`` (decompressed) is not UTF-8 text, or ``None`` if it may be."""
    if head.startswith(b"\xff\xfe\x00\x00") or head.startswith(b"\x00\x00\xfe\xff"):
        return "the file is UTF-32 text: save it as UTF-8"
    if head.startswith(_UTF16_32_BOMS):
        return "the file is UTF-16 text: save it as UTF-8"
    if b"\x00" in head and _binary(head):
        return "the file is binary, not UTF-8 text"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        # The head may end inside a multi-byte character; only an earlier error counts.
        if error.start < len(head) - 3:
            return f"the file is not UTF-8 text (byte {error.start + 1})"
    return None


# Control bytes that text never holds (tab, line ends, form feed and escape aside).
_CONTROL = re.compile(rb"[\x01-\x08\x0e-\x1a\x1c-\x1f]")


def _binary(head: bytes) -> bool:
    """Whether NUL bytes in ``head`` make it binary: with other control bytes
    (a binary format's header), or on most of its lines (UTF-16 without a BOM).
    A few on a line or two of text are a damaged line, skipped when read."""
    if _CONTROL.search(head):
        return True
    lines = [line for line in head.splitlines() if line.strip()]
    return 2 * sum(1 for line in lines if b"\x00" in line) > len(lines)


def loads(data: bytes) -> Any:
    """Parse JSON; raises ``orjson.JSONDecodeError``.

    orjson refuses escaped lone surrogates (``"\\ud83d"``: an emoji cut in half by
    a model or a terminal), which real transcripts hold; the standard library
    reads them, and the importer's ingest decides what to do with them.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        try:
            return json.loads(data)
        except ValueError:
            raise error from None


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for problems that echo a bad value."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_lines(stream: BinaryIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Each non-blank line as ``(line number, object)``, or ``(number, why)`` if unreadable.

    A line that does not parse says why, and says it is torn when it is the last
    line and has no newline (a writer stopped mid-line). A line past the cap
    says so (``capped_lines``). NUL bytes (the padding
    a crash leaves where data never reached the disk) are skipped with a
    ``why`` that counts them; what they cut in two is read as two lines, so
    the line written after the crash is kept and the cut one reported.
    """
    for number, raw in enumerate(capped_lines(stream), start=1):
        if isinstance(raw, Overlong):
            yield number, raw.why()
            if raw.after.strip():
                yield number, _item(raw.after)
            continue
        line = raw.removeprefix(BOM) if number == 1 else raw
        if not line.strip():
            continue
        if b"\x00" not in line:
            yield number, _item(line)
            continue
        nuls = line.count(b"\x00")
        if not NUL_RUN.search(line):
            # Lone NULs in a line: damage, not a crash's padding around a good line.
            yield number, f"a damaged line ({nuls:,} NUL bytes in it) skipped"
            continue
        yield number, f"{nuls:,} NUL bytes (padding left by a crash) skipped"
        for piece in _NULS.split(line):
            if piece.strip():
                yield number, _item(piece)


def _item(line: bytes) -> dict[str, Any] | str:
    try:
        item = loads(line)
    except orjson.JSONDecodeError as error:
        return _why(line, error)
    if not isinstance(item, dict):
        return f"expected a JSON object, got {kind(item)}"
    return item


def _why(line: bytes, error: orjson.JSONDecodeError) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    torn = " (a torn last line: the file ends mid-line)" if not line.endswith(b"\n") else ""
    return f"invalid JSON: {error.msg} at column {error.colno}{torn}"


def kind(value: object) -> str:
    """How a problem names the JSON type it found."""
    names = {"dict": "an object", "list": "a list", "str": "a string", "NoneType": "null"}
    name = type(value).__name__
    return names.get(name, name)


def capped(problems: list[FormatProblem], source: str) -> list[FormatProblem]:
    """The first ``MAX_PROBLEMS`` problems, and one that counts the rest."""
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = len(problems) - MAX_PROBLEMS
    warning = all(problem.warning for problem in problems)
    what = "damaged lines skipped" if warning else "problems"
    return [
        *problems[:MAX_PROBLEMS],
        FormatProblem(source, "", f"and {more} more {what}", warning=warning),
    ]
