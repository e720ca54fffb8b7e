"""``BackgroundMemory``: extraction off the critical path, recall, tools, restore and fork."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from memory import (
    BackgroundMemory,
    ChatMessage,
    CompactionMemoryConfig,
    ConfigurationError,
    InMemoryLogStore,
    LogPoint,
    ReActAgent,
    Scope,
    SQLiteLongTermStore,
)
from memory.background import Candidate, Excerpt, OfflineExtractor, Provenance
from memory.background.recall import OPEN
from tests.memory.conftest import FakeClient

ANN = Scope(user_id="ann")
FACTS = "I am allergic to peanuts.\nMy sister Jane lives in Boston.\nI moved to Lisbon in 2019."


def background(
    store: SQLiteLongTermStore, log: InMemoryLogStore | None = None, **kwargs: Any
) -> BackgroundMemory:
    kwargs.setdefault("scope", ANN)
    return BackgroundMemory(store=store, log_store=log or InMemoryLogStore(), **kwargs)


async def one_turn(memory: BackgroundMemory, said: str, answer: str = "Noted.") -> None:
    await memory.add_message(ChatMessage.user(said))
    await memory.add_message(ChatMessage.assistant(answer))


def records(memory: BackgroundMemory, kind: str) -> list[dict[str, Any]]:
    assert memory.log_store is not None
    return [r for r in memory.log_store.read(memory.session_id) if r["type"] == kind]


class BlockedExtractor:
    """Extracts like the offline extractor once ``release`` is set; counts its calls."""

    def __init__(self, fail: bool = False) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.fail = fail

    @property
    def name(self) -> str:
        return "blocked"

    async def extract(self, excerpt: Excerpt) -> list[Candidate]:
        self.started.set()
        await self.release.wait()
        if self.fail:
            raise RuntimeError("the extractor broke")
        return OfflineExtractor().extract_now(excerpt)


async def test_a_completed_turn_is_extracted_with_its_provenance() -> None:
    store = SQLiteLongTermStore()
    memory = background(store)
    await one_turn(memory, "Hello! " + FACTS + " What's new?")
    await memory.drain()
    texts = {m.text: m for m in store.memories(ANN)}
    assert set(texts) == {
        "I am allergic to peanuts.",
        "My sister Jane lives in Boston.",
        "I moved to Lisbon in 2019.",
    }
    link = texts["I moved to Lisbon in 2019."].provenance[0]
    assert (link.session_id, link.first_seq, link.extractor) == (memory.session_id, 0, "offline")
    assert texts["I moved to Lisbon in 2019."].kind == "event"
    (extraction,) = records(memory, "memory_extraction")
    assert extraction["trigger"] == "turn"
    assert (extraction["first_seq"], extraction["through_seq"]) == (0, 1)
    assert {w["action"] for w in extraction["written"]} == {"add"}


async def test_the_same_facts_in_three_sessions_are_one_memory_each_with_three_links() -> None:
    store = SQLiteLongTermStore()
    sessions = []
    for _ in range(3):
        memory = background(store)
        await one_turn(memory, FACTS)
        await memory.drain()
        sessions.append(memory.session_id)
    memories = store.memories(ANN)
    assert len(memories) == 3
    for remembered in memories:
        assert [p.session_id for p in remembered.provenance] == sessions


async def test_scopes_never_cross() -> None:
    store = SQLiteLongTermStore()
    ann = background(store)
    await one_turn(ann, FACTS)
    await ann.drain()
    bob = background(store, scope=Scope(user_id="bob"))
    await bob.add_message(ChatMessage.user("Where does my sister live? Am I allergic?"))
    assert bob.memory_block == ""
    assert store.search(Scope(user_id="bob"), "sister Boston peanuts") == []
    assert store.search(Scope(user_id="ann", agent_id="x"), "sister Boston") == []
    assert store.count(ANN) == 3


async def test_the_reply_does_not_wait_for_extraction_and_a_failure_is_recorded() -> None:
    store = SQLiteLongTermStore()
    extractor = BlockedExtractor(fail=True)
    memory = background(store, extractor=extractor)
    client = FakeClient(replies=["Got it.", "Still here."])
    agent = ReActAgent(client=client, model_name="gpt-4o", memory=memory)
    reply = await agent(FACTS)
    # The turn ended while the extractor is still blocked on its event.
    await asyncio.wait_for(extractor.started.wait(), 5)
    assert reply == "Got it."
    assert memory.extracting
    assert records(memory, "memory_extraction") == []
    extractor.release.set()
    await memory.drain()
    (failed,) = records(memory, "memory_extraction")
    assert failed["error"] == "RuntimeError: the extractor broke"
    assert failed["written"] == []
    assert store.count(ANN) == 0
    # The next turn works, and extracts again from where the failed one started.
    extractor.fail = False
    assert await agent("Thanks.") == "Still here."
    await memory.drain()
    last = records(memory, "memory_extraction")[-1]
    assert "error" not in last
    assert last["first_seq"] == 0
    assert store.count(ANN) == 3


async def test_a_slow_extractor_times_out_and_is_recorded() -> None:
    extractor = BlockedExtractor()
    memory = background(SQLiteLongTermStore(), extractor=extractor, extraction_timeout_s=0.05)
    await one_turn(memory, FACTS)
    await memory.drain()
    (failed,) = records(memory, "memory_extraction")
    assert "did not finish within 0.05 s" in failed["error"]


async def test_the_next_request_carries_what_an_earlier_session_learned() -> None:
    store = SQLiteLongTermStore()
    first = background(store)
    await one_turn(first, FACTS)
    await first.drain()
    client = FakeClient(replies=["In Boston."])
    second = background(store)
    agent = ReActAgent(
        client=client, model_name="gpt-4o", memory=second, system_prompt="You are kind."
    )
    await agent("Where does my sister live?")
    sent = client.requests[0].messages[0]
    assert sent.role == "system"
    assert sent.text.startswith("You are kind.\n\n" + OPEN)
    assert "My sister Jane lives in Boston." in sent.text
    (recall,) = records(second, "memory_recall")
    assert recall["block"] in sent.text
    assert recall["query"] == "Where does my sister live?"
    assert recall["tokens"] <= 2_000
    assert recall["tokens"] == second.token_counter.count(recall["block"])


async def test_the_block_keeps_to_its_budget_and_the_threshold_counts_it() -> None:
    store = SQLiteLongTermStore()
    for i in range(60):
        store.add(
            ANN,
            text=f"My friend number {i} lives in Porto and likes sailing boats {i}.",
            kind="fact",
            provenance=_link(),
        )
    memory = background(store, recall_budget_tokens=200, model_name="gpt-4o")
    plain = background(SQLiteLongTermStore(), recall_budget_tokens=200, model_name="gpt-4o")
    for m in (memory, plain):
        await m.add_message(ChatMessage.user("Who lives in Porto and likes sailing?"))
    block = memory.memory_block
    assert block
    assert memory.token_counter.count(block) <= 200
    assert 1 < block.count("\n- [") < 60
    # The block is in the estimate (as part of the instructions' message).
    extra = memory.estimate_context_tokens() - plain.estimate_context_tokens()
    assert extra >= memory.token_counter.count(block)


async def test_extraction_runs_before_a_compaction_folds_the_messages() -> None:
    store = SQLiteLongTermStore()
    config = CompactionMemoryConfig(token_threshold=400, auto_compact=False)
    memory = background(store, model_name="gpt-4o", config=config)
    chatter = "Well, that was another thing, you know. " * 40
    # Two requests in a row, no answer yet: no turn has completed.
    await memory.add_message(ChatMessage.user(FACTS + " " + chatter))
    await memory.add_message(ChatMessage.user("And please book me a table for two."))
    assert not memory.extracting
    await memory.compact()
    assert memory.compaction_count == 1
    assert memory.messages[0].text.startswith("This session is being continued")
    await memory.drain()
    (extraction,) = records(memory, "memory_extraction")
    assert (extraction["trigger"], extraction["first_seq"]) == ("compaction", 0)
    assert store.count(ANN) == 3


async def test_restore_and_state_at_show_the_block_each_request_carried() -> None:
    store = SQLiteLongTermStore()
    log = InMemoryLogStore()
    first = background(store, log)
    await one_turn(first, FACTS)
    await first.drain()
    second = background(store, log)
    second.set_system_prompt("Be brief.")
    await second.add_message(ChatMessage.user("Where does my sister live?"))
    seen_first = second.get_context()
    await second.add_message(ChatMessage.assistant("Boston."))
    await second.add_message(ChatMessage.user("Am I allergic to anything?"))
    seen_second = second.get_context()
    assert seen_first[0] != seen_second[0]  # a new block for the new request
    restored = BackgroundMemory.restore_from_log(second.session_id, log_store=log, store=store)
    assert restored.get_context() == seen_second
    assert restored.scope == ANN
    assert restored.state_at(LogPoint("before_message", 1)).get_context()[0] == seen_first[0]
    full = BackgroundMemory.restore_from_log(
        second.session_id, log_store=log, store=store, full_replay=True
    )
    assert full.get_context() == seen_second


async def test_a_fork_keeps_the_block_the_store_and_the_scope() -> None:
    store = SQLiteLongTermStore()
    log = InMemoryLogStore()
    first = background(store, log)
    await one_turn(first, FACTS)
    await first.drain()
    second = background(store, log)
    await second.add_message(ChatMessage.user("Where does my sister live?"))
    child = second.fork()
    assert child.get_context() == second.get_context()
    assert (child.store, child.scope) == (store, ANN)
    restored = BackgroundMemory.restore_from_log(child.session_id, log_store=log, store=store)
    assert restored.get_context() == second.get_context()
    assert restored.scope == ANN  # from the fork's own session_meta


async def test_the_agent_can_remember_recall_and_forget() -> None:
    store = SQLiteLongTermStore()
    memory = background(store)
    tools = {fn.__name__: fn for fn in memory.build_tools()}
    assert {"recall", "remember", "forget", "search_conversation_log"} <= set(tools)
    await memory.add_message(ChatMessage.user("Please remember my locker code is 4471."))
    added = _json(await tools["remember"]("The user's locker code is 4471.", kind="fact"))
    assert added["action"] == "add"
    again = _json(await tools["remember"]("The user's locker code is 4471."))
    assert (again["action"], again["id"]) == ("linked", added["id"])
    found = _json(await tools["recall"]("locker code"))
    assert [r["id"] for r in found["results"]] == [added["id"]]
    assert _json(await tools["remember"]("x", kind="opinion"))["status"] == "error"
    assert _json(await tools["forget"](added["id"], "wrong code"))["action"] == "forget"
    assert _json(await tools["recall"]("locker code"))["results"] == []
    assert _json(await tools["forget"](added["id"]))["status"] == "error"
    history = store.history(ANN, added["id"])
    assert [(v.action, v.status) for v in history] == [("add", "active"), ("forget", "forgotten")]
    written = [w for r in records(memory, "memory_extraction") for w in r["written"]]
    assert [w["action"] for w in written] == ["add", "linked", "forget"]
    assert {r["extractor"] for r in records(memory, "memory_extraction")} == {"agent"}


async def test_a_zero_budget_turns_recall_off() -> None:
    store = SQLiteLongTermStore()
    store.add(ANN, text="My sister Jane lives in Boston.", kind="fact", provenance=_link())
    memory = background(store, recall_budget_tokens=0)
    await memory.add_message(ChatMessage.user("Where does my sister live?"))
    assert memory.memory_block == ""
    assert records(memory, "memory_recall") == []


def _link() -> Provenance:
    return Provenance("seed", 0, 0, "test", "2025-01-01T00:00:00+00:00")


def _json(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    return data


async def test_an_answer_to_the_previous_turns_question_is_remembered_with_it() -> None:
    store = SQLiteLongTermStore()
    memory = background(store)
    await one_turn(memory, "We went to the memorial.", "How did your kids react to it?")
    await one_turn(memory, "They were awestruck and humbled.")
    await memory.drain()
    texts = {m.text for m in store.memories(ANN)}
    assert 'They were awestruck and humbled. (answering "How did your kids react to it?")' in texts


async def test_a_compaction_model_named_offline_means_the_offline_extractor() -> None:
    # The summariser's rule: "offline" names no model, so nothing is sent to the client.
    client = FakeClient(replies=["Noted."])
    config = CompactionMemoryConfig(compact_model_name="offline")
    memory = background(SQLiteLongTermStore(), config=config, client=client, model_name="gpt-4o")
    assert memory.extractor.name == "offline"
    await one_turn(memory, "My dog's name is Biscuit.")
    await memory.drain()
    (written,) = records(memory, "memory_extraction")
    assert written["extractor"] == "offline"
    assert "error" not in written
    assert client.requests == []


async def test_a_failing_extractors_message_is_bounded_in_its_record() -> None:
    class Quoting(BlockedExtractor):
        async def extract(self, excerpt: Excerpt) -> list[Candidate]:
            raise ValueError("could not read: " + excerpt.messages[0][1].text * 50)

    memory = background(SQLiteLongTermStore(), extractor=Quoting())
    await one_turn(memory, "My passport number is P4829173, please keep it.")
    await memory.drain()
    (failed,) = records(memory, "memory_extraction")
    assert failed["error"].startswith("ValueError: could not read: ")
    assert len(failed["error"]) < 300
    assert failed["error"].endswith("characters)")


def test_a_wrong_typed_scope_is_refused_at_construction() -> None:
    for scope in ("some-string", {"user_id": "ann"}, 42):
        with pytest.raises(ConfigurationError, match=r"scope must be a memory\.Scope"):
            BackgroundMemory(scope=scope, store=SQLiteLongTermStore())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="store must be a LongTermStore"):
        BackgroundMemory(scope=ANN, store="memories.sqlite3")  # type: ignore[arg-type]


async def test_without_a_store_memories_persist_beside_the_logs(tmp_path: Path) -> None:
    config = CompactionMemoryConfig(log_base_path=str(tmp_path))
    first = BackgroundMemory(scope=ANN, config=config)
    await one_turn(first, "I moved to Lisbon in 2019.")
    await first.drain()
    # Another instance (another process would do the same) recalls it.
    second = BackgroundMemory(scope=ANN, config=config)
    assert [h.memory.text for h in second.search("Lisbon")] == ["I moved to Lisbon in 2019."]
    assert (tmp_path / "long_term_memory.sqlite3").exists()


def test_without_a_store_or_a_log_folder_it_warns_once_at_construction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="memory.background"):
        memory = BackgroundMemory(user_id="ann")
        memory.recall("Lisbon")
        memory.recall("Porto")
    warned = [r for r in caplog.records if "lost when it ends" in r.getMessage()]
    assert len(warned) == 1
    assert "user=ann" in warned[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memory.background"):
        BackgroundMemory(user_id="ann", store=SQLiteLongTermStore())
    assert not caplog.records
