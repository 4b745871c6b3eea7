"""The layers' arrows point one way, over the whole tree (docs/architecture.md draws the same graph):

    wire/          the protocol: imports nothing of ours
    storage/       the log on disk: no trio, no server, no coordinator
    coordinator/   pure state machines (events and an explicit clock in, actions out): no trio, os,
                   socket or time (no I/O, no clock of its own), no server, no storage
    client/        the raw wire client (connections, framing, TLS, SASL, SCRAM): only wire of ours,
                   and of other projects only trio (and cryptography, for PKCS12 stores)
    server/        the trio shell: anything above, never a tool command, a pipeline or the
                   dispatcher of the `samsa` command. Inside it:
      handlers/    no zookeeper/, network/, broker.py or main.py: handlers know neither the
                   cluster mode nor the sockets (they have context.py's RequestContext)
      zookeeper/   imported only by broker.py and main.py; it imports no handlers/ or network/
      kraft/       KRaft broker mode: the same rules as zookeeper/ (and neither imports the other)
      network/     no metadata/, replication/, coordinators/ or zookeeper/
      broker.py    the composition root: imported by main.py alone (main.py by nothing)
    cli/           the tool commands: client and wire; storage (dump-log reads its file formats) and
                   coordinator (its record states); of the broker only its config parsing
                   (server/config/kafka_config.py), never its internals
    pipelines/     Spark jobs: nothing of ours (they reach a broker through Spark's Kafka connector)
    bench/         runs brokers (server/main.py) and times wire's codec: nothing else of ours
    tools/         generators of wire/messages/ and the docs, from the protocol's and the broker's
                   definitions: wire, storage, server; never cli, client or pipelines
    __main__.py    the `samsa` command: server/main.py, pipelines/clicks.py and cli/, nothing else

A Rule can also say what one part of a package may not import of another (`forbidden`, with
`except_for` naming an allowed surface inside it), and leave some of its layer's modules out of the
rule (`exempt`: the broker and the command may import ZooKeeper mode, the rest of server/ may not).

Every import counts, wherever it is written: at module level, inside a function (a deferred import
is still a dependency, only a later one), and under `if TYPE_CHECKING:` (a type-only import still
means the layer knows the other layer's classes; Kafka's `coordinator` knowing `storage.Log` by type
would let its code grow to depend on it). `importlib.import_module` with a literal string counts too;
an import built from a computed string (wire/protocol.py's `messages.<name>`) cannot be read here.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE = "samsa"
ROOT = Path(__file__).resolve().parent.parent  # the repository root is the package `samsa`


# Of the broker, cli/ may import its config parsing alone: Java properties files and Kafka's config
# definitions (the ssl.* configs' types and defaults, which a client's properties share), and how a
# config value prints.
BROKER_SURFACE = ("samsa.server.config.kafka_config",)


@dataclass(frozen=True)
class Rule:
    layer: str  # a package or module, "samsa.storage", "samsa.server.handlers", "samsa.__main__"
    forbidden: tuple[str, ...] = ()  # modules (and their submodules) it must not import
    only_ours: tuple[str, ...] | None = None  # if set, the only modules of ours it may import
    except_for: tuple[str, ...] = ()  # modules it may import all the same (inside a forbidden package)
    third_party: tuple[str, ...] | None = None  # if set, the only other projects' modules it may import
    exempt: tuple[str, ...] = ()  # modules (and packages) of the layer the rule does not apply to
    why: str = ""

    def breaks(self, target: str) -> bool:
        if any(_within(target, ok) for ok in self.except_for):
            return False
        if any(_within(target, f) for f in self.forbidden):
            return True
        if _within(target, PACKAGE):
            return self.only_ours is not None and not any(_within(target, ok) for ok in self.only_ours)
        if self.third_party is not None:
            top = target.split(".")[0]
            return top not in sys.stdlib_module_names and top != "__future__" and top not in self.third_party
        return False

    def files(self, root: Path) -> list[Path]:
        """The layer's modules: a package's, however deep, or the one module's."""
        path = root.joinpath(*self.layer.split(".")[1:])
        if path.is_dir():
            return sorted(p for p in path.rglob("*.py") if "node_modules" not in p.parts
                          and not any(_within(module_name(p, root), e) for e in self.exempt))
        module = path.with_suffix(".py")
        return [module] if module.is_file() else []


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
    Rule(
        "samsa.client",
        only_ours=("samsa.client", "samsa.wire"),
        third_party=("trio", "cryptography"),
        why="client imports only wire of ours, and of other projects only trio and cryptography",
    ),
    Rule(
        "samsa.server",
        forbidden=("samsa.cli", "samsa.pipelines", "samsa.__main__"),
        why="server imports no tool command, pipeline or the samsa command's dispatcher",
    ),
    # Inside server/: handlers answer requests without knowing the cluster mode or the sockets;
    # ZooKeeper mode is known to the broker (the composition root) and the command alone, and sits
    # beside the handlers, below the broker; nothing but the command imports the broker.
    Rule(
        "samsa.server.handlers",
        forbidden=("samsa.server.zookeeper", "samsa.server.network", "samsa.server.broker", "samsa.server.main"),
        why="handlers import no server.zookeeper, server.network, broker or main",
    ),
    Rule(
        "samsa.server",
        forbidden=("samsa.server.zookeeper",),
        exempt=("samsa.server.zookeeper", "samsa.server.broker", "samsa.server.main"),
        why="of server/, only broker.py and main.py import server.zookeeper",
    ),
    Rule(
        "samsa.server.zookeeper",
        forbidden=("samsa.server.handlers", "samsa.server.network", "samsa.server.broker", "samsa.server.main"),
        why="server.zookeeper imports no handlers, network, broker or main",
    ),
    # KRaft broker mode (process.roles=broker) plugs in as ZooKeeper mode does.
    Rule(
        "samsa.server.handlers",
        forbidden=("samsa.server.kraft",),
        why="handlers import no server.kraft: they do not know the cluster mode",
    ),
    Rule(
        "samsa.server",
        forbidden=("samsa.server.kraft",),
        exempt=("samsa.server.kraft", "samsa.server.broker", "samsa.server.main"),
        why="of server/, only broker.py and main.py import server.kraft",
    ),
    Rule(
        "samsa.server.kraft",
        forbidden=("samsa.server.handlers", "samsa.server.network", "samsa.server.zookeeper", "samsa.server.broker",
                   "samsa.server.main"),
        why="server.kraft imports no handlers, network, zookeeper, broker or main",
    ),
    Rule(
        "samsa.server.network",
        forbidden=("samsa.server.metadata", "samsa.server.replication", "samsa.server.coordinators",
                   "samsa.server.zookeeper", "samsa.server.broker", "samsa.server.main"),
        why="server.network imports no metadata, replication, coordinators, zookeeper, broker or main",
    ),
    Rule(
        "samsa.server",
        forbidden=("samsa.server.broker", "samsa.server.main"),
        exempt=("samsa.server.broker", "samsa.server.main"),
        why="nothing of server/ imports the broker or the command but the command",
    ),
    Rule(
        "samsa.cli",
        only_ours=("samsa.cli", "samsa.client", "samsa.wire", "samsa.storage", "samsa.coordinator", *BROKER_SURFACE),
        why="cli imports client, wire, storage, coordinator and of the broker only " + ", ".join(BROKER_SURFACE),
    ),
    Rule("samsa.pipelines", only_ours=("samsa.pipelines",), why="pipelines import nothing of ours"),
    Rule("samsa.bench", only_ours=("samsa.wire", "samsa.server.main"), why="bench imports only wire and server.main"),
    Rule(
        "samsa.tools",
        only_ours=("samsa.wire", "samsa.storage", "samsa.server"),
        why="tools import only wire, storage and server (the definitions they generate from)",
    ),
    Rule(
        "samsa.__main__",
        only_ours=("samsa.server.main", "samsa.pipelines.clicks", "samsa.cli"),
        why="the samsa command imports only server.main, pipelines.clicks and cli",
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
        for path in rule.files(root):
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
        assert rule.files(ROOT), rule.layer


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
    "client/__init__.py": "",
    "client/connection.py": "import ssl, struct\nimport trio\nfrom ..wire.protocol import encode_request\nfrom . import errors\n",
    "client/errors.py": "from ..wire.errors import ErrorCode\n",
    "server/__init__.py": "",
    "server/broker.py": "import trio\nfrom ..storage.log import Log\nfrom ..coordinator import group\n",
    "server/main.py": "import argparse\n",
    "server/config/__init__.py": "",
    "server/config/kafka_config.py": "from ...wire import codec\n",
    "server/zookeeper/__init__.py": "",
    "server/zookeeper/controller.py": "import kazoo\n",
    "server/network/__init__.py": "",
    "server/network/socket_server.py": "from ...client.connection import x\n",
    "server/network/listeners.py": "from .socket_server import Connection\n",
    "server/replication/__init__.py": "",
    "server/replication/replica_manager.py": "from ...client.connection import BrokerConnection\n",
    "server/handlers/__init__.py": "",
    "server/handlers/produce.py": "from ..context import CloseConnection\nfrom ..replication import replica_manager\n",
    "server/context.py": "",
    "cli/__init__.py": "",
    "cli/topics.py": "import trio\nfrom ..client.connection import x\nfrom ..wire.protocol import y\n",
    "cli/client_config.py": "from ..server.config.kafka_config import parse_properties\nfrom ..client import tls\n",
    "cli/dump_log.py": "from ..storage.log import Log\nfrom ..coordinator.group import G\n",
    "pipelines/__init__.py": "",
    "pipelines/clicks.py": "import pyspark\nfrom .spark import session\n",
    "pipelines/spark.py": "",
    "bench/run.py": "import load\nfrom samsa.wire import codec\nfrom samsa.server.main import main\n",
    "tools/gen_docs.py": "from samsa.server.config.kafka_config import x\nfrom samsa.storage import log\n",
    "__main__.py": "from .server import main\nfrom . import cli\nfrom .pipelines.clicks import main as clicks\n",
}

