"""The chat's database pool (``sessions.db_threads``): calls run on it, never on the
process's one thread for synchronous code, and each gives its connection back."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from django.db import connection, connections
from pytest_django import Settings

from motus_web.sessions import db_threads
from motus_web.sessions.models import Session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def persistent_connections() -> Iterator[None]:
    """Connections kept open between calls (``CONN_MAX_AGE``: none): what
    ``close_old_connections`` alone never closes."""
    settings = connections["default"].settings_dict
    before = settings["CONN_MAX_AGE"]
    settings["CONN_MAX_AGE"] = None
    db_threads.shutdown()
    yield
    settings["CONN_MAX_AGE"] = before
    db_threads.shutdown()


def open_connection() -> bool:
    """Whether this thread holds a database connection now."""
    return connection.connection is not None


async def test_every_pool_thread_gives_its_connection_back_after_each_call(
    persistent_connections: None, session: Session
) -> None:
    count = db_threads.on_db_thread(lambda: (threading.get_ident(), Session.objects.count()))
    done = await asyncio.gather(*(count() for _ in range(20)))
    assert {n for _, n in done} == {1}
    used = {ident for ident, _ in done}
    assert threading.get_ident() not in used
    pool = db_threads._executor()
    holding = await asyncio.gather(
        *(asyncio.wrap_future(pool.submit(open_connection)) for _ in range(20))
    )
    assert not any(holding)


async def test_a_failed_call_gives_its_connection_back_and_raises(
    persistent_connections: None, session: Session, settings: Settings
) -> None:
    settings.MOTUS_DB_THREADS = 1  # the probe below runs on the failed call's thread

    def fails() -> None:
        Session.objects.count()
        raise LookupError("the call's own error")

    with pytest.raises(LookupError, match="the call's own error"):
        await db_threads.on_db_thread(fails)()
    pool = db_threads._executor()
    assert not await asyncio.wrap_future(pool.submit(open_connection))


def test_a_synchronous_caller_keeps_the_call_in_its_own_transaction(session: Session) -> None:
    """A dashboard action awaits a memory's write through ``async_to_sync``
    inside its transaction: the write joins that transaction (rolled back
    with it), where a pool thread's connection would wait for its lock."""
    from asgiref.sync import async_to_sync
    from django.db import transaction

    threads: list[str] = []

    def rename() -> None:
        threads.append(threading.current_thread().name)
        Session.objects.filter(pk=session.pk).update(title="renamed")

    seen_inside: list[str] = []

    def action_then_rollback() -> None:
        with transaction.atomic():
            async_to_sync(db_threads.on_db_thread(rename))()
            seen_inside.append(Session.objects.get(pk=session.pk).title)
            transaction.set_rollback(True)

    action_then_rollback()

    assert seen_inside == ["renamed"]
    assert threads == [threading.current_thread().name]
    assert Session.objects.get(pk=session.pk).title != "renamed"
