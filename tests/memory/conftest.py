"""Helpers for the memory library's tests: message builders and a fake model client."""

from __future__ import annotations

from collections.abc import Sequence
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
class FakeClient:
    """A ChatClient that returns scripted replies (or raises scripted errors)."""

    replies: list[str | BaseException] = field(default_factory=list)
    requests: list[list[ChatMessage]] = field(default_factory=list)
    default: str = "summary of the earlier conversation"

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        self.requests.append(list(messages))
        reply = self.replies.pop(0) if self.replies else self.default
        if isinstance(reply, BaseException):
            raise reply
        return Completion(message=ChatMessage.assistant(reply), model=model)


@pytest.fixture
def fake_client() -> FakeClient:
    return FakeClient()


__all__ = ["FakeClient", "ToolCall", "answer", "calls", "result", "user"]