# A rule whose forbidden package has an allowed surface: what `except_for` is for.
SURFACE_RULE = Rule(
    "samsa.server.handlers",
    forbidden=("samsa.server.network",),
    except_for=("samsa.server.network.socket_server",),
    why="handlers import no server.network but socket_server",
)


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
        ("client/connection.py", "from ..server.network import socket_server\n", "samsa.server.network.socket_server"),
        ("client/errors.py", "from ..cli import CommandError\n", "samsa.cli"),
        ("client/errors.py", "import kazoo.client\n", "kazoo.client"),
        ("server/broker.py", "from ..cli import commands\n", "samsa.cli"),
        ("server/main.py", "def f():\n    from ..cli.topics import run\n", "samsa.cli.topics"),
        ("server/main.py", "from ..pipelines import clicks\n", "samsa.pipelines.clicks"),
        ("server/handlers/produce.py", "from ..zookeeper.controller import ZkController\n",
         "samsa.server.zookeeper.controller"),
        ("server/handlers/produce.py", "from ..zookeeper import controller\n", "samsa.server.zookeeper.controller"),
        ("server/handlers/produce.py", "from ..network.socket_server import ConnectionClosed\n",
         "samsa.server.network.socket_server"),
        ("server/handlers/produce.py", "from samsa.server import network\n", "samsa.server.network"),
        ("server/handlers/produce.py", "from ..broker import Broker\n", "samsa.server.broker"),
        ("server/network/listeners.py", "from ..replication import replica_manager\n",
         "samsa.server.replication.replica_manager"),
        ("server/zookeeper/controller.py", "from ..network.listeners import Listener\n", "samsa.server.network.listeners"),
        ("server/config/kafka_config.py", "from ..zookeeper.controller import ZkController\n",
         "samsa.server.zookeeper.controller"),
        ("server/replication/replica_manager.py", "from ..main import main\n", "samsa.server.main"),
        ("cli/topics.py", "from ..server.replication.replica_manager import Partition\n",
         "samsa.server.replication.replica_manager"),
        ("cli/topics.py", "from ..server.network import listeners\n", "samsa.server.network.listeners"),
        ("cli/client_config.py", "from samsa.server import broker\n", "samsa.server.broker"),
        ("pipelines/clicks.py", "from ..wire import records\n", "samsa.wire.records"),
        ("bench/run.py", "from samsa.server.broker import Broker\n", "samsa.server.broker"),
        ("bench/run.py", "from samsa.cli import topics\n", "samsa.cli.topics"),
        ("tools/gen_docs.py", "from samsa.cli.client import KafkaClient\n", "samsa.cli.client"),
        ("tools/gen_docs.py", "from samsa.client import connection\n", "samsa.client.connection"),
        ("__main__.py", "from .server.broker import Broker\n", "samsa.server.broker"),
        ("__main__.py", "from .wire import codec\n", "samsa.wire.codec"),
    ],
)
def test_checker_catches_a_wrong_arrow(tmp_path, path, source, imported):
    files = dict(GOOD)
    files[path] = files[path] + source
    found = violations(_tree(tmp_path, files))
    assert {(v.path, v.imported) for v in found} == {(path, imported)}  # by one rule or more
    assert path in str(found[0]) and imported in str(found[0])


