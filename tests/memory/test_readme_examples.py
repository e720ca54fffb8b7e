"""The Python examples of the README and docs/ run as written: each block, in a fresh interpreter,
in an empty folder (they write their logs and stores there), with no network."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCKS = [
    block
    for doc in DOCS
    for block in re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
]


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{n}" for n in range(len(BLOCKS))])
def test_a_readme_example_runs_as_written(code: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "every example prints what it shows"
