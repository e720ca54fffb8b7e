"""Websocket routes. The live chat, a later issue, adds its consumer here."""

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
