from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The dashboard's pages: views, forms and template tags (no models)."""

    name = "motus_web.dashboard"
    label = "dashboard_ui"  # its tables are "dashboard_*", made by motus_web.sessions
