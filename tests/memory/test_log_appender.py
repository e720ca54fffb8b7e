"""JSONL appends through kept descriptors: every line goes to the file the
path names now, whole, whoever else writes the file."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import orjson

from memory.log import appender
from memory.log.jsonl import JSONLLogStore


def _record(n: int, who: str = "p") -> dict[str, object]:
    return {"type": "message", "seq": n, "who": who, "content": "x" * 500}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_a_log_moved_aside_keeps_what_it_had_and_the_next_line_goes_to_the_path(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    store.append("s", _record(0))
    path = store.path_for("s")
    path.rename(tmp_path / "aside.jsonl")
    store.append("s", _record(1))
    assert [r["seq"] for r in _lines(tmp_path / "aside.jsonl")] == [0]
    assert [r["seq"] for r in _lines(path)] == [1]


def test_a_deleted_log_is_created_again(tmp_path: Path) -> None:
    store = JSONLLogStore(tmp_path / "logs")
    store.append("s", _record(0))
    path = store.path_for("s")
    path.unlink()
    path.parent.rmdir()
    store.append("s", _record(1))
    assert [r["seq"] for r in _lines(path)] == [1]


def test_lines_another_writer_adds_are_seen_and_a_torn_one_is_ended_first(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    store.append("s", _record(0))
    path = store.path_for("s")
    with path.open("ab") as other:  # another process: a whole line, then one cut short
        other.write(orjson.dumps(_record(1, "other")) + b"\n")
        other.write(orjson.dumps(_record(2, "other"))[:40])
    store.append("s", _record(3))
    lines = path.read_bytes().splitlines()
    assert [orjson.loads(lines[i])["seq"] for i in (0, 1, 3)] == [0, 1, 3]
    assert len(lines) == 4
    assert not lines[2].endswith(b"}")  # the torn line, ended by the next append


def test_two_stores_of_one_folder_share_the_file_without_losing_a_line(tmp_path: Path) -> None:
    first, second = JSONLLogStore(tmp_path), JSONLLogStore(tmp_path)
    for n in range(20):
        (first if n % 2 else second).append("s", _record(n))
    assert [r["seq"] for r in _lines(first.path_for("s"))] == list(range(20))


def test_no_more_descriptors_are_kept_than_the_limit(tmp_path: Path) -> None:
    store = JSONLLogStore(tmp_path)
    for n in range(appender.MAX_OPEN + 10):
        store.append(f"s{n}", _record(n))
    assert len(appender._open) <= appender.MAX_OPEN
    store.append("s0", _record(1))  # one whose descriptor was closed: opened again
    assert [r["seq"] for r in _lines(store.path_for("s0"))] == [0, 1]


def _append_in_child(folder: str, count: int) -> None:
    if appender._open:  # the parent's descriptors: its flock would not exclude the parent
        raise SystemExit(3)
    store = JSONLLogStore(folder)
    for n in range(count):
        store.append("s", _record(n, "child"))


def test_a_forked_child_and_its_parent_append_whole_lines(tmp_path: Path) -> None:
    store = JSONLLogStore(tmp_path)
    store.append("s", _record(0))  # the parent holds a descriptor when it forks
    child = multiprocessing.get_context("fork").Process(
        target=_append_in_child, args=(str(tmp_path), 300)
    )
    child.start()
    for n in range(1, 301):
        store.append("s", _record(n))
    child.join()
    assert child.exitcode == 0
    records = _lines(store.path_for("s"))  # every line parses: none interleaved
    assert sorted(r["seq"] for r in records if r["who"] == "p") == list(range(301))
    assert sorted(r["seq"] for r in records if r["who"] == "child") == list(range(300))
