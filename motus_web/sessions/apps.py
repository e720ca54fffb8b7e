from django.apps import AppConfig

# The label this app had when storage and UI were one app. Its tables keep the
# names made under it (each model's ``db_table``), and a database made then
# records its migrations and content types under it: ``migrate`` (this app's
# override) and migration 0015 move those records to ``SessionsConfig.label``.
FORMER_LABEL = "dashboard"


class SessionsConfig(AppConfig):
    name = "motus_web.sessions"
    # Not "sessions": django.contrib.sessions has that label (and its own
    # migration 0001_initial under it).
    label = "motus_sessions"
    verbose_name = "Sessions"
    default_auto_field = "django.db.models.BigAutoField"
