"""Codex CLI / Codex Desktop rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

The first line is ``session_meta`` (the session id in ``payload.id``, the base
instructions, the program and its version). The conversation is in the
``response_item`` lines only (OpenAI Responses API items); ``event_msg`` lines
repeat it for the UI, except ``token_count`` (the provider's usage of each
request) and ``context_compacted``. Items become chat messages:

- ``message`` (user / developer / assistant) -> a message with that role;
- ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` -> a tool call on
  the assistant message they follow (a new one if a tool output came between),
  and their ``*_output`` items -> ``tool`` messages, paired by ``call_id``;
- ``reasoning`` -> ``reasoning_content`` (its summary or content text) on the next
  assistant message, the items themselves (with ``encrypted_content``) under
  ``reasoning_items``;
- any other item (``web_search_call``...) -> kept whole under ``codex_items`` on
  the next assistant message.

A ``compacted`` line is a compaction: ``payload.message`` is the summary and
``payload.replacement_history`` the context Codex rebuilt, converted the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ._io import capped, json_lines, kind, shown
from .model import FormatError, FormatProblem, ParsedCompaction, ParsedSession, named_model

FORMAT = "codex-cli"
# A current model of the tool's provider: it counts a session whose file names none.
ESTIMATE_MODEL = "gpt-5-codex"
LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUT_TYPES = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)
ROLES = frozenset({"user", "developer", "assistant", "system"})
ORIGINATORS = {"codex_cli_rs": "Codex CLI", "codex_vscode": "Codex IDE"}


@dataclass
class _Items:
    """Turns Responses API items into chat messages, in order."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)  # reasoning and other items
    calls: dict[str, str] = field(default_factory=dict)  # call_id -> "open" / "answered"
    unpaired_results: int = 0

    def take(self, item: dict[str, Any], extra: dict[str, Any], location: str, path: str) -> None:
        kind_ = item.get("type")
        if not isinstance(kind_, str):
            raise FormatError(location, f"expected a string, got {kind(kind_)}", f"{path}.type")
        if kind_ == "message":
            self._message(item, extra, location, path)
        elif kind_ in CALL_TYPES:
            self._call(item, extra, location, path)
        elif kind_ in OUTPUT_TYPES:
            self._output(item, extra, location, path)
        else:
            self.pending.append(item)

    def leftover(self) -> list[dict[str, Any]]:
        left, self.pending = self.pending, []
        return left

    def unanswered(self) -> int:
        return sum(state == "open" for state in self.calls.values())

    def _assistant(self, extra: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None, **extra}
        self._attach(message)
        self.messages.append(message)
        return message

    def _attach(self, message: dict[str, Any]) -> None:
        reasoning = [i for i in self.pending if i.get("type") == "reasoning"]
        others = [i for i in self.pending if i.get("type") != "reasoning"]
        self.pending = []
        if reasoning:
            text = "\n\n".join(filter(None, (_reasoning_text(i) for i in reasoning)))
            if text:
                previous = message.get("reasoning_content")
                message["reasoning_content"] = f"{previous}\n\n{text}" if previous else text
            message.setdefault("reasoning_items", []).extend(reasoning)
        if others:
            message.setdefault("codex_items", []).extend(others)

    def _message(
        self, item: dict[str, Any], extra: dict[str, Any], location: str, path: str
    ) -> None:
        role = item.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise FormatError(
                location, f"expected one of {sorted(ROLES)}, got {shown(role)}", f"{path}.role"
            )
        content = _content(item.get("content"), location, f"{path}.content")
        rest = {k: v for k, v in item.items() if k not in ("type", "role", "content")}
        message = {"role": role, "content": content, **rest, **extra}
        if role == "assistant":
            self._attach(message)
        self.messages.append(message)

    def _call(self, item: dict[str, Any], extra: dict[str, Any], location: str, path: str) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(
                location, f"expected a string, got {kind(call_id)}", f"{path}.call_id"
            )
        kind_ = item["type"]
        name = item.get("name", "local_shell" if kind_ == "local_shell_call" else None)
        if not isinstance(name, str):
            raise FormatError(location, f"expected a string, got {kind(name)}", f"{path}.name")
        call: dict[str, Any]
        if kind_ == "custom_tool_call":
            text = item.get("input", "")
            call = {"id": call_id, "type": "custom", "custom": {"name": name, "input": text}}
            taken: tuple[str, ...] = ("type", "call_id", "name", "input")
        else:
            arguments = item.get("arguments", item.get("action", ""))
            if not isinstance(arguments, str):
                arguments = _json(arguments)
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            taken = ("type", "call_id", "name", "arguments")
            if kind_ == "local_shell_call":
                call["codex_type"] = kind_
                taken = (*taken, "action")
        call.update({k: v for k, v in item.items() if k not in taken})
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] != "assistant":
            last = self._assistant(dict(extra))
        else:
            self._attach(last)
        last.setdefault("tool_calls", []).append(call)
        self.calls[call_id] = "open"

    def _output(
        self, item: dict[str, Any], extra: dict[str, Any], location: str, path: str
    ) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(
                location, f"expected a string, got {kind(call_id)}", f"{path}.call_id"
            )
        if self.calls.get(call_id) == "open":
            self.calls[call_id] = "answered"
        else:
            self.unpaired_results += 1
        output = item.get("output", "")
        message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id}
        if isinstance(output, str) or (
            isinstance(output, list) and all(isinstance(part, dict) for part in output)
        ):
            message["content"] = output
        elif isinstance(output, dict) and isinstance(output.get("content"), str):
            # Older rollouts: {"content": "...", "metadata": {...}}
            message["content"] = output["content"]
            message["codex_output"] = {k: v for k, v in output.items() if k != "content"}
        else:
            message["content"] = _json(output)
        message.update({k: v for k, v in item.items() if k not in ("type", "call_id", "output")})
        if item["type"] != "function_call_output":
            message["codex_type"] = item["type"]
        message.update(extra)
        self.messages.append(message)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _content(raw: object, location: str, path: str) -> str | list[dict[str, Any]]:
    """``input_text`` / ``output_text`` parts as text; a lone plain part as a string."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list) or not all(isinstance(part, dict) for part in raw):
        raise FormatError(location, f"expected a list of content parts, got {kind(raw)}", path)
    parts: list[dict[str, Any]] = []
    for part in raw:
        if part.get("type") in ("input_text", "output_text") and isinstance(part.get("text"), str):
            parts.append({**part, "type": "text"} if part.keys() == {"type", "text"} else part)
        else:
            parts.append(part)
    if len(parts) == 1 and parts[0].keys() == {"type", "text"} and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts


def _reasoning_text(item: dict[str, Any]) -> str:
    texts: list[str] = []
    for key in ("content", "summary"):
        parts = item.get(key)
        if isinstance(parts, list):
            texts += [
                str(p["text"])
                for p in parts
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
        if texts:
            break  # the full reasoning text when the file has it, else its summary
    return "\n\n".join(texts)


def parse(stream: BinaryIO, source: str) -> Iterator[ParsedSession | FormatProblem]:
    """Yield the session of one rollout, or the problems that refuse it."""
    problems: list[FormatProblem] = []
    damaged: list[FormatProblem] = []  # skipped, as Codex skips them on resume
    state = _State()
    for number, item in json_lines(stream):
        if isinstance(item, str):
            damaged.append(FormatProblem(source, f"line {number}", item, warning=True))
            continue
        try:
            state.take(number, item)
        except FormatError as error:
            problems.append(error.problem(source))
            if state.meta is None:
                break  # not a rollout from its first line: one problem says so
    yield from capped(damaged, source)
    if not problems and state.meta is None:
        why = "no session_meta line could be read" if damaged else "empty file"
        why += ": no session_meta line" if not damaged else ""
        problems.append(FormatProblem(source, "", why))
    if problems:
        yield from capped(problems, source)
        return
    yield state.session(source)


@dataclass
class _State:
    meta: dict[str, Any] | None = None
    items: _Items = field(default_factory=_Items)
    tokens: dict[int, int] = field(default_factory=dict)
    last_tokens: int | None = None
    compactions: list[ParsedCompaction] = field(default_factory=list)
    models: list[str] = field(default_factory=list)  # distinct, in order of first use
    last_model: str | None = None  # the latest turn's
    window: int | None = None  # model_context_window of the latest token_count, tokens
    later_meta: list[dict[str, Any]] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)  # event_msg types, counted
    turn_settings: list[dict[str, Any]] = field(default_factory=list)
    other_lines: list[dict[str, Any]] = field(default_factory=list)  # line types not known yet

    def take(self, number: int, line: dict[str, Any]) -> None:
        where = f"line {number}"
        kind_ = line.get("type")
        payload = line.get("payload")
        if self.meta is None and kind_ != "session_meta":
            raise FormatError(
                where,
                f"a Codex rollout starts with a session_meta line, got {shown(kind_)}",
                "type",
            )
        if not isinstance(payload, dict):
            raise FormatError(where, f"expected an object, got {kind(payload)}", "payload")
        extra = {k: v for k, v in line.items() if k not in ("type", "payload")}
        match kind_:
            case "session_meta":
                if self.meta is None:
                    if not isinstance(payload.get("id"), str) or not payload["id"]:
                        raise FormatError(
                            where, f"expected a string, got {kind(payload.get('id'))}", "payload.id"
                        )
                    self.meta = payload
                else:
                    self.later_meta.append(payload)  # a resumed or forked session
            case "response_item":
                self.items.take(payload, extra, where, "payload")
            case "event_msg":
                self._event(payload)
            case "turn_context":
                model = payload.get("model")
                if isinstance(model, str) and model:
                    self.last_model = model
                    if model not in self.models:
                        self.models.append(model)
                # Each turn repeats its settings: keep each distinct set once.
                settings = {k: v for k, v in payload.items() if k != "turn_id"}
                if settings not in self.turn_settings:
                    self.turn_settings.append(settings)
            case "compacted":
                self._compacted(payload, extra, where)
            case _:
                self.other_lines.append({**line, "line": number})

    def _event(self, payload: dict[str, Any]) -> None:
        kind_ = payload.get("type")
        key = kind_ if isinstance(kind_, str) else "?"
        self.events[key] = self.events.get(key, 0) + 1
        if kind_ == "token_count":
            info = payload.get("info")
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            tokens = last.get("input_tokens") if isinstance(last, dict) else None
            window = info.get("model_context_window") if isinstance(info, dict) else None
            if isinstance(window, int) and window > 0:
                self.window = window
            if isinstance(tokens, int) and tokens > 0:
                self.last_tokens = tokens
                index = _last_assistant(self.items.messages)
                if index is not None:
                    self.tokens[index] = tokens
        elif kind_ == "context_compacted" and self.compactions:
            self.compactions[-1].extra["context_compacted_event"] = True

    def _compacted(self, payload: dict[str, Any], extra: dict[str, Any], where: str) -> None:
        summary = payload.get("message", "")
        if not isinstance(summary, str):
            raise FormatError(where, f"expected a string, got {kind(summary)}", "payload.message")
        history = payload.get("replacement_history")
        replacement: list[dict[str, Any]] | None = None
        rest: dict[str, Any] = {**extra}
        if history is not None:
            if not isinstance(history, list) or not all(isinstance(i, dict) for i in history):
                raise FormatError(where, "expected a list of items", "payload.replacement_history")
            rebuilt = _Items()
            for index, item in enumerate(history):
                rebuilt.take(item, {}, where, f"payload.replacement_history[{index}]")
            replacement = rebuilt.messages
            left = rebuilt.leftover()
            if left:
                rest["items"] = left  # the encrypted compaction item of a remote compaction
        rest.update(
            {k: v for k, v in payload.items() if k not in ("message", "replacement_history")}
        )
        self.compactions.append(
            ParsedCompaction(
                at=len(self.items.messages),
                summary=summary,
                trigger=None,
                tokens_before=self.last_tokens,
                replacement=replacement,
                extra=rest,
            )
        )

    def session(self, source: str) -> ParsedSession:
        meta = dict(self.meta or {})
        instructions = meta.pop("base_instructions", None)
        if isinstance(instructions, dict):
            instructions = instructions.get("text")
        if not isinstance(instructions, str):
            instructions = meta.pop("instructions", None)
        originator = meta.get("originator")
        tool = ORIGINATORS.get(originator, originator) if isinstance(originator, str) else "Codex"
        version = meta.get("cli_version")
        extra: dict[str, Any] = {"session_meta": meta}
        if self.window is not None:
            extra["context_limits"] = {
                "window": self.window,
                "threshold": None,
                "source": "the window the rollout's token_count events name (model_context_window)",
            }
        if self.models:
            extra["models"] = self.models
        extra["events"] = self.events
        if self.turn_settings:
            extra["turn_settings"] = self.turn_settings
        if self.other_lines:
            extra["other_lines"] = self.other_lines
        if self.later_meta:
            extra["later_session_meta"] = self.later_meta
        forked = meta.get("forked_from_id")
        if isinstance(forked, str) and forked and forked != meta.get("id"):
            # ``codex fork`` (and the TUI's fork) writes a new rollout whose
            # session_meta names the thread it copied (openai/codex,
            # protocol ``SessionMeta.forked_from_id``): the fork links to it.
            extra["parent_session_id"] = forked
            extra["forked"] = True
        left = self.items.leftover()
        if left:
            extra["unattached_items"] = left
        if self.items.unpaired_results:
            extra["unpaired_results"] = self.items.unpaired_results
        if self.items.unanswered():
            extra["unanswered_calls"] = self.items.unanswered()
        created = meta.get("timestamp")
        return ParsedSession(
            source_format=FORMAT,
            source_tool=f"{tool} {version}" if isinstance(version, str) else str(tool),
            original_id=str(meta["id"]),
            title=None,
            created_at=created if isinstance(created, str) else None,
            system_prompt=instructions if isinstance(instructions, str) else None,
            messages=self.items.messages,
            provider_input_tokens=self.tokens,
            compactions=self.compactions,
            extra=extra,
            # Turns name their model; some session_meta lines name one too.
            model=named_model((meta.get("model"), self.last_model)),
        )


def _last_assistant(messages: list[dict[str, Any]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            return index
    return None
