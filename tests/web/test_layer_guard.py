"""A second web process on the in-memory channel layer refuses to start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

START = "import motus_web.asgi, sys; print('started', flush=True); sys.stdin.read()"


def web_process(lock: Path, **env: str) -> subprocess.Popen[str]:
    environ = {key: value for key, value in os.environ.items() if key != "REDIS_URL"}
    environ.update(MOTUS_IN_MEMORY_LAYER_LOCK=str(lock), **env)
    return subprocess.Popen(
        [sys.executable, "-c", START],
        env=environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_second_web_process_on_the_in_memory_layer_stops_with_the_fix(tmp_path: Path) -> None:
    lock = tmp_path / "layer.lock"
    first = web_process(lock)
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "started"

        second = web_process(lock)
        out, err = second.communicate(timeout=60)

        assert second.returncode != 0
        assert "started" not in out
        assert "Another web process on this machine already uses the in-memory channel" in err
        assert f"held by pid {first.pid}" in err
        assert "set REDIS_URL" in err
    finally:
        first.communicate("", timeout=60)
    # Once the first is gone, a new one starts.
    third = web_process(lock)
    out, _ = third.communicate("", timeout=60)
    assert third.returncode == 0
    assert out.strip() == "started"


def test_with_redis_several_web_processes_start(tmp_path: Path) -> None:
    lock = tmp_path / "layer.lock"
    redis = {"REDIS_URL": "redis://127.0.0.1:6379/15"}  # only configured, not reached
    first, second = web_process(lock, **redis), web_process(lock, **redis)
    answers = [process.communicate("", timeout=60) for process in (first, second)]
    outs = [out for out, _ in answers]
    assert outs == ["started\n", "started\n"], answers
    assert not lock.exists()
