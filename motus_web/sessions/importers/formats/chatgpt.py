"""ChatGPT data exports: ``conversations.json`` (a list of conversations).

Each conversation keeps its messages as a tree (``mapping``: node id -> ``{message,
parent, children}``); ``current_node`` is the leaf the user last saw. The
conversation is the path from ``current_node`` up to the root; every other leaf is
a branch (a regenerated answer, an edited question). On the path:

- nodes without a message, and system messages hidden from the conversation or
  empty, are skipped; the user's custom instructions (``user_editable_context``)
  become the system prompt;
- an assistant message addressed to a tool (``recipient`` other than ``"all"``:
  ``python``, ``browser.search``, ``dalle.text2im``...) is a tool call whose
  arguments are the message's text, and the ``tool`` messages that follow answer
  the open calls in order;
- ``thoughts`` become ``reasoning_content`` and ``reasoning_recap`` becomes
  ``reasoning_recap`` on the next assistant message.

Every message keeps the fields the chat format has no place for under
``chatgpt`` (its id, times, status, metadata, content type...).

The list is read one conversation at a time (``ijson``), so memory holds one
conversation, never the whole export.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO

from ._io import kind, shown
from ._json import conversations
from .model import FormatError, FormatProblem, ParsedSession, named_model

FORMAT = "chatgpt"


def parse(stream: BinaryIO, source: str) -> Iterator[ParsedSession | FormatProblem]:
    """Yield each conversation of an export (a list) or of a one-conversation file.

    A bad conversation is reported and the others still parse; invalid JSON stops
    the file at the conversation where it breaks.
    """
    return conversations(stream, source, _one)


def _one(conversation: object, number: int, source: str) -> ParsedSession | FormatProblem:
    where = f"conversation {number}"
    try:
        if not isinstance(conversation, dict):
            raise FormatError(where, f"expected an object, got {kind(conversation)}")
        return _session(conversation, where)
    except FormatError as error:
        return error.problem(source)


def _session(conversation: dict[str, Any], where: str) -> ParsedSession:
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict) or not all(isinstance(n, dict) for n in mapping.values()):
        raise FormatError(where, "expected an object of nodes", "mapping")
    leaves = [key for key, node in mapping.items() if not _children(node, mapping)]
    current = conversation.get("current_node")
    if not isinstance(current, str) or current not in mapping:
        if current is not None:
            raise FormatError(
                where, f"names no node of the mapping: {shown(current)}", "current_node"
            )
        current = max(leaves, key=lambda key: _time(mapping[key]), default=None)
    active_nodes = _path(mapping, current, where)
    active = _Converter(where).run(active_nodes)
    branches: list[list[dict[str, Any]]] = []
    forks: list[int] = []
    on_path = {node.get("id") for node in active_nodes}
    for leaf in sorted(leaves, key=lambda key: _time(mapping[key])):
        if leaf in on_path:
            continue
        messages = _Converter(where).run(_path(mapping, leaf, where)).messages
        shared = _shared(messages, active.messages)
        if len(messages) > shared:
            branches.append(messages)
            forks.append(shared)
    extra = {
        k: v
        for k, v in conversation.items()
        if k not in ("mapping", "title", "create_time", "current_node")
    }
    extra["current_node"] = current
    if forks:
        extra["branch_forks"] = forks
    extra.update(active.stats())
    original = conversation.get("conversation_id") or conversation.get("id")
    title = conversation.get("title")
    return ParsedSession(
        source_format=FORMAT,
        source_tool="ChatGPT",
        original_id=original if isinstance(original, str) else None,
        title=title if isinstance(title, str) and title.strip() else None,
        created_at=_iso(conversation.get("create_time")),
        system_prompt=active.system_prompt,
        messages=active.messages,
        branches=branches,
        extra=extra,
        model=named_model(
            [conversation.get("default_model_slug"), *map(_model_slug, active.messages)]
        ),
    )


def _model_slug(message: dict[str, Any]) -> object:
    """The ``metadata.model_slug`` of an assistant message's node."""
    node = message.get("chatgpt") if message["role"] == "assistant" else None
    metadata = node.get("metadata") if isinstance(node, dict) else None
    return metadata.get("model_slug") if isinstance(metadata, dict) else None


