from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import ngettext

from memory import get_model_limits
from motus_web.sessions.importers import ImportOptions, import_path
from motus_web.sessions.importers.sync import ANY_PATTERNS, Folder, Passed, session_files
from motus_web.sessions.limits import validate_replay_threshold


class Command(BaseCommand):
    help = (
        "Import conversation files: Claude Code, Codex CLI, ChatGPT, Claude.ai, Gemini CLI and "
        "Anthropic Messages files, Motus JSONL logs, OpenAI chat messages as JSON or JSONL "
        "(gzip-compressed or not). Importing a file again adds nothing. No cap on the number "
        "of messages: use it for files too big for the Import page. A folder given is read "
        "whole: every file in it of a format read here (links leading out of it are not "
        "followed, pipes and devices not opened)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
        parser.add_argument("--owner", metavar="USERNAME", help="default: no owner, staff only")
        parser.add_argument(
            "--replay",
            action="store_true",
            help="compact chat transcripts as they are imported (offline summariser)",
        )
        parser.add_argument(
            "--threshold",
            type=int,
            default=settings.MOTUS_REPLAY_THRESHOLD,
            metavar="N",
            help="token threshold of --replay (default %(default)s)",
        )
        parser.add_argument(
            "--model",
            metavar="NAME",
            help="model whose tokenizer counts tokens and whose window sets the threshold "
            "of sessions whose file names no model (a Motus log is recounted with it) "
            f"(default: the file's own, or {settings.MOTUS_MODEL_NAME})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            validate_replay_threshold(options["threshold"])
        except ValidationError as error:
            raise CommandError(f"--threshold: {error.messages[0]}") from None
        model = options["model"]
        if model is not None and not get_model_limits(model).known:
            raise CommandError(
                f"--model: {model!r} is not a model this version knows the window and "
                "tokenizer of (a known name, with or without a date: gpt-4o, "
                "claude-sonnet-4-5, gemini-2.5-pro...)"
            )
        owner = None
        if options["owner"]:
            try:
                owner = get_user_model().objects.get_by_natural_key(options["owner"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['owner']!r}") from None
        import_options = ImportOptions(
            owner=owner,
            replay_threshold=options["threshold"] if options["replay"] else None,
            model_name=options["model"],
        )
        # Every path is checked before anything is imported: a typo in the last
        # one must not leave the first ones imported and the command failed.
        unreadable = [f"{path}: {why}" for path in options["paths"] if (why := _unreadable(path))]
        if unreadable:
            raise CommandError("; ".join(unreadable))
        files: list[Path] = []
        for given in options["paths"]:
            if not given.is_dir():
                files.append(given)
                continue
            for found in session_files([Folder(given, ANY_PATTERNS)]):
                if isinstance(found, Passed):
                    self.stderr.write(f"skipped {found}")
                else:
                    files.append(found)
        failed = 0
        for path in files:
            report = import_path(path, import_options)
            problems = len(report.problems)
            self.stdout.write(
                f"{path}: {len(report.imported)} imported, {len(report.updated)} updated, "
                f"{len(report.skipped)} already there, "
                + ngettext("%d problem", "%d problems", problems)
                % problems
            )
            if options["verbosity"] >= 1:  # `-v 0`: the line per path only (`make run`)
                for outcome in report.outcomes:
                    self.stdout.write(f"{path}: {outcome} ({outcome.public_id})")
            for original, public_id in report.renamed.items():
                self.stdout.write(
                    f"{path}: session {original} imported as {public_id} "
                    "(its id is taken; kept as the original id)"
                )
            for warning in report.warnings:
                self.stderr.write(f"warning: {warning}")
            for problem in report.problems:
                self.stderr.write(str(problem))
            failed += len(report.problems)
        if failed:
            raise CommandError(
                ngettext(
                    "%d problem; the session it concerns was not imported",
                    "%d problems; the sessions they concern were not imported",
                    failed,
                )
                % failed
            )


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be imported, or ``None``."""
    if path.is_dir():
        return None  # its files are found (``session_files``) and imported
    if not path.exists():
        return "no such file"
    if not path.is_file():
        return "not a regular file (a pipe or a device cannot be read twice; save it to a file)"
    return None
