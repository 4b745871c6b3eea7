"""The layers' arrows point one way: wire <- storage, coordinator <- server.

    wire/         the protocol: imports nothing of ours
    storage/      the log on disk: no trio, no server, no coordinator
    coordinator/  pure state machines (events and an explicit clock in, actions out): no trio, os,
                  socket or time (no I/O, no clock of its own), no server, no storage
    server/       the trio shell: may import all of the above

Every import counts, wherever it is written: at module level, inside a function (a deferred import
is still a dependency, only a later one), and under `if TYPE_CHECKING:` (a type-only import still
means the layer knows the other layer's classes; Kafka's `coordinator` knowing `storage.Log` by type
would let its code grow to depend on it). `importlib.import_module` with a literal string counts too;
an import built from a computed string (wire/protocol.py's `messages.<name>`) cannot be read here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE = "samsa"
ROOT = Path(__file__).resolve().parent.parent  # the repository root is the package `samsa`


@dataclass(frozen=True)
class Rule:
    layer: str  # a package, "samsa.storage"
    forbidden: tuple[str, ...] = ()  # modules (and their submodules) it must not import
    only_ours: tuple[str, ...] | None = None  # if set, the only modules of ours it may import
    why: str = ""

    def breaks(self, target: str) -> bool:
        if any(_within(target, f) for f in self.forbidden):
            return True
        if self.only_ours is not None and _within(target, PACKAGE):
            return not any(_within(target, ok) for ok in self.only_ours)
        return False


RULES = (
    Rule("samsa.wire", only_ours=("samsa.wire",), why="wire imports nothing of ours"),
    Rule(
        "samsa.storage",
        forbidden=("trio", "samsa.server", "samsa.coordinator"),
        why="storage imports no trio, server or coordinator",
    ),
    Rule(
        "samsa.coordinator",
        forbidden=("trio", "os", "socket", "time", "samsa.server", "samsa.storage"),
        why="coordinator imports no trio, os, socket, time, server or storage",
    ),
)


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    module: str
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module} imports {self.imported} ({self.why})"


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


@cache
def _is_module(name: str, root: Path) -> bool:
    """Whether `samsa.a.b` is a module or package in the tree at `root`."""
    if not _within(name, PACKAGE):
        return False
    rel = Path(*name.split(".")[1:]) if name != PACKAGE else Path()
    return (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file()


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in the file, relative ones resolved."""
    module = module_name(path, root)
    is_package = path.name == "__init__.py"
    text = path.read_text()
    tree = ast.parse(text, filename=str(path))
    # Walking every expression of the generated wire/messages/ costs seconds: imports are statements,
    # and only a file that names import_module or __import__ needs its expressions read.
    dynamic = "import_module" in text or "__import__" in text
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree) if dynamic else _statements(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = package[: len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from .. import server` imports the module samsa.server, not names of samsa.
            submodules = [f"{source}.{a.name}" for a in node.names if _is_module(f"{source}.{a.name}", root)]
            found.extend((node.lineno, name) for name in submodules or [source])
        elif (
            isinstance(node, ast.Call)
            and _called_name(node.func) in ("import_module", "importlib.import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def _statements(node: ast.AST):
    """Every statement, however deeply nested in functions, classes, ifs, trys and matches."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
            yield child
            yield from _statements(child)


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""


def violations(root: Path, rules: tuple[Rule, ...] = RULES) -> list[Violation]:
    found = []
    for rule in rules:
        layer_dir = root.joinpath(*rule.layer.split(".")[1:])
        for path in sorted(layer_dir.rglob("*.py")):
            module = module_name(path, root)
            for line, imported in imports_of(path, root):
                if rule.breaks(imported):
                    found.append(Violation(str(path.relative_to(root)), line, module, imported, rule.why))
    return found


def test_every_arrow_points_the_right_way():
    found = violations(ROOT)
    assert not found, "imports against the layering:\n" + "\n".join(map(str, found))


def test_every_layer_has_modules():
    """A renamed directory would make its rule check nothing."""
    for rule in RULES:
        layer_dir = ROOT.joinpath(*rule.layer.split(".")[1:])
        assert any(layer_dir.glob("*.py")), rule.layer


# The checker itself, on a small synthetic tree.


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


GOOD = {
    "wire/__init__.py": "",
    "wire/codec.py": "import struct\nfrom . import records\n",
    "wire/records.py": "from .codec import x\n",
    "wire/messages/__init__.py": "",
    "wire/messages/fetch.py": "from ..codec import x\nfrom importlib import import_module\n",
    "storage/__init__.py": "",
    "storage/log.py": "import os\nfrom ..wire.records import x\nfrom samsa.wire import codec\n",
    "coordinator/__init__.py": "",
    "coordinator/group.py": "import logging, uuid\nfrom ..wire.errors import ErrorCode\n",
    "server/__init__.py": "",
    "server/broker.py": "import trio\nfrom ..storage.log import Log\nfrom ..coordinator import group\n",
}


def test_checker_passes_a_clean_tree(tmp_path):
    assert violations(_tree(tmp_path, GOOD)) == []


@pytest.mark.parametrize(
    ("path", "source", "imported"),
    [
        ("wire/records.py", "from ..storage import log\n", "samsa.storage.log"),
        ("wire/messages/fetch.py", "from ...server.broker import Broker\n", "samsa.server.broker"),
        ("wire/codec.py", "from .. import coordinator\n", "samsa.coordinator"),
        ("wire/codec.py", "import samsa.storage.log\n", "samsa.storage.log"),
        ("storage/log.py", "def f():\n    import trio\n", "trio"),
        ("storage/log.py", "from samsa.coordinator.group import G\n", "samsa.coordinator.group"),
        (
            "storage/log.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..server.broker import Broker\n",
            "samsa.server.broker",
        ),
        ("coordinator/group.py", "import time\n", "time"),
        ("coordinator/group.py", "from os import path\n", "os"),
        ("coordinator/group.py", "import os.path\n", "os.path"),
        ("coordinator/group.py", "import socket\n", "socket"),
        ("coordinator/group.py", "from trio import sleep\n", "trio"),
        ("coordinator/group.py", "from ..storage import log\n", "samsa.storage.log"),
        ("coordinator/group.py", "import importlib\nimportlib.import_module('samsa.server.a')\n", "samsa.server.a"),
    ],
)
def test_checker_catches_a_wrong_arrow(tmp_path, path, source, imported):
    files = dict(GOOD)
    files[path] = files[path] + source
    found = violations(_tree(tmp_path, files))
    assert [(v.path, v.imported) for v in found] == [(path, imported)]
    assert path in str(found[0]) and imported in str(found[0])
