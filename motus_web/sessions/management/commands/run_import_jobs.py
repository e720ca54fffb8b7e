import time
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand
from django.db import connection
from django.utils.translation import ngettext

from motus_web.sessions import jobs


class Command(BaseCommand):
    help = (
        "Run the import jobs queued by uploads on the Import page, oldest first, then exit "
        "(or, with --forever, keep looking). For a separate worker: set MOTUS_IMPORT_THREAD=0 "
        "so that the web processes leave the jobs to it. Jobs left running by a runner that "
        "is gone are marked interrupted first."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--forever", action="store_true", help="keep looking for queued jobs until stopped"
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=2.0,
            metavar="SECONDS",
            help="with --forever, how long to wait when no job is queued (default %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        while True:
            ran = jobs.run_queued()
            if ran:
                self.stdout.write(ngettext("%d import job run", "%d import jobs run", ran) % ran)
            if not options["forever"]:
                return
            connection.close()  # none held while waiting
            time.sleep(options["interval"])
