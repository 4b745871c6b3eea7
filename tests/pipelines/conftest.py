"""The pipelines' tests: a real broker (tests/cli/broker_thread.BrokerThread) for their clients."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "cli"), str(HERE.parent / "server")]

from broker_thread import BrokerThread  # noqa: E402
from loopback import broker_config  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[str]:
    """host:port of a PLAINTEXT broker shared by a test module."""
    thread = BrokerThread().start(broker_config(tmp_path_factory.mktemp("broker")))
    yield f"127.0.0.1:{thread.ports['PLAINTEXT']}"
    thread.stop()
