import django.db.models.deletion
from django.db import migrations, models


def keep_parent_ids_in_the_record(apps, schema_editor):
    """``parent_session_id`` now always rides in record_extra; before, the link gave it."""
    Session = apps.get_model("motus_sessions", "Session")
    sessions = Session.objects.filter(parent__isnull=False).select_related("parent")
    for session in sessions.iterator():
        if "parent_session_id" not in session.record_extra:
            session.record_extra = {
                **session.record_extra,
                "parent_session_id": session.parent.public_id,
            }
            session.save(update_fields=["record_extra"])


class Migration(migrations.Migration):

    dependencies = [
        ('motus_sessions', '0002_session_original_id'),
    ]

    operations = [
        migrations.RunPython(keep_parent_ids_in_the_record, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='session',
            name='parent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='children', to='motus_sessions.session'),
        ),
    ]
