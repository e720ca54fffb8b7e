from argparse import ArgumentParser
from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError

from memory import SessionNotFoundError
from motus_web.dashboard.log_store import DatabaseLogStore


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
        if options["output"] is None:
            for line in lines:
                self.stdout.write(line.decode(), ending="")
        else:
            with options["output"].open("wb") as out:
                out.writelines(lines)
