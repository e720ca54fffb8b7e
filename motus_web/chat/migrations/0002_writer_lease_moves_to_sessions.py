from django.db import migrations


class Migration(migrations.Migration):
    """``WriterLease`` moves to storage (``motus_web.sessions``): the table stays
    where it is, only Django's record of which app owns it changes."""

    dependencies = [
        ("chat", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="WriterLease")],
            database_operations=[],
        ),
    ]
