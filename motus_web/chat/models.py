"""The one-writer rule of a session, held in the database so it spans processes."""

from __future__ import annotations

from django.db import models


class WriterLease(models.Model):
    """Who may write to a session now, until when.

    A turn (or a replay) takes the lease before it adds anything and renews it
    while it runs; a second writer is refused while the lease is live. A
    process that dies mid-turn leaves a lease that simply expires.
    """

    session = models.OneToOneField(
        "dashboard.Session", on_delete=models.CASCADE, related_name="writer_lease"
    )
    holder = models.CharField(max_length=200)  # the channel name of the writing connection
    kind = models.CharField(max_length=16)  # "turn" or "replay"
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.kind} lease on {self.session_id} until {self.expires_at:%H:%M:%S}"
