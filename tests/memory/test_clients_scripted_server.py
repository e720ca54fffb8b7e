"""The scripted model server as a reusable tool: its script, its fallbacks, its CLI."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memory import ChatMessage, OpenAIChatClient, ServerError
from memory.testing.scripted_server import ScriptedReply, ScriptedServer, load_script

ROOT = Path(__file__).resolve().parents[2]


async def test_each_api_consumes_its_own_script_in_order() -> None:
    with ScriptedServer(
        openai=[{"text": "first"}, {"text": "second"}], anthropic=[{"text": "other"}]
    ) as server:
        async with OpenAIChatClient(server.openai_base_url, max_retries=0) as client:
            replies = [
                (await client.create(model="m", messages=[ChatMessage.user(q)])).message.content
                for q in ("a", "b")
            ]
            with pytest.raises(ServerError, match="the openai script is used up"):
                await client.create(model="m", messages=[ChatMessage.user("c")])
    assert replies == ["first", "second"]
    assert [r.body["messages"][0]["content"] for r in server.requests_for("openai")] == [
        "a",
        "b",
        "c",
    ]
    assert [r.text for r in server.scripts["anthropic"]] == ["other"]


async def test_the_echo_fallback_answers_with_the_last_user_text() -> None:
    with ScriptedServer(fallback="echo") as server:
        async with OpenAIChatClient(server.openai_base_url) as client:
            done = await client.create(
                model="m", messages=[ChatMessage.user("ping"), ChatMessage.assistant("pong")]
            )
    assert done.message.content == "echo: ping"


def test_a_script_file_is_checked_when_read(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"openai": [{"text": "hi", "usage": {"input_tokens": 3}}]}))
    assert load_script(path) == {
        "openai": [ScriptedReply(text="hi", usage={"input_tokens": 3})],
        "anthropic": [],
    }
    path.write_text(json.dumps({"openai": [{"txet": "hi"}]}))
    with pytest.raises(ValueError, match="unknown scripted reply fields"):
        load_script(path)
    path.write_text(json.dumps({"openai": [{"error": "teapot"}]}))
    with pytest.raises(ValueError, match="unknown error 'teapot'"):
        load_script(path)
    path.write_text(json.dumps({"gemini": []}))
    with pytest.raises(ValueError, match="keys"):
        load_script(path)


def test_it_runs_from_the_command_line(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"openai": [{"text": "scripted hello"}]}))
    command = [sys.executable, "-m", "memory.testing.scripted_server", "--port", "0"]
    process = subprocess.Popen(
        [*command, "--script", str(script), "--api-key", "k", "--strict"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("OpenAI base_url:"), line
        first, second = asyncio.run(ask_twice(line.split()[-1]))
        assert first == "scripted hello"
        assert second == "echo: again"  # the CLI falls back to echo
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
        if process.stdout is not None:
            process.stdout.close()


async def ask_twice(base_url: str) -> tuple[object, object]:
    async with OpenAIChatClient(base_url, api_key="k") as client:
        first = await client.create(model="m", messages=[ChatMessage.user("hi")])
        second = await client.create(model="m", messages=[ChatMessage.user("again")])
    return first.message.content, second.message.content
