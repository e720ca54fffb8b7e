"""A name in ``compact_model_name`` that is registered names a summariser, not a model."""

from __future__ import annotations

import pytest

from memory import CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from memory.compaction.summariser import (
    OFFLINE,
    OfflineSummariser,
    Summary,
    SummaryRequest,
    register_summariser,
)

from .conftest import FakeClient, answer, user

LONG = "word " * 250  # about 250 tokens


class Headline:
    uses_model = False
    carries_ledger = False
    name = "headline"

    async def summarise(self, request: SummaryRequest) -> Summary:
        return Summary(f"headline of {len(request.messages)} messages", self.name)


register_summariser(Headline.name, Headline)


def memory_named(compactor: str, client: FakeClient) -> CompactionMemory:
    return CompactionMemory(
        config=CompactionMemoryConfig(
            session_id="s1", token_threshold=400, compact_model_name=compactor
        ),
        client=client,
        model_name="gpt-4o",
        log_store=InMemoryLogStore(),
    )


async def test_a_registered_name_summarises_without_asking_the_model() -> None:
    client = FakeClient(replies=["a model's summary"])
    memory = memory_named(Headline.name, client)
    assert isinstance(memory.summariser, Headline)
    for message in (user("first " + LONG), answer(LONG), user("and now?")):
        await memory.add_message(message)
    assert memory.compaction_count == 1
    assert "headline of" in memory.get_context()[0].text
    assert client.requests == []


def test_offline_is_registered_and_a_model_s_name_is_not() -> None:
    assert isinstance(memory_named(OFFLINE, FakeClient()).summariser, OfflineSummariser)
    assert memory_named("gpt-4o-mini", FakeClient()).summariser.name != OFFLINE


def test_a_name_registers_once() -> None:
    with pytest.raises(ValueError, match="'offline'"):
        register_summariser(OFFLINE, OfflineSummariser)
