import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from motus_web.sessions.importers import ImportOptions
from motus_web.sessions.importers.sync import ANY_PATTERNS, TOOL_PATTERNS, Folder, Synced, sync


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
        self.said_none_found = False
        while True:
            self._once(folders, import_options)
            if not options["watch"]:
                return
            try:
                time.sleep(options["interval"])
            except KeyboardInterrupt:
                return

    def _once(self, folders: list[Folder], import_options: ImportOptions) -> None:
        read = unchanged = 0
        for synced in sync(folders, import_options):
            if synced.report is None:
                unchanged += 1
                if self.verbosity >= 2:
                    self.stdout.write(f"{synced.path}: not changed since the last sync")
                continue
            read += 1
            self.stdout.write(_line(synced))
            for warning in synced.report.warnings:
                self.stderr.write(f"warning: {warning}")
            for problem in synced.report.problems:
                self.stderr.write(str(problem))
        if not read and not unchanged:
            # Said once, not at every interval of --watch: nothing to sync is not news twice.
            if self.verbosity >= 1 and not self.said_none_found:
                where = "; ".join(f"{f.path} ({', '.join(f.patterns)})" for f in folders)
                self.stdout.write(f"no session files found in {where or 'no folder'}")
                self.said_none_found = True
            return
        if self.verbosity >= 1 and (read or self.verbosity >= 2):
            self.stdout.write(f"synced: {read} read, {unchanged} not changed")


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
