"""Who may see a session: its owner and staff. Everyone else gets 404."""

from __future__ import annotations

from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from motus_web.sessions.models import Session


def visible_session(request: HttpRequest, public_id: str) -> Session:
    """The session, or 404 when it does not exist or the user may not see it."""
    sessions = Session.objects.visible_to(request.user).select_related("owner", "parent")
    return get_object_or_404(sessions, public_id=public_id)


def visible_parent(request: HttpRequest, session: Session) -> Session | None:
    """The session this one was forked from, if the user may see it too."""
    parent = session.parent
    return parent if parent is not None and parent.is_visible_to(request.user) else None
