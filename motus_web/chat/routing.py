"""Websocket routes of the live chat."""

from django.urls import URLPattern, path

from .consumers import SessionConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/sessions/<str:public_id>/", SessionConsumer.as_asgi()),
]
