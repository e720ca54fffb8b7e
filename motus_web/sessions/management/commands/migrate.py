"""``migrate``, first moving this app's migration history from its former label.

A database made while the app was labelled ``"dashboard"`` records its applied
migrations under that label; Django plans from those records before any
migration or ``pre_migrate`` receiver runs, so without this it would try to
create the existing tables again. The move is one ``UPDATE`` of
``django_migrations``: a crash leaves the rows either all moved or none, and
running ``migrate`` again finishes the job. Rows already under the new label
are left as they are (the former label's duplicates stay, unused).
"""

from typing import Any

from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder

from motus_web.sessions.apps import FORMER_LABEL, SessionsConfig


def move_migration_history(database: str) -> int:
    """Record ``FORMER_LABEL``'s applied migrations under the app's label.

    Returns how many rows moved (0 on a new database or one already moved).
    """
    recorder = MigrationRecorder(connections[database])
    if not recorder.has_table():
        return 0
    rows = recorder.migration_qs
    moved = rows.filter(app=SessionsConfig.label).values("name")
    return rows.filter(app=FORMER_LABEL).exclude(name__in=moved).update(app=SessionsConfig.label)


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " Moves this app's history from its former label first."

    def handle(self, *args: Any, **options: Any) -> None:
        moved = move_migration_history(options["database"])
        if moved and options["verbosity"] >= 1:
            self.stdout.write(
                f"Moved {moved} applied migrations from app {FORMER_LABEL!r} "
                f"to {SessionsConfig.label!r}."
            )
        super().handle(*args, **options)
