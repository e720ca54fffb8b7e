from django.urls import path

from . import views

app_name = "chat"
urlpatterns = [
    path("chat/new/", views.chat_new, name="new"),
    path("chat/new/check/", views.chat_new_check, name="new_check"),
    path("sessions/<str:public_id>/chat/", views.chat, name="chat"),
    path("sessions/<str:public_id>/replay/", views.replay_new, name="replay"),
]
