"""Turn chat messages into log records by running them through a memory.

The memory, not the importer, decides tokens, turn units, truncation and
compaction, so an imported session is exactly what a live one would have
logged. It logs into a ``_Buffer`` that the importer drains after every batch
of messages and writes to the database; the memory runs in this module's own
event loop between those writes, because the ORM must not be called while a
loop is running. Memory use is the memory's live context plus one batch.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    LogPoint,
    SessionNotFoundError,
)
from memory.log import LogProblem, LogRecord, records


class _Buffer:
    """A ``LogStore`` that holds records until ``drain``; a memory logs into it.

    With a ``backing`` store, it reads the session's stored records from there
    (a memory restored to append to an imported session).
    """

    def __init__(self, backing: Any = None) -> None:
        self.records: list[LogRecord] = []
        self.backing = backing

    def append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        self.records.append(records.as_record(record))

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if self.backing is None:
            raise SessionNotFoundError(session_id, "an import buffer")
        return self.backing.read(session_id, problems)

    def read_reversed(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if self.backing is None:
            raise SessionNotFoundError(session_id, "an import buffer")
        return self.backing.read_reversed(session_id, problems)

    def exists(self, session_id: str) -> bool:
        return self.backing is not None and bool(self.backing.exists(session_id))

    def list_sessions(self) -> list[str]:
        return []

    def drain(self) -> list[LogRecord]:
        drained, self.records = self.records, []
        return drained


class Replayer:
    """One session's memory, fed in batches; ``close()`` it when done.

    ``tools`` are the schemas every request carried (counted in the context).
    ``threshold`` turns auto-compaction on at that many tokens (with the
    offline summariser: no model is called); ``None`` leaves it off. The
    memory's own errors (``MotusMemoryError`` subclasses, ``InvalidMessageError``
    for a message it refuses) reach the caller.
    """

    def __init__(
        self,
        session_id: str,
        *,
        system_prompt: str,
        model_name: str | None,
        threshold: int | None,
        parent_session_id: str | None = None,
        parent_seq: int | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> None:
        self._buffer = _Buffer()
        config = CompactionMemoryConfig(
            session_id=session_id, token_threshold=threshold, auto_compact=threshold is not None
        )
        self.memory = CompactionMemory(
            config=config,
            log_store=self._buffer,
            model_name=model_name,
            parent_session_id=parent_session_id,
            parent_seq=parent_seq,
        )
        self.memory.set_system_prompt(system_prompt)
        if tools:
            # Before the first record: the schemas go into the session_meta and
            # every request's count, as a live session's do.
            self.memory.set_tools(tools)
        self._loop = asyncio.new_event_loop()

    @classmethod
    def resume(cls, session_id: str, stored: Any) -> Replayer:
        """The memory of a session in ``stored`` (a ``LogStore``), to add what a newer
        copy of its file holds; it logs into the buffer, not into ``stored``."""
        replayer = cls.__new__(cls)
        replayer._buffer = _Buffer(backing=stored)
        replayer.memory = CompactionMemory.restore_from_log(session_id, log_store=replayer._buffer)
        replayer._loop = asyncio.new_event_loop()
        return replayer

    def add(self, messages: Iterable[ChatMessage]) -> list[LogRecord]:
        """Add ``messages`` in order; returns the records logged since the last call.

        A leading ``system`` or ``developer`` message is the session's
        instructions (kept with its role); one after the first message is a
        change of them (a ``system_prompt`` record), as a live session logs it.
        """

        async def feed() -> None:
            for message in messages:
                if message.role == "system" or message.role == "developer":
                    self.memory.set_system_prompt(message.text, role=message.role)
                else:
                    await self.memory.add_message(message)

        self._loop.run_until_complete(feed())
        return self._buffer.drain()

    def rewind(self, point: LogPoint, reason: str) -> list[LogRecord]:
        """Continue from ``point`` of the stored log (``CompactionMemory.rewind``)."""
        self.memory.rewind(point, reason=reason)
        return self._buffer.drain()

    def compaction(self, summary: str, **fields: Any) -> list[LogRecord]:
        """Apply another program's compaction (``record_external_compaction``)."""
        self.memory.record_external_compaction(summary, **fields)
        return self._buffer.drain()

    def context_seqs(self) -> list[tuple[int, dict[str, Any]]]:
        """The seq and chat dict of every logged message now in the context."""
        state = self.memory.get_session_state()
        return [
            (seq, message)
            for seq, message in zip(state.seqs, state.messages, strict=True)
            if seq is not None
        ]

    def close(self) -> None:
        self._loop.close()


def with_provider_tokens(batch: list[LogRecord], tokens: Mapping[int, int]) -> list[LogRecord]:
    """``batch`` with each message record's ``provider_tokens`` (by seq) filled in."""
    if not tokens:
        return batch
    out: list[LogRecord] = []
    for record in batch:
        seq = record.seq if isinstance(record, records.MessageRecord) else None
        if isinstance(record, records.MessageRecord) and seq is not None and seq in tokens:
            record = dataclasses.replace(record, provider_tokens=tokens[seq])
        out.append(record)
    return out
