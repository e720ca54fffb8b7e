import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("motus_sessions", "0005_import_job"),
        # The chat app made the lease's table and gives the model up first.
        ("chat", "0002_writer_lease_moves_to_sessions"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="WriterLease",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("holder", models.CharField(max_length=200)),
                        ("kind", models.CharField(max_length=16)),
                        ("expires_at", models.DateTimeField()),
                        (
                            "session",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="writer_lease",
                                to="motus_sessions.session",
                            ),
                        ),
                    ],
                    options={"db_table": "chat_writerlease"},
                ),
            ],
            database_operations=[],
        ),
        migrations.CreateModel(
            name="ActionToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("token", models.CharField(max_length=64, unique=True)),
                ("action", models.CharField(max_length=32)),
                ("target", models.CharField(max_length=255)),
                ("result_url", models.CharField(blank=True, max_length=500)),
                ("result_label", models.CharField(blank=True, max_length=300)),
                ("spent_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"db_table": "dashboard_actiontoken"},
        ),
    ]
