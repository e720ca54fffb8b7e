"""The memory tools read a session logged in the dashboard's database, from the event loop."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from memory import CompactionMemory, CompactionMemoryConfig
from motus_web.sessions.log_store import DatabaseLogStore


@pytest.mark.django_db(transaction=True)
async def test_the_memory_tools_search_and_read_a_database_log_from_a_live_agent_memory() -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="db-tools", token_threshold=300),
        compact_fn=lambda messages, system_prompt: "the user gave a passport number",
        log_store=DatabaseLogStore(),
        model_name="gpt-4o",
    )
    memory.set_system_prompt("Be brief.")
    await memory.add_message({"role": "user", "content": "Passport P-99812X. " + "word " * 300})
    await memory.add_message({"role": "assistant", "content": "Noted. " + "word " * 300})
    assert memory.compaction_count == 1
    tools = {fn.__name__: fn for fn in memory.build_tools()}
    try:
        found = json.loads(await tools["search_conversation_log"]("p-99812x"))
        summary = json.loads(await tools["read_compaction_summary"](-1))
    finally:
        # The writes ran in asgiref's sync thread: close its connection, as the
        # contract test does. (The tools read in an asyncio worker thread; on
        # SQLite its connection needs no closing.)
        await sync_to_async(connections.close_all)()
    assert [(hit["seq"], hit["role"]) for hit in found["results"]] == [(0, "user")]
    assert summary["summary"] == "the user gave a passport number"
    assert summary["compaction_number"] == 1
