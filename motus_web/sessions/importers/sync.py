"""Keep imported sessions in step with the folders agents write (``manage.py sync_sessions``).

Each session file found is imported with ``import_path`` unless its size and
modification time (with its subagent transcripts') are those remembered from
the last sync (``SyncedFile``). A file that changed is read again whole and the
import appends only what is new (``identity``: updates in place), so a sync is
idempotent and a file being written is picked up where it stopped: a torn last
line is skipped with a warning, and the next sync appends it once complete.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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
    """One file of a sync: ``report`` is ``None`` when it had not changed."""

    path: Path
    report: ImportReport | None


def session_files(folders: Iterable[Folder]) -> Iterator[Path]:
    """The session files under ``folders``, each once, in name order per folder.

    Claude Code subagent transcripts are left out: they are read with their
    session's file (``subagent_files``).
    """
    seen: set[Path] = set()
    for folder in folders:
        if not folder.path.is_dir():
            continue
        found = {p for pattern in folder.patterns for p in folder.path.glob(pattern)}
        for path in sorted(found):
            if path.is_file() and "subagents" not in path.parts and path not in seen:
                seen.add(path)
                yield path


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

    The file's signature is remembered after its import, problems or not, so
    a file that cannot be imported is tried again only once it changes. A crash
    between the import and that write leaves the signature as it was: the next
    sync reads the file again and finds nothing new (updates in place).
    """
    owner = options.owner
    known = SyncedFile.objects.filter(owner=owner.pk if owner else None, path=str(path))
    size, mtime = signature(path)
    if known.filter(size=size, mtime_ns=mtime).exists():
        return Synced(path, None)
    report = import_path(path, options)
    if not report.cancelled:
        with transaction.atomic():
            SyncedFile.objects.update_or_create(
                owner=owner,  # type: ignore[misc]
                path=str(path),
                defaults={"size": size, "mtime_ns": mtime, "synced_at": timezone.now()},
            )
    return Synced(path, report)


def sync(folders: Iterable[Folder], options: ImportOptions) -> Iterator[Synced]:
    """``sync_file`` each file of ``session_files(folders)``, in turn."""
    for path in session_files(folders):
        try:
            yield sync_file(path, options)
        except FileNotFoundError:
            continue  # removed while the folder was read
