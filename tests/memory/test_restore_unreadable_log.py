"""A log with no readable record: an empty one is a session that has logged
nothing yet; one holding only damage raises ``LogCorruptError`` naming its
lines, rather than restoring a memory that has forgotten everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import ChatMessage, CompactionMemory, LogCorruptError, SessionNotFoundError

DAMAGE = {
    "not JSON": (b'not json\n{"broken\n[1, 2]\n', [1, 2, 3]),
    "NUL bytes only": (b"\0" * 4096, [1]),
    "a first write cut short": (b'{"type": "session_meta", "session_id": "s1", "conf', [1]),
    "records without a type": (b'{"a": 1}\n\n{"b": 2}\n', [1, 3]),
}


@pytest.mark.parametrize("full_replay", [False, True])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_log_of_damaged_lines_only_raises_naming_them_and_is_left_as_it_was(
    tmp_path: Path, damage: str, full_replay: bool
) -> None:
    data, lines = DAMAGE[damage]
    path = tmp_path / "s1.jsonl"
    path.write_bytes(data)

    with pytest.raises(LogCorruptError, match="no record of session 's1' can be read") as raised:
        CompactionMemory.restore_from_log("s1", log_base_path=tmp_path, full_replay=full_replay)

    assert raised.value.line == lines[0]
    for line in lines:
        assert f"line {line}: " in str(raised.value)
    assert path.read_bytes() == data


@pytest.mark.parametrize("data", [b"", b"\n\n  \n"], ids=["0 bytes", "blank lines"])
async def test_an_empty_log_restores_to_an_empty_memory_that_goes_on_in_it(
    tmp_path: Path, data: bytes
) -> None:
    (tmp_path / "s1.jsonl").write_bytes(data)

    memory = CompactionMemory.restore_from_log("s1", log_base_path=tmp_path)
    assert memory.get_context() == []
    assert memory.restore_problems == []
    await memory.add_message(ChatMessage.user("Hello"))

    again = CompactionMemory.restore_from_log("s1", log_base_path=tmp_path)
    assert [m.text for m in again.get_context()] == ["Hello"]
    assert again.restore_problems == []


def test_a_missing_log_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFoundError):
        CompactionMemory.restore_from_log("s1", log_base_path=tmp_path)


async def test_damaged_lines_beside_a_readable_record_are_skipped_and_reported(
    tmp_path: Path,
) -> None:
    memory = CompactionMemory.restore_from_log
    path = tmp_path / "s1.jsonl"
    path.write_bytes(b"")
    await memory("s1", log_base_path=tmp_path).add_message(ChatMessage.user("Hello"))
    path.write_bytes(path.read_bytes() + b"not json\n")

    restored = memory("s1", log_base_path=tmp_path, full_replay=True)

    assert [m.text for m in restored.get_context()] == ["Hello"]
    assert [p.line for p in restored.restore_problems] == [3]
