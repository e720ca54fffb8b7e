"""One writer per session: taking, renewing and giving back its ``WriterLease``.

A chat turn or replay holds the lease while it runs (``acquire``, ``renew``,
``release``); an operator action that writes to a live session holds it for
its transaction (``holding``). So an undo never lands in the middle of a turn,
and a turn never starts in the middle of an undo. Synchronous ORM.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from .models import WriterLease

LEASE_SECONDS = 60  # a crashed writer blocks the session at most this long
RENEW_SECONDS = 20


def acquire(session_pk: int, holder: str, kind: str) -> bool:
    """Take the lease of session ``session_pk`` for ``holder``; ``False`` when
    another holder's lease is still live."""
    now = timezone.now()
    until = now + timedelta(seconds=LEASE_SECONDS)
    with transaction.atomic():
        taken = (
            WriterLease.objects.filter(session_id=session_pk)
            .filter(Q(expires_at__lt=now) | Q(holder=holder))
            .update(holder=holder, kind=kind, expires_at=until)
        )
        if taken:
            return True
        try:
            with transaction.atomic():
                WriterLease.objects.create(
                    session_id=session_pk, holder=holder, kind=kind, expires_at=until
                )
        except IntegrityError:  # a live lease of someone else
            return False
    return True


def renew(session_pk: int, holder: str) -> bool:
    """Push the lease's end back; ``False`` when ``holder`` no longer holds it."""
    until = timezone.now() + timedelta(seconds=LEASE_SECONDS)
    return bool(
        WriterLease.objects.filter(session_id=session_pk, holder=holder).update(expires_at=until)
    )


def release(session_pk: int, holder: str) -> None:
    WriterLease.objects.filter(session_id=session_pk, holder=holder).delete()


def holder_kind(session_pk: int) -> str | None:
    """The kind of the live lease on the session, if any (``"turn"``, ``"replay"``)."""
    lease = WriterLease.objects.filter(session_id=session_pk, expires_at__gte=timezone.now())
    return lease.values_list("kind", flat=True).first()


class SessionBusyError(Exception):
    """Another writer holds the session's lease; ``kind`` says what it is doing."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(f"another writer ({kind}) holds the session")

    @property
    def doing(self) -> str:
        """What the other writer is doing, for a sentence ("a chat turn is running")."""
        if self.kind == "turn":
            return "a chat turn is running in this session"
        if self.kind == "replay":
            return "a replay is writing this session"
        return f"another {self.kind} of this session is being done"


@contextmanager
def holding(session_pk: int, kind: str) -> Iterator[None]:
    """Hold the session's lease for the enclosing transaction, as ``kind``.

    Must run inside ``transaction.atomic()``: the lease is taken and given back
    by that transaction, so a failure or a crash in between rolls it back with
    the work and leaves no lease behind. Raises ``SessionBusyError`` at once
    when a live lease is someone else's (a turn streaming now).
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("lease.holding() needs an enclosing transaction")
    holder = f"{kind}:{uuid.uuid4().hex}"
    if not acquire(session_pk, holder, kind):
        raise SessionBusyError(holder_kind(session_pk) or "writer")
    yield
    release(session_pk, holder)
