"""Conversation sessions as the memory logs them, one row per log record.

A session's log is ``session_meta`` (the ``Session`` row), then ``message``
records (``Message``), compaction records (``CompactionEvent``) and other
context changes (``ContextChange``). Rows are only ever added: a compaction, a
failed attempt or a revert is a new event, never an edit of an old one.

Every record row keeps ``position``, its index in the session's log, because
the log interleaves three tables and the order must not depend on timestamps.
``record_extra`` and ``absent_keys`` hold whatever the columns cannot say
(fields added by a newer library, an explicit ``null``, a timestamp written in
another format), so that ``log_store.DatabaseLogStore.read`` gives back every
record exactly as it was appended; ``rows.py`` does the mapping. So that
SQLite and PostgreSQL take the same data, JSON columns are ``LosslessJSONField``
(NUL characters survive) and integer columns a record fills are 64-bit.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from memory import ChatMessage, InvalidMessageError, answered_call_ids
from memory.log import SESSION_ID_MAX_LENGTH, InvalidSessionIdError, validate_session_id

from .fields import LosslessJSONField
from .previews import PREVIEW_CHARS

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


def validate_public_id(value: str) -> None:
    try:
        validate_session_id(value)
    except InvalidSessionIdError as error:
        raise ValidationError(str(error)) from error


class SessionQuerySet(models.QuerySet["Session"]):
    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> SessionQuerySet:
        """Staff see every complete session; everyone else the complete sessions they
        own (a session an import is still writing is nobody's yet: ``incomplete``)."""
        if getattr(user, "is_staff", False):
            return self.filter(incomplete=False)
        if not user.is_authenticated:
            return self.none()
        return self.filter(owner=user, incomplete=False)


class Session(models.Model):
    public_id = models.CharField(
        max_length=SESSION_ID_MAX_LENGTH, unique=True, validators=[validate_public_id]
    )
    title = models.CharField(max_length=200, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="motus_sessions",
    )
    # The session this one was forked or restored from, when it is here; only a link
    # (the log's parent_session_id is kept in record_extra), so it never blocks a delete.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    parent_seq = models.BigIntegerField(null=True, blank=True)
    memory_type = models.CharField(max_length=32, blank=True)
    model_name = models.CharField(max_length=100, blank=True)
    compact_model_name = models.CharField(max_length=100, blank=True)
    system_prompt = models.TextField(blank=True)  # as the session started; see ContextChange
    config = LosslessJSONField(default=dict, blank=True)
    source = models.CharField(max_length=255, blank=True)
    source_key = models.CharField(max_length=255, blank=True)  # import dedup; "" when not imported
    # The id in the imported log, when that id was taken and the session got a new one.
    original_id = models.CharField(max_length=SESSION_ID_MAX_LENGTH, blank=True)
    # What an import stored, to tell a newer copy of the same conversation from
    # a changed one: {"units": [fingerprint, ...]} (see importers.identity).
    source_state = LosslessJSONField(default=dict, blank=True)
    # True while an import writes the session in several committed batches: no page,
    # chat, fork or search shows it (``visible_to``) until its last batch clears this.
    # A crash leaves it true; importing the file again replaces it (importers.writer).
    incomplete = models.BooleanField(default=False)

    # Totals kept by the log store in the same transaction as each record.
    message_count = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveBigIntegerField(default=0)
    context_tokens = models.PositiveBigIntegerField(default=0)
    compaction_count = models.PositiveIntegerField(default=0)
    record_count = models.PositiveIntegerField(default=0)  # the next record's position
    # Counts and figures the pages read instead of every row (``aggregates``), kept
    # the same way: compaction event rows of every kind, those the chart marks
    # (all but a fork's starting summary), reverts, context change rows, the
    # highest seq an ok compaction folded (None: none), the most seqs one spans
    # (last - first), and the providers' reported usage per model
    # (``aggregates.add_usage``).
    event_count = models.PositiveIntegerField(default=0)
    chart_event_count = models.PositiveIntegerField(default=0)
    revert_count = models.PositiveIntegerField(default=0)
    change_count = models.PositiveIntegerField(default=0)
    # ``tool_results_cleared`` records (old tool results stubbed before summarising).
    clearing_count = models.PositiveIntegerField(default=0)
    folded_through = models.BigIntegerField(null=True, blank=True)
    longest_fold = models.PositiveBigIntegerField(default=0)  # most seqs one compaction spans
    usage_totals = LosslessJSONField(default=dict, blank=True)
    # Logged tokens and messages per role and unit ({"<role>\t<unit>": [tokens,
    # messages]}): the context page counts a long context's earlier messages with it.
    part_totals = LosslessJSONField(default=dict, blank=True)

    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)  # time of the latest record
    record_extra = LosslessJSONField(default=dict, blank=True)  # of the session_meta record
    absent_keys = LosslessJSONField(default=list, blank=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        db_table = "dashboard_session"
        indexes = [
            models.Index(fields=["-updated_at"], name="session_recent"),
            models.Index(fields=["owner", "-updated_at"], name="session_owner_recent"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["source_key"],
                condition=~models.Q(source_key=""),
                name="session_unique_source_key",
            )
        ]

    # The session_meta field a what-if replay names its original with.
    REPLAY_OF = "replay_of"
    # The session_meta field that says how a session came from another (its tag).
    LINEAGE = "lineage"
    FORK, RESTORE, REPLAY, BRANCH, SUBAGENT = "fork", "restore", "replay", "branch", "subagent"

    def __str__(self) -> str:
        return self.title or self.public_id

    @property
    def replay_of(self) -> str | None:
        """The public id of the session this one replays, if it is a replay."""
        value = (self.record_extra or {}).get(self.REPLAY_OF)
        return value if isinstance(value, str) else None

    @property
    def lineage(self) -> str | None:
        """How this session came from another, for its tag: ``"fork"``, ``"restore"``,
        ``"replay"``, ``"branch"`` (an imported edit or rewind of a conversation),
        ``"subagent"``, or ``None`` for a session that starts its own line. A
        session linked to a parent before lineage was recorded is a fork."""
        if self.replay_of is not None:
            return self.REPLAY
        kind = (self.record_extra or {}).get(self.LINEAGE)
        if isinstance(kind, str) and kind:
            return kind
        return self.FORK if self.parent_id is not None else None

    def is_visible_to(self, user: AbstractBaseUser | AnonymousUser) -> bool:
        """What ``Session.objects.visible_to(user)`` says of this session, without a query."""
        if self.incomplete:
            return False
        if getattr(user, "is_staff", False):
            return True
        return user.is_authenticated and self.owner_id is not None and self.owner_id == user.pk


class LogRecord(models.Model):
    """What every record row has besides its own columns."""

    position = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)  # the record's ``ts``
    record_extra = LosslessJSONField(default=dict, blank=True)
    absent_keys = LosslessJSONField(default=list, blank=True)

    class Meta:
        abstract = True