def test_a_forbidden_package_s_allowed_surface(tmp_path):
    """`except_for` names what a layer may import of a package it may not import otherwise."""
    rules = (SURFACE_RULE,)
    files = dict(GOOD)
    files["server/handlers/produce.py"] += "from ..network.socket_server import ConnectionClosed\n"
    assert violations(_tree(tmp_path / "good", files), rules) == []
    files["server/handlers/produce.py"] += "from ..network.listeners import Listener\n"
    found = violations(_tree(tmp_path / "bad", files), rules)
    assert [(v.path, v.imported) for v in found] == [("server/handlers/produce.py", "samsa.server.network.listeners")]


def test_a_rule_s_exempt_modules_are_not_checked(tmp_path):
    """The broker and the command may import ZooKeeper mode; the rest of server/ may not."""
    files = dict(GOOD)
    files["server/broker.py"] += "from .zookeeper.controller import ZkController\n"
    files["server/main.py"] += "from .zookeeper import controller\n"
    assert violations(_tree(tmp_path / "good", files)) == []
    files["server/replication/replica_manager.py"] += "from ..zookeeper.controller import ZkController\n"
    found = violations(_tree(tmp_path / "bad", files))
    assert [(v.path, v.imported) for v in found] == [("server/replication/replica_manager.py",
                                                      "samsa.server.zookeeper.controller")]
