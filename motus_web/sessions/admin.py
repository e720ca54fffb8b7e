"""Read-only admin: sessions are written by the memory and the importer only."""

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from .models import CompactionEvent, ContextChange, Message, Session


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = [
        "public_id",
        "title",
        "owner",
        "message_count",
        "context_tokens",
        "compaction_count",
        "updated_at",
    ]
    list_filter = ["memory_type", "model_name"]
    list_select_related = ["owner"]
    search_fields = ["public_id", "original_id", "title", "source"]
    date_hierarchy = "updated_at"


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "role", "unit", "tokens", "context_tokens", "created_at"]
    list_filter = ["role", "unit"]
    list_select_related = ["session"]
    search_fields = ["session__public_id"]


@admin.register(CompactionEvent)
class CompactionEventAdmin(ReadOnlyAdmin):
    list_display = [
        "session",
        "kind",
        "number",
        "trigger",
        "through_seq",
        "tokens_before",
        "tokens_after",
        "created_at",
    ]
    list_filter = ["kind", "trigger"]
    list_select_related = ["session"]
    search_fields = ["session__public_id"]


@admin.register(ContextChange)
class ContextChangeAdmin(ReadOnlyAdmin):
    list_display = ["session", "kind", "through_seq", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["session"]
