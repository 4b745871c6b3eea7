"""The CLI tests' broker (broker_thread.BrokerThread) and `samsa(...)`, which runs a command as
`samsa.__main__.main([...])` and returns its exit code and what it printed."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.__main__ import main

# The test modules import helpers as top-level modules (pytest runs in importlib mode): this
# directory's broker_thread and the server tests' loopback and tls_certs.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "server")]

from broker_thread import BrokerThread  # noqa: E402
from loopback import broker_config  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[str]:
    """host:port of a PLAINTEXT broker shared by a test module."""
    thread = BrokerThread().start(broker_config(tmp_path_factory.mktemp("broker")))
    yield f"127.0.0.1:{thread.ports['PLAINTEXT']}"
    thread.stop()


@pytest.fixture
def samsa(capsys) -> Callable[..., tuple[int, str, str]]:
    """samsa("topics", "list", ...) -> (exit code, stdout, stderr) of `samsa topics list ...`;
    argparse's own exits (bad usage, --help) are exit codes too."""

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def stdin(monkeypatch):
    """stdin(b"lines") makes the next command read those bytes."""

    def feed(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    return feed


@pytest.fixture
def topic(broker, samsa, request):
    """A new topic of 3 partitions named after the test."""
    name = request.node.name.replace("[", "-").replace("]", "")[:60]
    code, _, err = samsa("topics", "create", name, "-p", "3", "-b", broker)
    assert code == 0, err
    return name
