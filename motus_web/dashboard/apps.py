from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The dashboard's pages: views, forms and template tags (no models)."""

    name = "motus_web.dashboard"
    label = "dashboard_ui"  # "dashboard" belongs to motus_web.sessions (its tables)
