"""A disk that fills while a JSONL log is appended: a clear error, no half record left."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from memory import LogError
from memory.log import LogProblem, jsonl
from memory.log.jsonl import JSONLLogStore

META = {"type": "session_meta", "session_id": "s", "version": 1}


def _message(seq: int, text: str) -> dict[str, object]:
    return {"type": "message", "seq": seq, "role": "user", "content": text}


@pytest.mark.parametrize("failure", ["short write", "ENOSPC after part"])
def test_a_write_cut_short_by_a_full_disk_leaves_the_log_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    store = JSONLLogStore(tmp_path)
    store.append("s", META)
    store.append("s", _message(1, "kept"))
    before = store.path_for("s").read_bytes()
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        written = real_write(fd, data[: len(data) // 2])  # the disk takes only half
        if failure == "ENOSPC after part":
            raise OSError(errno.ENOSPC, "No space left on device")
        return written

    monkeypatch.setattr(jsonl.os, "write", full_disk)
    refused = r"cannot append to .*s\.jsonl: .*(No space left|short write)"
    with pytest.raises(LogError, match=refused):
        store.append("s", _message(2, "x" * 10_000))
    monkeypatch.setattr(jsonl.os, "write", real_write)

    assert store.path_for("s").read_bytes() == before  # nothing half-written stays
    problems: list[LogProblem] = []
    assert [r.get("content") for r in store.read("s", problems)] == [None, "kept"]
    assert problems == []
    store.append("s", _message(2, "after"))  # the disk has room again
    assert [r.get("content") for r in store.read("s")] == [None, "kept", "after"]
