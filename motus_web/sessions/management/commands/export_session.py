import os
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any, TextIO

import orjson
from django.core.management.base import BaseCommand, CommandError

from memory import SessionNotFoundError
from motus_web.sessions.log_store import DatabaseLogStore


class Command(BaseCommand):
    help = "Write a session as a Motus JSONL conversation log (what import_sessions reads back)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("session_id", metavar="ID", help="the session's public id")
        parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="default: stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            found = DatabaseLogStore().read(options["session_id"])
        except SessionNotFoundError as error:
            raise CommandError(str(error)) from None
        # The same serialisation as JSONLLogStore: one orjson object per line.
        lines = (orjson.dumps(record) + b"\n" for record in found)
        output: Path | None = options["output"]
        if output is None:
            try:
                for line in lines:
                    self.stdout.write(line.decode(), ending="")
                self.stdout.flush()
            except BrokenPipeError:
                self._reader_went_away()
            return
        try:
            with output.open("wb") as out:
                out.writelines(lines)
        except OSError as error:
            raise CommandError(f"cannot write {output}: {error.strerror or error}") from None

    def _reader_went_away(self) -> None:
        """``export_session ID | head``: the reader has what it wanted; stop quietly.

        Python flushes stdout again at exit, which would raise once more: point
        the descriptor at /dev/null first (as the signal module's docs advise).
        """
        stdout: TextIO = sys.stdout
        if self.stdout._out is stdout:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
            os.close(devnull)
