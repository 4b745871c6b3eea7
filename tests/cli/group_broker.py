"""A module's broker for the CLI tests that use groups: `from group_broker import broker` in a test
module replaces conftest's broker with one whose groups form at once (no initial rebalance delay)
and whose __consumer_offsets has 5 partitions, not 50 (the first group is ready sooner)."""

from __future__ import annotations

import pytest
from broker_thread import BrokerThread
from group_requests import groups_config


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    thread = BrokerThread().start(groups_config(tmp_path_factory.mktemp("broker")))
    yield f"127.0.0.1:{thread.ports['PLAINTEXT']}"
    thread.stop()
