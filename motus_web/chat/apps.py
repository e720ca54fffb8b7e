from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "motus_web.chat"
    label = "chat"
    verbose_name = "Live chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import access  # noqa: F401  (connects the revocation receivers)
