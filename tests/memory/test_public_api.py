"""The library's public surface, and its independence from Django."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import memory
import memory.background
import memory.log
import memory.tokens
from memory import (
    BackgroundMemory,
    BaseMemory,
    BasicMemory,
    CompactionBase,
    CompactionMemory,
    create_memory,
)


def test_the_public_names_are_exactly_those_listed() -> None:
    for name in [
        "BaseMemory",
        "BasicMemory",
        "CompactionBase",
        "CompactionMemory",
        "CompactionMemoryConfig",
        "CompactionSessionState",
        "SessionState",
        "ChatMessage",
        "count_tokens",
        "TokenCounter",
    ]:
        assert name in memory.__all__
    assert len(set(memory.__all__)) == len(memory.__all__)  # ruff (RUF022) keeps it sorted
    assert all(hasattr(memory, name) for name in memory.__all__)


@pytest.mark.parametrize(
    "package", [memory, memory.log, memory.tokens, memory.background], ids=lambda m: m.__name__
)
def test_all_lists_exactly_the_public_names_of_each_package(package: types.ModuleType) -> None:
    # Submodules are reached by name; every other public name is in __all__ (as httpx checks).
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    exported = {
        name for name in package.__all__ if not isinstance(vars(package)[name], types.ModuleType)
    }
    assert public == exported


def test_the_model_clients_and_their_errors_are_public() -> None:
    for name in [
        "OpenAIChatClient",
        "AnthropicClient",
        "StreamingChatClient",
        "stream_completion",
        "TextDelta",
        "ReasoningDelta",
        "ToolCallStart",
        "ToolCallArgumentsDelta",
        "CompletionDone",
        "BadRequestError",
        "ContextLengthExceededError",
        "ServerError",
        "StreamInterruptedError",
    ]:
        assert name in memory.__all__
    assert issubclass(memory.ContextLengthExceededError, memory.BadRequestError)
    assert issubclass(memory.BadRequestError, memory.ProviderStatusError)
    assert issubclass(memory.ServerError, memory.ProviderStatusError)
    assert issubclass(memory.StreamInterruptedError, memory.ProviderConnectionError)


def test_importing_the_library_loads_no_django_and_no_tokenizer() -> None:
    code = (
        "import sys, memory; "
        "assert not any(m == 'django' or m.startswith('django.') for m in sys.modules), 'django'; "
        "assert not {'openai', 'anthropic', 'httpx2'} & set(sys.modules), 'an SDK at import'; "
        "from memory.tokens import encodings; "
        "assert not encodings._loaded, 'an encoding was loaded at import time'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_factory_builds_each_of_the_three_types() -> None:
    assert type(create_memory()) is BasicMemory
    assert type(create_memory("basic")) is BasicMemory
    assert type(create_memory("compact")) is CompactionMemory
    background = create_memory("background", user_id="ann")
    assert type(background) is BackgroundMemory
    assert isinstance(background, CompactionBase)
    assert background.memory_type == "background"
    with pytest.raises(ValueError, match="unknown memory_type"):
        create_memory("vector")


async def test_a_subclass_implementing_only_compact_and_reset_works() -> None:
    class MyMemory(BaseMemory):
        async def compact(self, **kwargs):
            return None

        def reset(self):
            count = len(self._messages)
            self._messages.clear()
            return {"messages": count}

    mine = MyMemory()
    mine.set_system_prompt("sys")
    await mine.add_message({"role": "user", "content": "hello"})
    await mine.add_message({"role": "tool", "tool_call_id": "x", "content": "y" * 10})
    assert [m.role for m in mine.get_context()] == ["system", "user"]
    assert mine.estimate_context_tokens() > 0
    assert mine.get_memory_trace()["total_events"] == 3
    assert mine.reset() == {"messages": 1}
    assert mine.estimate_context_tokens() == mine.token_counter.context_tokens(mine.get_context())


def test_the_web_app_imports_only_the_librarys_public_packages() -> None:
    import ast
    from pathlib import Path

    public = {
        "memory",
        "memory.log",
        "memory.tokens",
        "memory.clients",
        "memory.agent",
        "memory.background",
    }
    web = Path(__file__).resolve().parents[2] / "motus_web"
    private = sorted(
        f"{path.relative_to(web.parent)}: {node.module}"
        for path in web.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and node.level == 0
        and (node.module or "").split(".")[0] == "memory"
        and node.module not in public
    )
    assert private == []
