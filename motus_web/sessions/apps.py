from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "motus_web.sessions"
    # The tables and migrations were made under this label when storage and UI
    # were one app; keeping it keeps every table name and migration as it is.
    label = "dashboard"
    verbose_name = "Sessions"
    default_auto_field = "django.db.models.BigAutoField"