def _children(node: dict[str, Any], mapping: dict[str, Any]) -> list[str]:
    children = node.get("children")
    if not isinstance(children, list):
        return []
    return [child for child in children if isinstance(child, str) and child in mapping]


def _path(mapping: dict[str, dict[str, Any]], leaf: str | None, where: str) -> list[dict[str, Any]]:
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    key = leaf
    while key is not None:
        if key in seen:
            raise FormatError(where, f"the parents of node {shown(key)} form a loop", "mapping")
        seen.add(key)
        node = mapping.get(key)
        if node is None:
            break  # a parent outside the export: the path starts here
        path.append({**node, "id": key})
        parent = node.get("parent")
        key = parent if isinstance(parent, str) else None
    path.reverse()
    return path


def _time(node: dict[str, Any]) -> float:
    message = node.get("message")
    created = message.get("create_time") if isinstance(message, dict) else None
    return float(created) if isinstance(created, int | float) else 0.0


def _iso(value: object) -> str | None:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, tz=UTC).isoformat()
    return value if isinstance(value, str) else None


def _shared(branch: list[dict[str, Any]], main: list[dict[str, Any]]) -> int:
    shared = 0
    for mine, theirs in zip(branch, main, strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared


@dataclass
class _Converter:
    where: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    system_prompt: str | None = None
    open_calls: deque[str] = field(default_factory=deque)
    reasoning: list[str] = field(default_factory=list)
    recap: list[str] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)  # the reasoning nodes' own fields
    system_nodes: list[dict[str, Any]] = field(default_factory=list)
    hidden: int = 0
    made_up_calls: int = 0

    def run(self, nodes: list[dict[str, Any]]) -> _Converter:
        for node in nodes:
            message = node.get("message")
            if message is None:
                continue
            if not isinstance(message, dict):
                raise FormatError(
                    self.where,
                    f"expected an object, got {kind(message)}",
                    f"mapping.{node['id']}.message",
                )
            self._take(message, f"mapping.{node['id']}.message")
        if self.reasoning or self.recap:
            self.messages.append(self._assistant({"content": None}))
        return self

    def stats(self) -> dict[str, Any]:
        counts: dict[str, Any] = {
            "system_nodes": self.system_nodes,
            "hidden_nodes": self.hidden,
            "made_up_calls": self.made_up_calls,
            "unanswered_calls": len(self.open_calls),
        }
        return {k: v for k, v in counts.items() if v}

    def _take(self, message: dict[str, Any], path: str) -> None:
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        if role not in ("system", "user", "assistant", "tool"):
            raise FormatError(
                self.where,
                f"expected system, user, assistant or tool, got {shown(role)}",
                f"{path}.author.role",
            )
        content = message.get("content")
        if not isinstance(content, dict):
            raise FormatError(
                self.where, f"expected an object, got {kind(content)}", f"{path}.content"
            )
        content_type = content.get("content_type")
        metadata = message.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        keep = {"chatgpt": _kept(message, content)}
        if role == "system":
            self.system_nodes.append({**keep["chatgpt"], "content": content})
            self._system(content, content_type, metadata)
        elif role == "user":
            self.messages.append({"role": "user", "content": _content(content), **keep})
        elif role == "assistant":
            self._assistant_message(message, content, content_type, keep)
        else:
            self._tool(message, content, keep)

    def _system(
        self, content: dict[str, Any], content_type: object, metadata: dict[str, Any]
    ) -> None:
        if content_type == "user_editable_context":
            texts = [content.get(k) for k in ("user_profile", "user_instructions")]
            text = "\n\n".join(t for t in texts if isinstance(t, str) and t.strip())
        else:
            text = _text(content)
        if (
            metadata.get("is_visually_hidden_from_conversation")
            and content_type != "user_editable_context"
        ):
            self.hidden += 1
            return
        if not text.strip():
            self.hidden += 1
            return
        if not self.messages:
            self.system_prompt = f"{self.system_prompt}\n\n{text}" if self.system_prompt else text
        else:
            self.messages.append({"role": "system", "content": text})

    def _assistant_message(
        self,
        message: dict[str, Any],
        content: dict[str, Any],
        content_type: object,
        keep: dict[str, Any],
    ) -> None:
        if content_type == "thoughts":
            # Thoughts belong to the assistant message they lead to.
            self.reasoning.append(_thoughts(content))
            self.notes.append(keep["chatgpt"])
            return
        if content_type == "reasoning_recap":
            self.recap.append(_text(content))
            self.notes.append(keep["chatgpt"])
            return
        recipient = message.get("recipient", "all")
        if isinstance(recipient, str) and recipient != "all":
            call_id = str(message.get("id") or f"chatgpt-call-{len(self.messages)}")
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": recipient, "arguments": _text(content)},
            }
            self.messages.append(self._assistant({"content": None, "tool_calls": [call], **keep}))
            self.open_calls.append(call_id)
            return
        self.messages.append(self._assistant({"content": _content(content), **keep}))

    def _assistant(self, fields: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", **fields}
        if self.reasoning:
            message["reasoning_content"] = "\n\n".join(r for r in self.reasoning if r)
        if self.recap:
            message["reasoning_recap"] = "\n\n".join(r for r in self.recap if r)
        if self.notes:
            message["chatgpt_reasoning"] = self.notes
        self.reasoning, self.recap, self.notes = [], [], []
        return message

    def _tool(self, message: dict[str, Any], content: dict[str, Any], keep: dict[str, Any]) -> None:
        author = message["author"]
        name = author.get("name") if isinstance(author.get("name"), str) else "tool"
        if self.open_calls:
            call_id = self.open_calls.popleft()
        else:
            # A tool message no call asked for (some plugins, file search): make up
            # the call, so the result still follows one.
            self.made_up_calls += 1
            call_id = f"chatgpt-made-up-{self.made_up_calls}"
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            self.messages.append(
                self._assistant({"content": None, "tool_calls": [call], "made_up": True})
            )
        self.messages.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": name,
                "content": _content(content),
                **keep,
            }
        )


