"""Keep imported sessions in step with the folders agents write (``manage.py sync_sessions``).

Each session file found is imported with ``import_path`` unless its size and
modification time (with its subagent transcripts') are those remembered from
the last sync (``SyncedFile``). A file that changed is read again whole and the
import appends only what is new (``identity``: updates in place), so a sync is
idempotent and a file being written is picked up where it stopped: a torn last
line is skipped with a warning, and the next sync appends it once complete.

Reading stays inside the folders named (``session_files``): a symlinked
sub-folder inside them is followed once, a link that leads outside every one of
them is not followed, and a FIFO, a device or a socket is never opened; each
is listed (``Passed``) with the reason.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from ..models import SyncedFile
from . import ImportOptions, ImportReport, import_path
from .formats.claude_code import subagent_files

# Where each tool keeps its session files, under its folder (settings.MOTUS_SYNC_FOLDERS).
TOOL_PATTERNS: dict[str, tuple[str, ...]] = {
    "claude-code": ("*/*.jsonl",),  # <project>/<session>.jsonl; subagents come with it
    "codex": ("**/rollout-*.jsonl", "**/rollout-*.jsonl.gz"),  # YYYY/MM/DD/rollout-*.jsonl
    "gemini-cli": ("*/chats/session-*.json", "*/chats/session-*.jsonl"),
}
# A folder given by hand: every file of a format the importer reads, by content.
ANY_PATTERNS = ("**/*.jsonl", "**/*.json", "**/*.jsonl.gz", "**/*.json.gz", "**/*.traj")


@dataclass(frozen=True, slots=True)
class Folder:
    path: Path
    patterns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Synced:
    """One file of a sync: ``report`` is ``None`` when it was not read: it had
    not changed, or it ``shrank`` (bytes before, bytes now) since the last sync."""

    path: Path
    report: ImportReport | None
    shrank: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Passed:
    """A file or link under a folder that was not read, and why."""

    path: Path
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


def session_files(folders: Iterable[Folder]) -> Iterator[Path | Passed]:
    """The session files under ``folders``, each once, in name order per folder,
    and each link or special file left unread (``Passed``).

    Links are followed when what they lead to lies inside one of ``folders``
    (resolved, so a folder that is itself a link counts as where it leads), a
    folder once whichever way it is reached (a loop ends there); a link that
    leads elsewhere, or nowhere, is passed. Only regular files are yielded.
    Claude Code subagent transcripts are left out: they are read with their
    session's file (``subagent_files``).
    """
    folders = [f for f in folders if f.path.is_dir()]
    roots = [f.path.resolve() for f in folders]
    seen: set[tuple[int, int]] = set()
    for folder in folders:
        yield from _walk(folder.path, (), folder.patterns, roots, seen)


def _walk(
    directory: Path,
    parts: tuple[str, ...],
    patterns: tuple[str, ...],
    roots: list[Path],
    seen: set[tuple[int, int]],
) -> Iterator[Path | Passed]:
    try:
        here = directory.stat()
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as error:
        yield Passed(directory, f"not read: {error.strerror or error}")
        return
    if (here.st_dev, here.st_ino) in seen:
        return  # reached again through a link: read once
    seen.add((here.st_dev, here.st_ino))
    for entry in entries:
        path, inner = Path(entry.path), (*parts, entry.name)
        wanted = any(_matches(inner, tuple(p.split("/"))) for p in patterns)
        if entry.is_symlink():
            target = path.resolve()
            if not target.exists():
                if wanted:
                    yield Passed(path, f"a link to {target}, which is not there: skipped")
                continue
            if not any(target.is_relative_to(root) for root in roots):
                if wanted or target.is_dir():
                    yield Passed(
                        path, f"a link to {target}, outside the folders synced: not followed"
                    )
                continue
        try:
            info = path.stat()
        except OSError:
            continue  # removed while the folder was read
        if stat.S_ISDIR(info.st_mode):
            if entry.name != "subagents" and _may_hold(inner, patterns):
                yield from _walk(path, inner, patterns, roots, seen)
        elif not wanted:
            continue
        elif not stat.S_ISREG(info.st_mode):
            yield Passed(path, "not a regular file (a FIFO, a device or a socket): not opened")
        elif (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            yield path


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Whether a relative path's ``parts`` match a glob ``pattern``'s (``**``: any depth)."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return _matches(parts, pattern[1:]) or (bool(parts) and _matches(parts[1:], pattern))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _matches(parts[1:], pattern[1:])


def _may_hold(parts: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    """Whether a folder at ``parts`` may hold a file a pattern matches (a prefix matches)."""
    return any(_prefix(parts, tuple(p.split("/"))[:-1]) for p in patterns)


def _prefix(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    if not parts:
        return True
    if not pattern:
        return False
    if pattern[0] == "**":
        return True
    return fnmatchcase(parts[0], pattern[0]) and _prefix(parts[1:], pattern[1:])


def signature(path: Path) -> tuple[int, int]:
    """Bytes and latest modification time (ns) of ``path`` and its subagent transcripts."""
    size, mtime = 0, 0
    for file in [path, *subagent_files(path)]:
        stat = file.stat()
        size += stat.st_size
        mtime = max(mtime, stat.st_mtime_ns)
    return size, mtime


def sync_file(path: Path, options: ImportOptions) -> Synced:
    """Import ``path`` if it changed since the last sync for ``options.owner``.

    A file smaller than at the last sync went backwards (cut back, or replaced
    by an older copy): it is not read, since all it holds is already imported
    or would branch off the sessions it was; it is read again once it grows
    past what it was. The file's signature is remembered after its import, problems or not, so
    a file that cannot be imported is tried again only once it changes. A crash
    between the import and that write leaves the signature as it was: the next
    sync reads the file again and finds nothing new (updates in place).
    """
    owner = options.owner
    known = SyncedFile.objects.filter(owner=owner.pk if owner else None, path=str(path))
    size, mtime = signature(path)
    if known.filter(size=size, mtime_ns=mtime).exists():
        return Synced(path, None)
    before = known.values_list("size", flat=True).first()
    if before is not None and size < before:
        return Synced(path, None, shrank=(before, size))
    report = import_path(path, options)
    if not report.cancelled:
        with transaction.atomic():
            SyncedFile.objects.update_or_create(
                owner=owner,  # type: ignore[misc]
                path=str(path),
                defaults={"size": size, "mtime_ns": mtime, "synced_at": timezone.now()},
            )
    return Synced(path, report)


def sync(folders: Iterable[Folder], options: ImportOptions) -> Iterator[Synced | Passed]:
    """``sync_file`` each file of ``session_files(folders)``, in turn; what is
    passed is yielded as it is met."""
    for path in session_files(folders):
        if isinstance(path, Passed):
            yield path
            continue
        try:
            yield sync_file(path, options)
        except FileNotFoundError:
            continue  # removed while the folder was read
