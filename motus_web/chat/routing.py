"""Websocket routes of the live chat; any other path is closed ``4404``, not a 500."""

from django.urls import URLPattern, path, re_path

from .consumers import NoSuchSocket, SessionConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/sessions/<str:public_id>/", SessionConsumer.as_asgi()),
    re_path(r"", NoSuchSocket.as_asgi()),
]
