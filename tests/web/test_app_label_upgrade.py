"""A database made while storage was labelled ``"dashboard"`` upgrades in place.

The old database is this one put back as it was: the tables already have the
names they had then (each model's ``db_table``), so going back means recording
the migrations and content types under the former label and forgetting 0015.
Runs on SQLite, and on PostgreSQL with ``DATABASE_URL`` set.
"""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from django.urls import reverse

from motus_web.sessions.apps import FORMER_LABEL, SessionsConfig
from motus_web.sessions.models import Session

from .helpers import logged_in, make_session

LABEL = SessionsConfig.label
LAST = "0015_content_types_follow_the_label"


def _as_before_the_label_moved() -> None:
    applied = MigrationRecorder(connection).migration_qs
    applied.filter(app=LABEL, name=LAST).delete()
    applied.filter(app=LABEL).update(app=FORMER_LABEL)
    ContentType.objects.filter(app_label=LABEL).update(app_label=FORMER_LABEL)
    ContentType.objects.clear_cache()


@pytest.mark.django_db(transaction=True)
def test_an_old_database_with_data_keeps_its_rows_history_and_permissions(owner: User) -> None:
    session = make_session(owner, turns=4, title="kept across the upgrade")
    messages = session.messages.count()
    session_type = ContentType.objects.get_for_model(Session)
    owner.user_permissions.add(
        Permission.objects.get(content_type=session_type, codename="view_session")
    )
    admin = User.objects.create_superuser("root", password="root-pass-1234")
    LogEntry.objects.create(
        user=admin, content_type=session_type, object_id=str(session.pk),
        object_repr=str(session), action_flag=CHANGE,
    )  # fmt: skip
    _as_before_the_label_moved()
    assert ContentType.objects.get(pk=session_type.pk).app_label == FORMER_LABEL

    call_command("migrate", verbosity=0)

    applied = MigrationRecorder(connection).migration_qs
    assert not applied.filter(app=FORMER_LABEL).exists()
    assert applied.filter(app=LABEL, name=LAST).exists()
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    ContentType.objects.clear_cache()
    assert ContentType.objects.get_for_model(Session).pk == session_type.pk
    assert not ContentType.objects.filter(app_label=FORMER_LABEL).exists()
    assert User.objects.get(pk=owner.pk).has_perm(f"{LABEL}.view_session")
    assert ContentType.objects.get(logentry__object_id=str(session.pk)).app_label == LABEL
    kept = Session.objects.get(pk=session.pk)
    assert (kept.title, kept.messages.count()) == ("kept across the upgrade", messages)
    client = logged_in(admin)
    assert client.get(reverse(f"admin:{LABEL}_session_changelist")).status_code == 200
    page = client.get(reverse(f"admin:{LABEL}_session_change", args=[session.pk]))
    assert "kept across the upgrade" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_migrating_an_upgraded_database_again_changes_nothing() -> None:
    before = list(MigrationRecorder(connection).migration_qs.values_list("app", "name"))
    call_command("migrate", verbosity=0)
    assert list(MigrationRecorder(connection).migration_qs.values_list("app", "name")) == before


def test_the_tables_keep_the_names_made_under_the_former_label() -> None:
    from django.apps import apps

    tables = {model._meta.db_table for model in apps.get_app_config(LABEL).get_models()}
    assert {table.split("_")[0] for table in tables} == {FORMER_LABEL, "chat"}
