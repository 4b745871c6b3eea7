"""wire/errors.py against the error table it is generated from (tools/gen_errors.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from samsa.wire.errors import MESSAGES, RETRIABLE, ErrorCode

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO.parent / "shared" / "kafka-protocol" / "4.3.0" / "error-codes.tsv"


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_errors", REPO / "tools" / "gen_errors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.needs_input(TABLE.is_file(), f"Kafka's error-code table at {TABLE}")
def test_committed_module_is_what_the_generator_writes():
    fresh = load_generator().generate(TABLE)
    assert (REPO / "wire" / "errors.py").read_text() == fresh, "wire/errors.py is stale: run python tools/gen_errors.py"


def test_every_code_has_a_message_and_retriable_ones_are_codes():
    assert set(MESSAGES) == {code.value for code in ErrorCode}
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and not ErrorCode.TOPIC_AUTHORIZATION_FAILED.retriable
    assert RETRIABLE <= set(ErrorCode)
