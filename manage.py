#!/usr/bin/env python
import os
import sys


def _unreachable_database(error: Exception) -> str:
    """What to print when PostgreSQL could not be reached: where, and why (asked again
    directly, since the pool only says it timed out)."""
    import psycopg
    from django.db import connection

    params = connection.settings_dict
    where = "{HOST}:{PORT}/{NAME}".format(**params)
    try:
        psycopg.connect(
            host=params["HOST"],
            port=params["PORT"] or None,
            dbname=params["NAME"],
            user=params["USER"],
            password=params["PASSWORD"],
            connect_timeout=5,
        ).close()
        reason = str(error).strip().splitlines()[0]
    except psycopg.Error as direct:
        reason = " ".join(str(direct).split())
    return (
        f"Cannot reach the PostgreSQL database that DATABASE_URL names ({where}): {reason}\n"
        "Start PostgreSQL, or fix DATABASE_URL."
    )


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
    from django.core.management import execute_from_command_line
    from django.db import OperationalError, connection

    try:
        execute_from_command_line(sys.argv)
    except OperationalError as error:
        if connection.vendor != "postgresql" or connection.connection is not None:
            raise  # a query failed on a live connection: the trace helps
        sys.exit(_unreachable_database(error))
