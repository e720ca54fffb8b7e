"""Taking, renewing and giving back a session's ``WriterLease`` (synchronous ORM)."""

from __future__ import annotations

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
