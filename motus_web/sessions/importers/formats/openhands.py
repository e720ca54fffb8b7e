"""OpenHands event streams: one serialized event per line (``event_to_dict``).

The evaluation harness writes them as ``output.jsonl``; the same events, one
object per line, are what ``openhands`` keeps per conversation. Each event is
an action (``"action"``: ``system``, ``message``, ``run``, ``edit``, ``think``,
``finish``, ``condensation``...) or an observation (``"observation"``, with
``cause``, the id of the action it answers), with ``source`` (``user``,
``agent``, ``environment``), ``args`` / ``extras`` and ``content``.

- The first ``system`` action holds the system prompt (``args.content``) and
  the tool schemas the requests carried (``args.tools``).
- An agent action taken by a tool call carries ``tool_call_metadata``: its
  ``model_response`` is the provider's response, whose message (text and every
  tool call of that response) becomes one assistant message, and whose
  ``usage.prompt_tokens`` is the input the provider counted. Actions of one
  response share it (``total_calls_in_response``).
- An observation with ``tool_call_metadata`` is the result of that call (a
  ``tool`` message); one without (agent state changes, recalls) is only counted.
- A ``message`` action is a user or assistant message.
- A ``condensation`` action is OpenHands' own compaction: ``args.summary``
  replaced the events it forgot.
- ``llm_metrics`` (accumulated cost and token usage) are kept on the session.

A line that holds an evaluation record (``instance_id`` and ``history``, the
list of events) is one session per line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any, BinaryIO

from ._io import capped, json_lines
from .model import FormatProblem, ParsedCompaction, ParsedSession, named_model

FORMAT = "openhands"
EVENT_KEYS = frozenset({"action", "observation"})


def parse(stream: BinaryIO, source: str) -> Iterator[ParsedSession | FormatProblem]:
    """Yield the session of the file (or one per evaluation record), warnings first."""
    damaged: list[FormatProblem] = []
    events: list[dict[str, Any]] = []
    records = 0
    for number, item in json_lines(stream):
        if isinstance(item, str):
            damaged.append(FormatProblem(source, f"line {number}", item, warning=True))
        elif isinstance(item.get("history"), list):
            records += 1
            history = [e for e in item["history"] if isinstance(e, dict)]
            own = item.get("instance_id")
            own_id = str(own) if own is not None else f"{_name(source)}#{number}"
            yield _session(history, own_id, item.get("metrics"))
        else:
            events.append(item)
    yield from capped(damaged, source)
    if events:
        yield _session(events, _name(source))
    elif not records:
        yield FormatProblem(source, "", "no event could be read: no conversation to import")


def _name(source: str) -> str:
    return PurePath(source).name


class _Builder:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.tokens: dict[int, int] = {}
        self.compactions: list[ParsedCompaction] = []
        self.models: list[object] = []
        self.responses: set[str] = set()  # model_response ids already made a message
        self.skipped: dict[str, int] = {}
        self.system: str | None = None
        self.tools: list[Any] | None = None
        self.metrics: Any = None

    def take(self, event: dict[str, Any]) -> None:
        if isinstance(event.get("llm_metrics"), dict):
            self.metrics = event["llm_metrics"]
        action = event.get("action")
        raw_args = event.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        meta = event.get("tool_call_metadata")
        meta = meta if isinstance(meta, dict) else None
        if action == "system" and self.system is None:
            content = args.get("content")
            self.system = content if isinstance(content, str) else None
            tools = args.get("tools")
            self.tools = tools if isinstance(tools, list) else None
        elif action == "condensation":
            summary = args.get("summary")
            self.compactions.append(
                ParsedCompaction(
                    at=len(self.messages),
                    summary=summary if isinstance(summary, str) else "",
                    trigger="auto",
                    extra={"event": _meta(event)},
                )
            )
        elif isinstance(action, str) and meta is not None:
            self._call(event, args, meta)
        elif action == "message":
            role = "user" if event.get("source") == "user" else "assistant"
            content = args.get("content", event.get("message", ""))
            self.messages.append({"role": role, "content": content, "openhands": _meta(event)})
        elif "observation" in event and meta is not None:
            content = event.get("content")
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": str(meta.get("tool_call_id", "")),
                    "content": content if isinstance(content, str) else str(content),
                    "openhands": _meta(event),
                }
            )
        else:
            label = str(action or event.get("observation") or "other")
            self.skipped[label] = self.skipped.get(label, 0) + 1

    def _call(self, event: dict[str, Any], args: dict[str, Any], meta: dict[str, Any]) -> None:
        """The assistant message of the response that made this call, once per response."""
        response = meta.get("model_response")
        response = response if isinstance(response, dict) else {}
        response_id = response.get("id")
        if isinstance(response_id, str) and response_id in self.responses:
            return  # another call of a response already made its message
        choice = _first(response.get("choices"))
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and message.get("tool_calls"):
            content = message.get("content")
            calls = message["tool_calls"]
        else:
            thought = args.get("thought")
            content = thought if isinstance(thought, str) and thought else None
            calls = [_call_of(meta, args)]
        if isinstance(response_id, str):
            self.responses.add(response_id)
        usage = response.get("usage")
        prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if isinstance(prompt, int) and prompt > 0:
            self.tokens[len(self.messages)] = prompt
        self.models.append(response.get("model"))
        self.messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": calls,
                "openhands": _meta(event),
            }
        )


def _session(events: list[dict[str, Any]], own_id: str, metrics: object = None) -> ParsedSession:
    """One conversation from its events; ``metrics``: an evaluation record's own."""
    built = _Builder()
    for event in events:
        built.take(event)
    if isinstance(metrics, dict):
        built.metrics = metrics
    extra: dict[str, Any] = {"skipped_events": built.skipped}
    if built.metrics is not None:
        extra["llm_metrics"] = built.metrics
    first = events[0] if events else {}
    started = first.get("timestamp")
    version = next(
        (
            e["args"].get("openhands_version")
            for e in events
            if e.get("action") == "system" and isinstance(e.get("args"), dict)
        ),
        None,
    )
    return ParsedSession(
        source_format=FORMAT,
        source_tool=f"OpenHands {version}" if isinstance(version, str) else "OpenHands",
        original_id=own_id,
        title=None,
        created_at=started if isinstance(started, str) else None,
        system_prompt=built.system,
        messages=built.messages,
        provider_input_tokens=built.tokens,
        compactions=built.compactions,
        extra=extra,
        model=named_model(built.models),
        tools=[t for t in built.tools if isinstance(t, dict)] if built.tools else None,
    )


def _first(choices: object) -> Any:
    return choices[0] if isinstance(choices, list) and choices else None


def _call_of(meta: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """A tool call rebuilt from the action when the response is not in the file."""
    arguments = {k: v for k, v in args.items() if k not in ("thought", "security_risk")}
    return {
        "id": str(meta.get("tool_call_id", "")),
        "type": "function",
        "function": {
            "name": str(meta.get("function_name", "")),
            "arguments": json.dumps(arguments),
        },
    }


def _meta(event: dict[str, Any]) -> dict[str, Any]:
    """What an event holds besides what its message carries (the response is on the call)."""
    kept = {k: v for k, v in event.items() if k not in ("tool_call_metadata", "llm_metrics")}
    meta = event.get("tool_call_metadata")
    if isinstance(meta, dict):
        kept["tool_call"] = {k: v for k, v in meta.items() if k != "model_response"}
    return kept
