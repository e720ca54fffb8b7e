"""One writer per session: the lease row a turn or replay holds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from motus_web.sessions import lease
from motus_web.sessions.models import WriterLease

from .chat_helpers import chat_session

pytestmark = pytest.mark.django_db


def test_a_live_lease_refuses_a_second_holder_until_it_is_given_back(owner: User) -> None:
    session = chat_session(owner)
    assert lease.acquire(session.pk, "tab-1", "turn")
    assert lease.acquire(session.pk, "tab-1", "turn")  # the holder may take it again
    assert not lease.acquire(session.pk, "tab-2", "turn")
    assert lease.holder_kind(session.pk) == "turn"
    lease.release(session.pk, "tab-2")  # not the holder: nothing happens
    assert not lease.acquire(session.pk, "tab-2", "replay")
    lease.release(session.pk, "tab-1")
    assert lease.acquire(session.pk, "tab-2", "replay")
    assert lease.holder_kind(session.pk) == "replay"


def test_the_lease_of_a_writer_that_died_expires(owner: User) -> None:
    session = chat_session(owner)
    assert lease.acquire(session.pk, "crashed-worker", "turn")
    WriterLease.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert lease.holder_kind(session.pk) is None
    assert not lease.renew(session.pk, "another")
    assert lease.acquire(session.pk, "new-worker", "turn")
    assert not lease.renew(session.pk, "crashed-worker")
    assert lease.renew(session.pk, "new-worker")
    assert WriterLease.objects.get().holder == "new-worker"


def test_leases_of_different_sessions_are_independent(owner: User) -> None:
    first, second = chat_session(owner), chat_session(owner)
    assert lease.acquire(first.pk, "a", "turn")
    assert lease.acquire(second.pk, "b", "turn")
