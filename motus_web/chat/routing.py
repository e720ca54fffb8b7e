"""Websocket routes: the live chat's consumer is added here."""

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
