"""The app's content types (and so its permissions and admin log entries, which
point at them by id) move from the former label ``"dashboard"`` to
``"motus_sessions"``. Without this, ``post_migrate`` would make new content
types with new permissions, and users and groups would lose the ones granted.
The tables keep their names; the migration history moved before the plan was
made (``management/commands/migrate.py``). One ``UPDATE``, in the migration's
transaction: a crash leaves every row as it was."""

from django.db import migrations

FORMER, LABEL = "dashboard", "motus_sessions"


def _relabel(apps, old, new):
    content_type = apps.get_model("contenttypes", "ContentType")
    taken = content_type.objects.filter(app_label=new).values("model")
    content_type.objects.filter(app_label=old).exclude(model__in=taken).update(app_label=new)


def forwards(apps, schema_editor):
    _relabel(apps, FORMER, LABEL)


def backwards(apps, schema_editor):
    _relabel(apps, LABEL, FORMER)


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("motus_sessions", "0014_tool_result_clearing"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
