"""The C modules' type stubs (evloop/_arena.pyi, _chunk.pyi, _asyncio_core.pyi) against the
modules: every type, function and constant a module exports is in its stub, every method and
attribute of each of its types is in the stub's class, and the stub names nothing the module
lacks. The stubs are read with ast from the source tree beside these tests; the modules are
the installed ones."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set, Tuple

import pytest

import evloop  # noqa: F401  (the package adds Stats.as_dict, as users see it)
from evloop import _arena, _asyncio_core, _chunk

STUBS = Path(__file__).resolve().parents[1] / "evloop"


def _api(name: str) -> bool:
    """Whether a name is the module's own: not a dunder, not pybind11's bookkeeping."""
    return not (name.startswith("__") and name.endswith("__")) and not name.startswith(
        "_pybind11")


def _read_stub(stub: str) -> Tuple[Set[str], Dict[str, Set[str]]]:
    """The stub's top-level names, and each class's members; `from ._arena import ...` brings
    in what a type checker would (a star import: the names without a leading underscore)."""
    names: Set[str] = set()
    classes: Dict[str, Set[str]] = {}
    for node in ast.parse((STUBS / stub).read_text()).body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            classes[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            classes[node.name] |= {n.target.id for n in node.body
                                   if isinstance(n, ast.AnnAssign)
                                   and isinstance(n.target, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == "_arena":
            base_names, base_classes = _read_stub("_arena.pyi")
            for alias in node.names:
                if alias.name == "*":
                    names |= {n for n in base_names if not n.startswith("_")}
                    classes.update({k: v for k, v in base_classes.items()
                                    if not k.startswith("_")})
                else:
                    names.add(alias.asname or alias.name)
    return names, classes


@pytest.mark.parametrize("mod", [_arena, _chunk, _asyncio_core],
                         ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_each_stub_names_exactly_what_its_module_exports(mod):
    names, classes = _read_stub(mod.__name__.rsplit(".", 1)[1] + ".pyi")
    exported = {n for n in dir(mod) if _api(n)}
    assert sorted(exported - names) == [], "exported, missing from the stub"
    stale = names - exported
    if not hasattr(mod, "bench_run"):  # built without bench/: its kernels are absent
        stale = {n for n in stale if not n.startswith("bench_")}
    assert sorted(stale) == [], "in the stub, not in the module"
    for name in sorted(exported):
        obj = getattr(mod, name)
        if not isinstance(obj, type):
            continue
        members = {k for k in vars(obj) if _api(k)}
        stub_members = {k for k in classes[name] if _api(k)}
        assert sorted(members - stub_members) == [], f"{name}: missing from the stub"
        assert sorted(stub_members - members) == [], f"{name}: in the stub, not in the type"


@pytest.mark.parametrize("mod", [_arena, _chunk], ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_the_shared_event_bits_are_each_variants(mod):
    # evloop/_common.py keeps the fd event bits for the code that uses no variant (the
    # asyncio loop): they must be the C header's, as each variant module exports them.
    from evloop import _common
    for name in ("READABLE", "WRITABLE", "HANGUP", "ERROR"):
        assert getattr(_common, name) == getattr(mod, name), name
