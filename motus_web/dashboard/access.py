"""Who may see a session or an import job: its owner and staff. Everyone else gets 404."""

from __future__ import annotations

import uuid

from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404

from motus_web.sessions.models import ImportJob, Session


def visible_session(request: HttpRequest, public_id: str) -> Session:
    """The session, or 404 when it does not exist or the user may not see it."""
    sessions = Session.objects.visible_to(request.user).select_related("owner", "parent")
    return get_object_or_404(sessions, public_id=public_id)


def visible_parent(request: HttpRequest, session: Session) -> Session | None:
    """The session this one was forked from, if the user may see it too."""
    parent = session.parent
    return parent if parent is not None and parent.is_visible_to(request.user) else None


def visible_job(request: HttpRequest, public_id: uuid.UUID) -> ImportJob:
    """The import job, or 404 when it does not exist or the user may not see it."""
    job = get_object_or_404(ImportJob, public_id=public_id)
    if not job.is_visible_to(request.user):
        raise Http404("No import job matches the given query.")
    return job