class Message(LogRecord):
    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    class Unit(models.TextChoices):
        A = "A", "A: user message"
        B = "B", "B: tool calls and results"
        C = "C", "C: final answer"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveBigIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    # JSON so that null stays distinct from "" and lists of content parts survive.
    content = LosslessJSONField(null=True, blank=True)
    # The start of a user message's text, written with the row (previews.preview_of),
    # so that the session list never makes the database read a whole content value.
    preview = models.CharField(max_length=PREVIEW_CHARS, blank=True, default="")
    tool_calls = LosslessJSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=255, blank=True)
    name = models.CharField(max_length=255, blank=True)
    extra = LosslessJSONField(default=dict, blank=True)  # message fields the chat format lacks
    tokens = models.PositiveBigIntegerField()
    provider_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    unit = models.CharField(max_length=1, choices=Unit.choices)
    unit_index = models.PositiveBigIntegerField()
    context_tokens = models.PositiveBigIntegerField()
    context_message = LosslessJSONField(
        null=True, blank=True
    )  # as it entered the context, if truncated
    truncation = LosslessJSONField(null=True, blank=True)

    class Meta:
        db_table = "dashboard_message"
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_unique_seq"),
            models.UniqueConstraint(fields=["session", "position"], name="message_unique_position"),
        ]
        indexes = [
            # The replies whose usage the provider reported (the session page's cost and
            # latest reading): found without walking the session's other messages.
            models.Index(
                fields=["session", "seq"],
                name="message_provider_reported",
                condition=models.Q(provider_tokens__isnull=False),
            ),
            # The context page's tokens by part of a long context that never compacted
            # (``dashboard.context_now``), read from the index alone.
            models.Index(
                fields=["session", "role", "unit", "seq", "tokens"], name="message_part_tokens"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.role}"

    @property
    def answered_call_ids(self) -> tuple[str, ...]:
        """The calls a tool result answers (``memory.answered_call_ids``)."""
        return answered_call_ids(
            self.role,
            self.tool_call_id or self.extra.get("tool_call_id"),
            self.extra.get("tool_call_ids"),
        )

    @property
    def anomaly(self) -> str:
        """What the memory found wrong with the message when it came (an orphan
        or repeated tool result, calls left without results), or ``""``."""
        found = self.record_extra.get("anomaly")
        return found if isinstance(found, str) else ""

    @property
    def finish_reason(self) -> str:
        """How a reply that did not end normally ended (``"length"``,
        ``"content_filter"``, ``"interrupted"``, ``"invalid_tool_calls"``...),
        as the library stores it on the message; ``""`` for a normal end."""
        found = self.extra.get("finish_reason")
        if isinstance(found, str):
            return found
        return "interrupted" if self.extra.get("interrupted") is True else ""

    @property
    def reasoning_text(self) -> str:
        """An assistant's reasoning as text (``ChatMessage.reasoning_text``), or ``""``."""
        if "reasoning_content" not in self.extra and "thinking_blocks" not in self.extra:
            return ""
        try:
            return ChatMessage.from_dict(self.as_dict()).reasoning_text
        except InvalidMessageError:  # a hand-edited row: show the message without it
            return ""

    def as_dict(self) -> dict[str, Any]:
        """The OpenAI chat-format dict of the message."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls is not None:
            out["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.name:
            out["name"] = self.name
        out.update(self.extra)
        return out


class CompactionEvent(LogRecord):
    class Kind(models.TextChoices):
        OK = "ok", "compacted"
        FAILED = "failed", "compaction failed"
        WARNING = "warning", "still over threshold"
        REVERT = "revert", "compaction reverted"

    class Trigger(models.TextChoices):
        AUTO = "auto"
        MANUAL = "manual"
        FORK = "fork"  # the summary a forked session starts from

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compaction_events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    number = models.PositiveBigIntegerField(null=True, blank=True)  # compaction_number
    trigger = models.CharField(max_length=16, choices=Trigger.choices, blank=True)
    through_seq = models.BigIntegerField(null=True, blank=True)  # -1: before any message
    summarized_first_seq = models.BigIntegerField(null=True, blank=True)
    summarized_last_seq = models.BigIntegerField(null=True, blank=True)
    replayed_seqs = LosslessJSONField(null=True, blank=True)
    messages_compacted = models.PositiveBigIntegerField(null=True, blank=True)
    messages_replayed = models.PositiveBigIntegerField(null=True, blank=True)
    summary = models.TextField(blank=True)
    summary_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    tokens_before = models.PositiveBigIntegerField(null=True, blank=True)
    tokens_after = models.PositiveBigIntegerField(null=True, blank=True)
    model = models.CharField(max_length=100, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)  # failed attempts
    reason = models.TextField(blank=True)  # warnings and reverts
    floor_tokens = models.PositiveBigIntegerField(null=True, blank=True)  # warnings
    threshold = models.PositiveBigIntegerField(null=True, blank=True)  # warnings
    # The compaction number reverted.
    reverts = models.PositiveBigIntegerField(null=True, blank=True)
    # Its index among the session's events the chart marks (0 first; None: a
    # fork's starting summary, unmarked), so the chart picks events spread
    # over the session by index.
    chart_ordinal = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        db_table = "dashboard_compactionevent"
        ordering = ["session", "position"]
        indexes = [
            models.Index(fields=["session", "through_seq"], name="event_through_seq"),
            models.Index(fields=["session", "chart_ordinal"], name="event_chart_ordinal"),
            # The ok compactions whose folds meet a page of the timeline.
            models.Index(
                fields=["session", "summarized_first_seq"],
                name="event_folded_first",
                condition=models.Q(kind="ok"),
            ),
            # The highest fold in force after an undo, and the undone numbers.
            models.Index(
                fields=["session", "summarized_last_seq"],
                name="event_folded_last",
                condition=models.Q(kind="ok"),
            ),
            models.Index(
                fields=["session", "position"],
                name="event_reverts",
                condition=models.Q(kind="revert"),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="event_unique_position"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.get_kind_display()} at #{self.through_seq}"


class ContextChange(LogRecord):
    """A record that changes the context without a message or a compaction.

    ``system_prompt`` (the prompt changed mid-session), ``reset`` (the
    context starts empty again), ``tool_results_cleared`` (old tool results
    stubbed; ``tokens_before`` / ``tokens_after`` are its context sizes, for
    the chart) and ``tool_results_restored`` (its undo), and the other record
    types the library adds; a record type added by a newer library lands here
    too, its fields in ``record_extra``, so no write is refused.
    """

    class Kind(models.TextChoices):
        SYSTEM_PROMPT = "system_prompt", "system prompt changed"
        RESET = "reset", "context reset"
        TOOL_RESULTS_CLEARED = "tool_results_cleared", "old tool results cleared"
        TOOL_RESULTS_RESTORED = "tool_results_restored", "cleared tool results restored"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="context_changes")
    kind = models.CharField(max_length=64)  # the record type; Kind names the known ones
    system_prompt = models.TextField(blank=True)
    through_seq = models.BigIntegerField(null=True, blank=True)
    tokens_before = models.BigIntegerField(null=True, blank=True)
    tokens_after = models.BigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "dashboard_contextchange"
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="change_unique_position"),
        ]
        indexes = [models.Index(fields=["session", "kind", "position"], name="change_kind")]

    def __str__(self) -> str:
        return f"{self.session_id} {self.kind} at #{self.through_seq}"


class ChartBlock(models.Model):
    """The highest and lowest context size of a run of a session's seqs
    (``aggregates``: block ``index`` of ``level`` spans seqs
    ``index * width(level)`` up to the next block's first)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="chart_blocks")
    level = models.PositiveSmallIntegerField()
    index = models.PositiveBigIntegerField()
    high_seq = models.BigIntegerField()
    high_tokens = models.PositiveBigIntegerField()
    low_seq = models.BigIntegerField()
    low_tokens = models.PositiveBigIntegerField()

    class Meta:
        db_table = "dashboard_chartblock"
        constraints = [
            models.UniqueConstraint(
                fields=["session", "level", "index"], name="chart_block_unique_index"
            )
        ]

    def __str__(self) -> str:
        return f"{self.session_id} level {self.level} block {self.index}"


class WriterLease(models.Model):
    """Who may write to a session now, until when: one writer per session.

    A chat turn or replay takes the lease before it adds anything and renews it
    while it runs; an operator action (undo, delete) takes it for the length of
    its transaction. A second writer is refused while the lease is live. A
    process that dies mid-turn leaves a lease that simply expires.
    """

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="writer_lease")
    holder = models.CharField(max_length=200)  # a connection's channel name, or an action's id
    kind = models.CharField(max_length=16)  # "turn", "replay" or the action's name
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "chat_writerlease"  # made by the chat app, which held the model before

    def __str__(self) -> str:
        return f"{self.kind} lease on {self.session_id} until {self.expires_at:%H:%M:%S}"


class ActionToken(models.Model):
    """The one-time token of an operator action's form, spent when the action is done.

    A confirmation page puts a fresh random token in its form; the POST that
    acts inserts this row in the same transaction as the action, so the unique
    ``token`` lets one submission through: a second one (a double click, the
    back button, another tab, a second worker) fails the insert and is told
    the action was already done, with ``result_url``. An action that fails
    rolls its row back with it, so the same form may be sent again.
    """

    token = models.CharField(max_length=64, unique=True)  # once.spent_key: token, action, content
    action = models.CharField(max_length=32)  # "undo", "fork", "delete"...
    target = models.CharField(max_length=255)  # what the form named, as it named it
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    result_url = models.CharField(max_length=500, blank=True)
    result_label = models.CharField(max_length=300, blank=True)
    spent_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "dashboard_actiontoken"

    def __str__(self) -> str:
        return f"{self.action} {self.target} at {self.spent_at:%Y-%m-%d %H:%M:%S}"


class ImportJob(models.Model):
    """One uploaded file being imported outside the request (``jobs.py`` runs it).

    The upload is kept in the spool folder (``MOTUS_IMPORT_SPOOL_DIR``) under
    ``spool_name`` until the job ends; an interrupted job keeps it, so that it
    can be imported again. Progress fields are written between sessions;
    ``report`` is the finished run's ``ImportReport`` (``jobs.report_of``).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        INTERRUPTED = "interrupted"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="motus_import_jobs"
    )
    file_name = models.CharField(max_length=255)  # as pages show it: no folders, clipped
    spool_name = models.CharField(max_length=64)  # the kept upload, in the spool folder
    options = models.JSONField(default=dict, blank=True)  # {"replay_threshold": int | None}
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    worker = models.CharField(max_length=255, blank=True)  # "host:pid:token" of the runner

    bytes_total = models.PositiveBigIntegerField(default=0)
    bytes_read = models.PositiveBigIntegerField(default=0)  # of the file as stored (compressed)
    messages_read = models.PositiveBigIntegerField(default=0)
    sessions_imported = models.PositiveIntegerField(default=0)
    messages_imported = models.PositiveBigIntegerField(default=0)
    problem_count = models.PositiveIntegerField(default=0)
    report = LosslessJSONField(default=dict, blank=True)  # NULs in echoed values survive
    error = models.TextField(blank=True)  # why the job failed or was interrupted

    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)  # the runner's latest write
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "dashboard_importjob"
        indexes = [
            models.Index(fields=["status", "created_at"], name="import_job_status"),
            models.Index(fields=["owner", "-created_at"], name="import_job_owner_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.file_name} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status not in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def percent(self) -> int:
        """How much of the file was read, 0 to 100."""
        if not self.bytes_total:
            return 100 if self.finished else 0
        return min(100, self.bytes_read * 100 // self.bytes_total)

    def is_visible_to(self, user: AbstractBaseUser | AnonymousUser) -> bool:
        if getattr(user, "is_staff", False):
            return True
        return user.is_authenticated and self.owner_id == user.pk


class SyncedFile(models.Model):
    """A file ``manage.py sync_sessions`` has imported (``importers.sync``).

    ``size`` and ``mtime_ns`` are the file's as it was last read whole; a file
    whose both are unchanged is not read again. A file that grew is imported
    again and the import appends only what is new (``importers.identity``).
    """

    owner = models.ForeignKey(  # whose sessions the file was imported into; None: staff's
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE
    )
    path = models.CharField(max_length=1024)  # as the folder walk sees it
    size = models.PositiveBigIntegerField(default=0)  # bytes, with its subagent transcripts
    mtime_ns = models.BigIntegerField(default=0)  # the latest of those files'
    synced_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "dashboard_syncedfile"
        constraints = [
            models.UniqueConstraint(fields=["owner", "path"], name="synced_file_unique_path"),
            models.UniqueConstraint(
                fields=["path"],
                condition=models.Q(owner__isnull=True),
                name="synced_file_unique_unowned_path",
            ),
        ]

    def __str__(self) -> str:
        return self.path


class LongTermMemory(models.Model):
    """A memory kept across sessions (``memory.background``), its current row.

    The rules (scope, dedupe, versions, purge) are the library's
    ``VersionedStore``; ``long_term_store.DjangoLongTermStore`` maps them onto
    these tables. Times are the library's ISO-8601 strings, so a row reads
    back exactly as the library wrote it. On SQLite an FTS5 table
    (``dashboard_longtermmemory_fts``, migration 0008) indexes ``text``; on
    PostgreSQL the search is ``to_tsvector('english', text)`` with a GIN index.
    """

    public_id = models.CharField(max_length=32, unique=True)
    scope_key = models.CharField(max_length=300)
    kind = models.CharField(max_length=16)
    text = models.TextField()
    key = models.TextField()  # memory.background.types.dedupe_key(text)
    status = models.CharField(max_length=16)
    importance = models.FloatField()
    created_at = models.CharField(max_length=40)
    updated_at = models.CharField(max_length=40)
    version = models.PositiveIntegerField()
    happened = models.CharField(max_length=200, blank=True)  # "": the library's None
    superseded_by = models.CharField(max_length=32, blank=True)

    class Meta:
        db_table = "dashboard_longtermmemory"
        indexes = [
            models.Index(fields=["scope_key", "status"], name="ltm_scope_status"),
            models.Index(fields=["scope_key", "-updated_at"], name="ltm_scope_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.text[:60]}"


class LongTermMemoryVersion(models.Model):
    """One version of a memory (appended, never changed)."""

    memory = models.ForeignKey(LongTermMemory, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    kind = models.CharField(max_length=16)
    status = models.CharField(max_length=16)
    importance = models.FloatField()
    action = models.CharField(max_length=16)
    actor = models.CharField(max_length=200)
    reason = models.TextField(blank=True)
    ts = models.CharField(max_length=40)

    class Meta:
        db_table = "dashboard_longtermmemoryversion"
        ordering = ["memory", "number"]
        constraints = [
            models.UniqueConstraint(fields=["memory", "number"], name="ltm_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.memory_id} v{self.number} {self.action}"


class LongTermMemoryLink(models.Model):
    """Where a memory was said: a session (its public id) and the seqs of its log."""

    memory = models.ForeignKey(LongTermMemory, on_delete=models.CASCADE, related_name="links")
    session_id = models.CharField(max_length=SESSION_ID_MAX_LENGTH, blank=True)  # "": none
    first_seq = models.BigIntegerField(null=True, blank=True)
    last_seq = models.BigIntegerField(null=True, blank=True)
    extractor = models.CharField(max_length=200)
    ts = models.CharField(max_length=40)

    class Meta:
        db_table = "dashboard_longtermmemorylink"
        ordering = ["memory", "ts", "id"]
        indexes = [models.Index(fields=["session_id"], name="ltm_link_session")]

    def __str__(self) -> str:
        return f"{self.memory_id} <- {self.session_id or '-'}#{self.first_seq}"


class LongTermMemoryTombstone(models.Model):
    """What a purge leaves of a statement: ``memory.background.types.tombstone_key``
    (a hash of scope and words, never the words), so it is not remembered again."""

    scope_key = models.CharField(max_length=300)
    tombstone = models.CharField(max_length=64)

    class Meta:
        db_table = "dashboard_longtermmemorytombstone"
        constraints = [
            models.UniqueConstraint(fields=["scope_key", "tombstone"], name="ltm_tombstone_unique")
        ]

    def __str__(self) -> str:
        return f"{self.scope_key} {self.tombstone[:12]}"
