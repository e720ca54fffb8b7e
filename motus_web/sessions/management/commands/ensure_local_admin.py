import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from motus_web.env import env_str

USERNAME = "admin"


class Command(BaseCommand):
    help = (
        "Create the local superuser 'admin' if it does not exist (used by `make run`). "
        "Its password is MOTUS_ADMIN_PASSWORD, or generated, printed once and kept in var/."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        password_file = settings.VAR_DIR / "admin_password"
        users = get_user_model().objects
        if users.filter(username=USERNAME).exists():
            where = password_file if password_file.exists() else "MOTUS_ADMIN_PASSWORD"
            self.stdout.write(f"Log in as {USERNAME!r}, password from {where}.")
            return
        password = env_str("MOTUS_ADMIN_PASSWORD")
        if password:
            users.create_superuser(username=USERNAME, email="", password=password)
            self.stdout.write(f"Created {USERNAME!r} with the password in MOTUS_ADMIN_PASSWORD.")
            return
        password = secrets.token_urlsafe(12)
        password_file.parent.mkdir(parents=True, exist_ok=True)
        password_file.touch(mode=0o600)
        password_file.write_text(password + "\n")
        users.create_superuser(username=USERNAME, email="", password=password)
        self.stdout.write(
            f"Created {USERNAME!r} with password {password} "
            f"(printed once; kept in {password_file})."
        )
