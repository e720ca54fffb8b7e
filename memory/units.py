"""Turn units and open tool-call batches.

A ReAct loop produces three kinds of turn unit (see the design document):

- **A**: a user message;
- **B**: an assistant message with ``tool_calls``, followed by one tool result
  per call (parallel calls included);
- **C**: an assistant message without tool calls.

A memory may only cut the conversation at a *boundary*: when no tool call is
waiting for its result. Calls are tracked by ``tool_call_id`` rather than by a
counter, so a result for an unknown or already answered id cannot close
somebody else's batch: it is reported as an anomaly and kept out of the
context (providers reject a tool message that follows no matching call).

When a batch is abandoned (a user or assistant message arrives while calls are
still open, as after an interrupted tool run), the tracker reports the
unanswered ids; the memory then adds a placeholder result for each, so the
context it sends stays valid. The placeholders are derived, never logged, and
restore derives the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from .messages import ChatMessage

Unit = Literal["A", "B", "C"]

ABANDONED_RESULT_TEXT = "[no result: this tool call was interrupted before it returned]"


class Classification(NamedTuple):
    """What one message is: its unit, and what it did to the open batch.

    ``in_context`` is False for an orphan tool result (unknown or already
    answered id, or no open batch). ``abandoned`` lists the ids of the open
    batch that this message closed without results, in call order.
    """

    unit: Unit
    unit_index: int
    in_context: bool = True
    abandoned: tuple[str, ...] = ()
    anomaly: str | None = None


@dataclass(slots=True)
class TurnTracker:
    """Classifies messages into units and tracks the open tool-call batch."""

    unit_index: int = -1
    unit: Unit | None = None
    pending: dict[str, None] = field(default_factory=dict)  # open call ids, in call order
    answered: set[str] = field(default_factory=set)  # ids of the open batch already answered

    @property
    def at_boundary(self) -> bool:
        """True when no tool call of the current batch is waiting for its result."""
        return not self.pending

    def classify(self, message: ChatMessage) -> Classification:
        """Classify ``message`` and advance the tracker. Never raises."""
        calls = message.tool_calls
        return self.classify_ids(
            message.role, tuple(c.id for c in calls) if calls else (), message.tool_call_ids
        )

    def classify_ids(
        self, role: str, call_ids: tuple[str, ...], result_ids: tuple[str, ...]
    ) -> Classification:
        """``classify`` from what it reads of a message: its role, the ids of the
        calls it makes and the ids of the calls it answers (restore uses this on
        raw log records)."""
        if role == "tool":
            return self._tool_result(result_ids)
        abandoned = tuple(self.pending)
        anomaly = None
        if abandoned:
            anomaly = (
                f"{role} message arrived while tool calls {', '.join(abandoned)} "
                "had no result; they were closed with a placeholder result"
            )
        self.pending = {}
        self.answered = set()
        self.unit_index += 1
        if role == "user":
            self.unit = "A"
        elif call_ids:
            self.unit = "B"
            for call_id in call_ids:
                if call_id in self.pending:
                    anomaly = f"tool call id {call_id} appears twice in one message"
                self.pending[call_id] = None
        else:
            self.unit = "C"
        return Classification(self.unit, self.unit_index, True, abandoned, anomaly)

    def _tool_result(self, ids: tuple[str, ...]) -> Classification:
        if self.unit is None:
            # A tool result before any unit (a log that starts mid-turn) opens one,
            # so every message has a unit and a non-negative unit index.
            self.unit, self.unit_index = "B", self.unit_index + 1
        unit: Unit = self.unit
        known = [i for i in ids if i in self.pending]
        if not ids or len(known) != len(ids):
            unknown = [i for i in ids if i not in self.pending]
            if not ids:
                why = "a tool result without tool_call_id"
            elif any(i in self.answered for i in unknown):
                why = f"a second result for tool call {', '.join(unknown)}"
            else:
                why = f"a tool result for unknown tool call {', '.join(unknown)}"
            return Classification(
                unit, self.unit_index, False, (), f"{why}; kept out of the context"
            )
        for i in known:
            del self.pending[i]
            self.answered.add(i)
        return Classification(unit, self.unit_index)

    def copy(self) -> TurnTracker:
        return TurnTracker(self.unit_index, self.unit, dict(self.pending), set(self.answered))


def placeholder_results(ids: tuple[str, ...]) -> list[ChatMessage]:
    """The placeholder tool results that close an abandoned batch, in call order."""
    return [ChatMessage.tool(ABANDONED_RESULT_TEXT, tool_call_id=i) for i in ids]
