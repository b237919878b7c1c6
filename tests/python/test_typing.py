"""The type stubs match the extension module, and the package type-checks."""

from __future__ import annotations

import ast
import inspect
import pathlib
import subprocess
import sys

import pytest

import cairn
from cairn import _cairn

PACKAGE = pathlib.Path(cairn.__file__).parent


def stub_names() -> dict[str, set[str]]:
    """Top-level names of _cairn.pyi, and the methods/attributes of its classes."""
    tree = ast.parse((PACKAGE / "_cairn.pyi").read_text())
    names: dict[str, set[str]] = {"": set()}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[""].add(node.name)
        if isinstance(node, ast.ClassDef):
            names[node.name] = {
                n.name if isinstance(n, ast.FunctionDef) else n.target.id  # type: ignore[union-attr]
                for n in node.body
                if isinstance(n, ast.FunctionDef) or (isinstance(n, ast.AnnAssign))
            }
    return names


def public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stub_matches_extension() -> None:
    names = stub_names()
    assert names[""] == public(_cairn)
    for cls in set(names) - {""}:  # the classes
        assert names[cls] - {"__init__"} == public(getattr(_cairn, cls)), cls


def test_client_keywords_are_the_config_keys() -> None:
    from cairn import _config

    params = inspect.signature(cairn.Client).parameters
    keywords = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    # comm (an MPI communicator) chooses how the client opens; it is no key.
    assert "comm" in keywords
    assert sorted(k for k in keywords if k != "comm") == sorted(_config.KEYS)


def test_installed_package_is_typed() -> None:
    assert (PACKAGE / "py.typed").exists()
    assert (PACKAGE / "_cairn.pyi").exists()


def test_public_api_has_docstrings() -> None:
    for name in cairn.__all__:
        obj = getattr(cairn, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    assert inspect.getdoc(member), f"{name}.{attr}"


def test_mypy_strict() -> None:
    """`mypy --strict` on the installed package, the examples, the bench and these tests
    (when mypy is installed)."""
    pytest.importorskip("mypy")
    root = pathlib.Path(__file__).resolve().parents[2]
    for target in (["-p", "cairn"], [str(root / d) for d in ("examples/python", "bench/python", "tests/python")]):
        proc = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", *target],
            capture_output=True,
            text=True,
            cwd=str(root),
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
