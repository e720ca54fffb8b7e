"""Who may see a session or an import job, and who may write a session: the
one place both UIs ask.

A session is seen and written by its owner and by staff; everyone else gets
404 (a session they may not see is not there for them). ``may_write`` is the
write rule every UI path applies: the pages' forms, the chat's socket (at
connect and on every frame) and the memories of a scope.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404

from .models import ImportJob, Session


def may_write(user: AbstractBaseUser | AnonymousUser, owner_pk: int | None) -> bool:
    """Whether ``user`` may write what ``owner_pk`` owns (a session, a memory
    scope, a spent action's result): staff always, else its logged-in owner;
    nothing owned by nobody (``None``: an import's, staff's) to anyone else."""
    if getattr(user, "is_staff", False):
        return True
    return bool(user.is_authenticated and owner_pk is not None and owner_pk == user.pk)


def session_for_user(request: HttpRequest, public_id: str) -> tuple[Session, bool]:
    """The session and whether the request's user may write it; 404 when it
    does not exist or the user may not see it (as healthchecks'
    ``_get_check_for_user`` answers the check and its read-write flag)."""
    session = visible_session(request, public_id)
    return session, may_write(request.user, session.owner_id)


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
