"""A session state's turn units: one pair per turn unit, the same values as per message."""

from __future__ import annotations

import asyncio
from typing import Any

from memory import CompactionMemory


def test_the_messages_of_one_turn_unit_share_one_unit_pair() -> None:
    memory = CompactionMemory(model_name="gpt-4o")
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        for i in range(3)
    ]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Find flights to Zürich."},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": "none"} for i in range(3)),
        {"role": "assistant", "content": "There are none."},
    ]

    async def feed() -> None:
        for message in messages:
            await memory.add_message(message)

    asyncio.run(feed())
    state = memory.get_session_state()
    units = state.units
    assert len(units) == len(state.messages) == 6
    # The call and its three results are one unit: one list, so a long
    # context's snapshot holds a list per unit, not per message.
    assert units[1] is units[2] is units[3] is units[4]
    assert len({id(pair) for pair in units}) == len({tuple(pair) for pair in units})
    restored = CompactionMemory.restore(type(state).from_dict(state.to_dict()))
    assert restored.get_session_state().units == units
