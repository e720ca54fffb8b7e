from django.urls import path

from . import views

app_name = "dashboard"
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("sessions/<str:public_id>/", views.session_detail, name="session_detail"),
    path(
        "sessions/<str:public_id>/messages/<int:seq>/",
        views.message_detail,
        name="message_detail",
    ),
    path("import/", views.import_form, name="import_form"),
    path("import/upload/", views.import_upload, name="import_upload"),
]
