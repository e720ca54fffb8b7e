from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "motus_web.dashboard"
    label = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"
