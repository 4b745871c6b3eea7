"""wire/errors.py against the Errors enum of the kafka-clients jar it is generated from (tools/gen_errors.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from samsa.wire.errors import MESSAGES, RETRIABLE, ErrorCode

REPO = Path(__file__).resolve().parents[2]
def load_generator():
    spec = importlib.util.spec_from_file_location("gen_errors", REPO / "tools" / "gen_errors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def clients_jar() -> Path | None:
    try:
        return load_generator().clients_jar()
    except FileNotFoundError:
        return None


JAR = clients_jar()


@pytest.mark.needs_input(JAR is not None, "Kafka's kafka-clients jar in the kafka4 jar cache: run bash scripts/fetch-jars.sh kafka4")
def test_committed_module_is_what_the_generator_writes():
    assert JAR is not None
    fresh = load_generator().generate(JAR)
    assert (REPO / "wire" / "errors.py").read_text() == fresh, "wire/errors.py is stale: run python tools/gen_errors.py"


def test_every_code_has_a_message_and_retriable_ones_are_codes():
    assert set(MESSAGES) == {code.value for code in ErrorCode}
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and not ErrorCode.TOPIC_AUTHORIZATION_FAILED.retriable
    assert RETRIABLE <= set(ErrorCode)


def test_kafka_4_4_codes_and_retriable_ones_follow_the_exception_classes():
    # Codes Kafka 4.4 added after 4.3's table; retriable is RetriableException's subclasses, which
    # include InvalidMetadataException's (ReplicaNotAvailable, ElectionNotNeeded) and not
    # OffsetMovedToTieredStorage (an ApiException).
    assert ErrorCode.GROUP_DELETION_FAILED == 134 and ErrorCode.STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED == 135
    assert ErrorCode.CONTROLLER_ID_NOT_REGISTERED == 136
    assert ErrorCode.REPLICA_NOT_AVAILABLE.retriable and ErrorCode.ELECTION_NOT_NEEDED.retriable
    assert not ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE.retriable and not ErrorCode.NONE.retriable
