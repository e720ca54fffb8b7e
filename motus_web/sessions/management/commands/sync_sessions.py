import time
from argparse import ArgumentParser
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from motus_web.sessions.importers import ImportOptions, ImportReport
from motus_web.sessions.importers.sync import (
    ANY_PATTERNS,
    TOOL_PATTERNS,
    Folder,
    Passed,
    Synced,
    sync,
)


class Command(BaseCommand):
    help = (
        "Import what is new in the folders agents write their sessions to: Claude Code "
        "(~/.claude/projects), Codex (~/.codex/sessions), Gemini CLI (~/.gemini/tmp), or the "
        "folders given. A file that did not change since the last sync is not read; one that "
        "grew appends only its new messages. Run it again at any time: it is idempotent."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--folder",
            action="append",
            type=Path,
            metavar="DIR",
            help="a folder to sync instead of the tools' own (repeatable); every file of a "
            "format the importer reads, found by content",
        )
        parser.add_argument("--owner", metavar="USERNAME", help="default: no owner, staff only")
        parser.add_argument(
            "--watch", action="store_true", help="keep running: sync again every --interval"
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=5.0,
            metavar="SECONDS",
            help="time between syncs with --watch (default %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = None
        if options["owner"]:
            try:
                owner = get_user_model().objects.get(username=options["owner"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['owner']!r}") from None
        if options["interval"] <= 0:
            raise CommandError("--interval: give a number of seconds above 0")
        if options["folder"]:
            missing = [str(f) for f in options["folder"] if not f.is_dir()]
            if missing:
                raise CommandError(f"not a folder: {', '.join(missing)}")
            folders = [Folder(path, ANY_PATTERNS) for path in options["folder"]]
        else:
            folders = [
                Folder(path, TOOL_PATTERNS[tool])
                for tool, path in settings.MOTUS_SYNC_FOLDERS.items()
            ]
        import_options = ImportOptions(owner=owner)
        self.verbosity = int(options["verbosity"])
        self.watching = bool(options["watch"])
        self.said_once = False
        while True:
            self._once(folders, import_options)
            if not options["watch"]:
                return
            try:
                time.sleep(options["interval"])
            except KeyboardInterrupt:
                return

    def _once(self, folders: list[Folder], import_options: ImportOptions) -> None:
        """Sync once; one line per file read or passed, then one that sums the run up
        (said at every run, and at a --watch pass when something was read)."""
        tally = _Tally()
        for synced in sync(folders, import_options):
            if isinstance(synced, Passed):
                tally.passed.append(synced.why)
                self.stderr.write(f"skipped {synced}")
                continue
            if synced.shrank is not None:
                tally.shrank += 1
                before, now = synced.shrank
                self.stdout.write(
                    f"{synced.path}: went back: {now:,} bytes, {before:,} at the last sync; "
                    "nothing imported (its sessions stay as they are)"
                )
                continue
            if synced.report is None:
                tally.unchanged += 1
                if self.verbosity >= 2:
                    self.stdout.write(f"{synced.path}: not changed since the last sync")
                continue
            tally.take(synced.report)
            self.stdout.write(_line(synced))
            for warning in synced.report.warnings:
                self.stderr.write(f"warning: {warning}")
            for problem in synced.report.problems:
                self.stderr.write(str(problem))
        if self.verbosity < 1 or (self.watching and not tally.read and self.said_once):
            return
        self.said_once = True
        if not tally.seen and not tally.passed:
            where = "; ".join(f"{f.path} ({', '.join(f.patterns)})" for f in folders)
            self.stdout.write(f"no session files found in {where or 'no folder'}")
            return
        self.stdout.write(str(tally))


@dataclass
class _Tally:
    """What one sync did, file by file."""

    new: int = 0
    grown: int = 0
    unchanged: int = 0
    shrank: int = 0
    refused: int = 0
    read: int = 0
    passed: list[str] = field(default_factory=list)

    @property
    def seen(self) -> int:
        return self.read + self.unchanged + self.shrank

    def take(self, report: ImportReport) -> None:
        self.read += 1
        kinds = {outcome.kind for outcome in report.outcomes}
        if kinds & {"new", "branched"}:
            self.new += 1
        elif "updated" in kinds:
            self.grown += 1
        elif report.problems:
            self.refused += 1
        else:
            self.unchanged += 1  # read again (its time changed), nothing new in it

    def __str__(self) -> str:
        reasons = Counter(_reason(why) for why in self.passed)
        skipped = f"{len(self.passed)} skipped"
        if reasons:
            skipped += " (" + ", ".join(f"{n} {why}" for why, n in reasons.items()) + ")"
        return (
            f"synced: {self.seen} files seen, {self.new} new, {self.grown} grown, "
            f"{self.unchanged} unchanged, {self.shrank} went back, {self.refused} refused, "
            f"{skipped}"
        )


def _reason(why: str) -> str:
    """A skip's reason without the path it names, to count alike ones together."""
    if "outside the folders" in why:
        return "links outside the folders"
    if "is not there" in why:
        return "broken links"
    if "not a regular file" in why:
        return "special files"
    return "unreadable folders"


def _line(synced: Synced) -> str:
    """One progress line: what the import did with each conversation of the file."""
    report = synced.report
    assert report is not None
    what = ", ".join(
        f"{o.kind} (+{o.added:,})" if o.kind in ("updated", "new", "branched") else o.kind
        for o in report.outcomes
    )
    if report.problems:
        what = f"{what}; " if what else ""
        what += f"{len(report.problems)} problem{'s' if len(report.problems) != 1 else ''}"
    return f"{synced.path}: {what or 'nothing to import'}"
