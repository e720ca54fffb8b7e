from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from .favicon import favicon
from .health import healthz

urlpatterns = [
    path("favicon.ico", favicon),
    path("healthz", healthz, name="healthz"),
    path("", include("motus_web.dashboard.urls")),
    path("", include("motus_web.chat.urls")),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]

# An unreadable upload (a 1,000-character file name) gets the import page with its reason.
handler400 = "motus_web.dashboard.views.bad_request"
handler403 = "motus_web.dashboard.errors.forbidden"
handler404 = "motus_web.dashboard.errors.not_found"
