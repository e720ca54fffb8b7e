"""Helpers for the memory library's tests: message builders and a fake model client."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from memory import ChatMessage, Completion, ToolCall


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calls(*ids: str, name: str = "lookup", content: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": i,
                "type": "function",
                "function": {"name": name, "arguments": f'{{"q": "{i}"}}'},
            }
            for i in ids
        ],
    }


def result(call_id: str, text: str = "ok", name: str = "lookup") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": text}


@dataclass
class Request:
    model: str
    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None


@dataclass
class FakeClient:
    """A ChatClient that replies with scripted messages, texts or errors, in order,
    and records every request."""

    replies: list[ChatMessage | str | BaseException] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    on_request: Callable[[list[ChatMessage]], None] | None = None

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        self.requests.append(Request(model, list(messages), list(tools) if tools else None))
        if self.on_request is not None:
            self.on_request(list(messages))
        reply = self.replies.pop(0) if self.replies else "the summary"
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            reply = ChatMessage.assistant(reply)
        return Completion(message=reply, model=model)


@pytest.fixture
def fake_client() -> FakeClient:
    return FakeClient()


__all__ = ["FakeClient", "ToolCall", "answer", "calls", "result", "user"]
