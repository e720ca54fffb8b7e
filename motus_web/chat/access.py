"""Who a socket belongs to, checked again on every frame, and told at once when that ends.

A websocket outlives the request that opened it, so the login it was opened
with is not taken on trust: before every frame the consumer calls ``check``,
which reads the browser's Django session row again and answers what
``django.contrib.auth.get_user`` would for a new request (the session still
exists and names the same user, the user is active, the session's auth hash
still matches the password) and whether that user may still see and write the
chat session (owner or staff, the chat session not deleted).

Revocation does not wait for the next frame: the receivers below tell every
open socket concerned through the channel layer, and each closes at once and
leaves its groups (``SessionConsumer.auth_revoked`` / ``auth_check``):

- a logout (``user_logged_out``) and a deleted Django session row (``post_delete``,
  which ``logout``, ``clearsessions`` and a password change's new key all end in)
  reach the sockets of that browser session (``browser_group``);
- a saved user (deactivated, a new password, the staff flag taken away) reaches
  every socket of that user (``user_group``), which checks itself again;
- a deleted chat session reaches every socket following it (``session.deleted``).

Synchronous ORM in ``check``; the receivers send after the transaction commits.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.signals import user_logged_out
from django.contrib.sessions.models import Session as BrowserSession
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from motus_web.sessions.access import may_write
from motus_web.sessions.models import Session
from motus_web.sessions.signals import session_group

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Access:
    """What the socket's user may do in its chat session now."""

    user_pk: int
    can_write: bool


NOT_LOGGED_IN = "not_logged_in"
NOT_VISIBLE = "not_visible"


def browser_group(session_key: str) -> str:
    """The group of every socket opened with one browser session (the key never appears)."""
    return "browser." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def user_group(user_pk: int) -> str:
    return f"user.{user_pk}"


def check(session_key: str | None, user_pk: int, chat_session_pk: int) -> Access | str:
    """``Access`` while the socket's login and visibility still hold, else why not:
    ``NOT_LOGGED_IN`` (logged out, deactivated, password changed, session row
    gone, another user) or ``NOT_VISIBLE`` (the chat session deleted, or no
    longer this user's to see)."""
    if not session_key:
        return NOT_LOGGED_IN
    # load() answers {} for a row that is gone or expired, as a new request would find it.
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
    if str(data.get(SESSION_KEY)) != str(user_pk):
        return NOT_LOGGED_IN
    backend_path = data.get(BACKEND_SESSION_KEY)
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return NOT_LOGGED_IN
    user = import_string(backend_path)().get_user(user_pk)  # None when inactive
    if user is None or not user.is_active:
        return NOT_LOGGED_IN
    if not constant_time_compare(data.get(HASH_SESSION_KEY) or "", user.get_session_auth_hash()):
        return NOT_LOGGED_IN
    visible = Session.objects.visible_to(user).filter(pk=chat_session_pk)
    found = visible.values_list("pk", "owner_id").first()
    if found is None:
        return NOT_VISIBLE
    owner_pk = found[1]
    return Access(user_pk=user.pk, can_write=may_write(user, owner_pk))


def _tell(group: str, kind: str) -> None:
    layer = get_channel_layer()
    if layer is None:
        return

    def send() -> None:
        try:
            async_to_sync(layer.group_send)(group, {"type": kind})
        except Exception:  # the next frame's check still refuses the socket
            logger.exception("could not tell group %s: %s", group, kind)

    transaction.on_commit(send)


@receiver(user_logged_out, dispatch_uid="chat-logout")
def _logged_out(sender: Any, request: Any, **kwargs: Any) -> None:
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        _tell(browser_group(key), "auth.revoked")


@receiver(post_delete, sender=BrowserSession, dispatch_uid="chat-session-row-deleted")
def _session_row_deleted(sender: Any, instance: BrowserSession, **kwargs: Any) -> None:
    _tell(browser_group(instance.session_key), "auth.revoked")


@receiver(post_save, sender=get_user_model(), dispatch_uid="chat-user-saved")
def _user_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if not created:
        _tell(user_group(instance.pk), "auth.check")


@receiver(post_delete, sender=Session, dispatch_uid="chat-session-deleted")
def _chat_session_deleted(sender: Any, instance: Session, **kwargs: Any) -> None:
    _tell(session_group(instance.public_id), "session.deleted")
