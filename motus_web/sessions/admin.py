"""Read-only admin: sessions are written by the memory and the importer only.

Its pages are written out as the dashboard's are (``rendering.encodable``): a
bidirectional control in a stored title or message shows as ``⟨U+202E⟩``
instead of reordering the page, and a lone surrogate as U+FFFD.
"""

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from motus_web.ui.rendering import encodable

from .models import CompactionEvent, ContextChange, Message, Session


def _escaped(response: HttpResponse) -> HttpResponse:
    if isinstance(response, TemplateResponse) and not response.is_rendered:
        response.content = encodable(response.rendered_content)
    return response


class ReadOnlyAdmin(admin.ModelAdmin):
    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return _escaped(super().changelist_view(request, extra_context))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        return _escaped(super().change_view(request, object_id, form_url, extra_context))

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
