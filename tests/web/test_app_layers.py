"""The web apps' layers: ``chat`` and ``dashboard`` never import each other;
``sessions`` (storage and every operation) and ``ui`` (what both UIs render
with) import neither UI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[2] / "motus_web"
UIS = {"motus_web.chat", "motus_web.dashboard"}


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it, relative imports made absolute."""
    package = ".".join(path.relative_to(WEB.parent).with_suffix("").parts[:-1])
    if path.name == "__init__.py":
        package = ".".join(path.relative_to(WEB.parent).parts[:-1])
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = node.module or ""
            prefix = ".".join(base) if node.level else ""
            full = ".".join(part for part in (prefix, module) if part)
            names.add(full)
            names.update(f"{full}.{alias.name}" for alias in node.names)
    return names


def reaches(path: Path, packages: set[str]) -> set[str]:
    return {
        name
        for name in imported(path)
        for package in packages
        if name == package or name.startswith(package + ".")
    }


@pytest.mark.parametrize(
    ("app", "forbidden"),
    [
        ("chat", {"motus_web.dashboard"}),
        ("dashboard", {"motus_web.chat"}),
        ("sessions", UIS),
        ("ui", UIS),
    ],
)
def test_an_app_never_imports_the_layers_beside_or_above_it(app: str, forbidden: set[str]) -> None:
    found = {
        str(path.relative_to(WEB)): sorted(reaches(path, forbidden))
        for path in sorted((WEB / app).rglob("*.py"))
        if reaches(path, forbidden)
    }
    assert found == {}


def test_the_check_sees_relative_and_absolute_imports() -> None:
    # The check itself reads both spellings of an import.
    source = WEB / "chat" / "views.py"
    assert "motus_web.sessions.access" in imported(source)
    assert "motus_web.chat.render" in imported(source)  # ``from .render import ...``