def _kept(message: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in message.items() if k != "content"}
    rest = {k: v for k, v in content.items() if k not in ("parts", "text")}
    if rest != {"content_type": "text"}:
        kept["content"] = rest
    return kept


def _text(content: dict[str, Any]) -> str:
    text = content.get("text")
    if isinstance(text, str):
        return text
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(
            p if isinstance(p, str) else str(p.get("text", ""))
            for p in parts
            if isinstance(p, str | dict)
        )
    inner = content.get("content")
    if isinstance(inner, str):
        return inner
    rest = {k: v for k, v in content.items() if k != "content_type"}
    return json.dumps(rest, ensure_ascii=False) if rest else ""


def _content(content: dict[str, Any]) -> str | list[dict[str, Any]]:
    """Text as a string; parts with images or files as a list of parts."""
    parts = content.get("parts")
    if isinstance(parts, list) and any(isinstance(p, dict) for p in parts):
        return [
            {"type": "text", "text": p} if isinstance(p, str) else p
            for p in parts
            if isinstance(p, str | dict)
        ]
    return _text(content)


def _thoughts(content: dict[str, Any]) -> str:
    thoughts = content.get("thoughts")
    if isinstance(thoughts, list):
        texts = []
        for thought in thoughts:
            if isinstance(thought, dict):
                texts.append(
                    "\n".join(str(thought[k]) for k in ("summary", "content") if thought.get(k))
                )
        return "\n\n".join(t for t in texts if t)
    return _text(content)
