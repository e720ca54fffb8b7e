import secrets
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from motus_web.env import env_str

USERNAME = "admin"


class Command(BaseCommand):
    help = (
        "Create the local superuser 'admin' if it does not exist (used by `make run`). "
        "Its password is MOTUS_ADMIN_PASSWORD, or generated, printed once and kept in var/; "
        "with --url, says last where the dashboard is and the password to log in with."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--url",
            help="say last where the dashboard is and how to log in (make run's closing lines)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        password_file = settings.VAR_DIR / "admin_password"
        users = get_user_model().objects
        say = self.stdout.write if options["verbosity"] >= 1 else (lambda _: None)
        if users.filter(username=USERNAME).exists():
            where = password_file if password_file.exists() else "MOTUS_ADMIN_PASSWORD"
            say(f"Log in as {USERNAME!r}, password from {where}.")
        elif password := env_str("MOTUS_ADMIN_PASSWORD"):
            users.create_superuser(username=USERNAME, email="", password=password)
            say(f"Created {USERNAME!r} with the password in MOTUS_ADMIN_PASSWORD.")
        else:
            password = secrets.token_urlsafe(12)
            password_file.parent.mkdir(parents=True, exist_ok=True)
            password_file.touch(mode=0o600)
            password_file.write_text(password + "\n")
            users.create_superuser(username=USERNAME, email="", password=password)
            say(
                f"Created {USERNAME!r} with password {password} "
                f"(printed once; kept in {password_file})."
            )
        if options["url"]:
            self.stdout.write(f"Motus Memory is at {options['url']}")
            self.stdout.write(f"Log in as {USERNAME!r} with {self._password_line(password_file)}")

    @staticmethod
    def _password_line(password_file: Path) -> str:
        # A generated password is kept in var/ (mode 0600): shown to the one who
        # runs the server on this machine, as `make run`'s last line.
        if password_file.exists():
            return f"password {password_file.read_text().strip()} (kept in {password_file})"
        return "the password in MOTUS_ADMIN_PASSWORD"
