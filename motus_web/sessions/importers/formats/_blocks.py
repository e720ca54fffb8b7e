"""Anthropic content blocks as OpenAI chat messages (Claude Code, Messages API, Claude.ai).

One Anthropic message can become several chat messages: a ``tool_result`` block
is a ``tool`` message of its own, so the text around it goes into the messages
before and after it. ``tool_use`` blocks become tool calls whose ``arguments``
are the compact JSON of ``input``; ``thinking`` and ``redacted_thinking`` blocks
are kept whole under ``thinking_blocks``; every other block (text with
citations, images, documents, server tool results) is kept as a content part
exactly as it was.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._io import kind, shown
from .model import FormatError

THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def content_of(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """One plain text block as a string; anything else as the list of blocks.

    Anthropic text blocks (``{"type": "text", "text": ...}``) already have the
    shape of OpenAI text parts, so the list is kept as it was.
    """
    if len(blocks) == 1 and blocks[0].keys() == {"type", "text"} and blocks[0]["type"] == "text":
        return str(blocks[0]["text"])
    return blocks


def _at(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def usage_input_tokens(usage: object) -> int | None:
    """Input tokens of an Anthropic ``usage`` object: plain + cache creation + cache read."""
    if not isinstance(usage, Mapping):
        return None
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    counts = [usage.get(key) for key in keys]
    if not any(isinstance(count, int) for count in counts):
        return None
    return sum(count for count in counts if isinstance(count, int) and count > 0)


@dataclass
class _Draft:
    role: str
    parts: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    thinking: list[dict[str, Any]] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.parts or self.calls or self.thinking)

    def message(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        content: Any = content_of(self.parts) if self.parts else None
        if content is None and self.role != "assistant":
            content = ""
        out: dict[str, Any] = {"role": self.role, "content": content}
        if self.calls:
            out["tool_calls"] = self.calls
        if self.thinking:
            out["thinking_blocks"] = self.thinking
        out.update(extra)
        return out


@dataclass
class BlockMapper:
    """Maps the messages of one conversation, in order.

    Keeps the calls not yet answered, so a ``tool_result`` without a
    ``tool_use_id`` (Claude.ai exports) answers the oldest one, and counts what
    could not be paired. ``id_prefix`` names the ids it makes up for id-less calls.
    """

    id_prefix: str = "toolu_"
    pending: deque[str] = field(default_factory=deque)
    unpaired_results: int = 0
    made_up_ids: int = 0

    def message(
        self,
        role: object,
        content: object,
        extra: Mapping[str, Any],
        location: str,
        path: str,
    ) -> list[dict[str, Any]]:
        """Chat messages for one Anthropic message; raises ``FormatError`` on a bad block.

        ``path`` is the dotted path of the message in its record (for problems);
        ``extra`` is copied onto every message this one becomes.
        """
        if role not in ("user", "assistant"):
            raise FormatError(
                location, f"expected 'user' or 'assistant', got {shown(role)}", _at(path, "role")
            )
        if isinstance(content, str):
            return [{"role": role, "content": content, **extra}]
        if not isinstance(content, list):
            raise FormatError(
                location,
                f"expected a string or a list of content blocks, got {kind(content)}",
                _at(path, "content"),
            )
        out: list[dict[str, Any]] = []
        draft = _Draft(role)
        for index, block in enumerate(content):
            where = _at(path, f"content[{index}]")
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise FormatError(
                    location, "a content block must be an object with a 'type'", where
                )
            match block["type"]:
                case "tool_result":
                    if not draft.empty():
                        out.append(draft.message(extra))
                    out.append(self._result(block, extra, location, where))
                    draft = _Draft(role)
                case "tool_use":
                    draft.calls.append(self._call(block, location, where))
                case kind_ if kind_ in THINKING_TYPES:
                    draft.thinking.append(block)
                case _:
                    draft.parts.append(block)
        if not draft.empty() or not out:
            out.append(draft.message(extra))
        return out

    def _call(self, block: dict[str, Any], location: str, where: str) -> dict[str, Any]:
        name = block.get("name")
        if not isinstance(name, str):
            raise FormatError(location, f"expected a string, got {kind(name)}", f"{where}.name")
        call_id = block.get("id")
        if not isinstance(call_id, str) or not call_id:
            self.made_up_ids += 1
            call_id = f"{self.id_prefix}{self.made_up_ids}"
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
        self.pending.append(call_id)
        rest = {k: v for k, v in block.items() if k not in ("type", "id", "name", "input")}
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
            **rest,
        }

    def _result(
        self, block: dict[str, Any], extra: Mapping[str, Any], location: str, where: str
    ) -> dict[str, Any]:
        call_id = block.get("tool_use_id")
        if isinstance(call_id, str) and call_id:
            if call_id in self.pending:
                self.pending.remove(call_id)
            else:
                self.unpaired_results += 1
        elif self.pending:
            call_id = self.pending.popleft()
        else:
            self.unpaired_results += 1
            self.made_up_ids += 1
            call_id = f"{self.id_prefix}{self.made_up_ids}"
        raw = block.get("content", "")
        if isinstance(raw, list):
            if not all(isinstance(part, dict) for part in raw):
                raise FormatError(
                    location, "every part of a tool result must be an object", f"{where}.content"
                )
            content: Any = content_of(raw) if raw else ""
        elif isinstance(raw, str) or raw is None:
            content = raw or ""
        else:
            raise FormatError(
                location, f"expected a string or a list, got {kind(raw)}", f"{where}.content"
            )
        rest = {k: v for k, v in block.items() if k not in ("type", "tool_use_id", "content")}
        return {"role": "tool", "tool_call_id": call_id, "content": content, **rest, **extra}
