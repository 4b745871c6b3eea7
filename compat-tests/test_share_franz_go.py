"""franz-go v1.22.3's kgo share-group tests (issue 28), each a pytest test, against Samsa and
against Kafka 4.4 configured as franz-go's CI configures Kafka (share_suites.FRANZ_GO_BROKER): every
test Kafka passes, Samsa must pass. A test that skips itself (the broker does not advertise the
share APIs) fails here. share_suites.py says how they run.

The test binary comes from `bash scripts/fetch-suites.sh franz-go` (skipped without it).
"""

from __future__ import annotations

import pytest

import share_suites
from share_suites import FRANZ_GO_TESTS, SuiteUnavailable


@pytest.fixture(scope="module")
def share_broker(broker_kind, module_broker_factory):
    try:
        share_suites.franz_go_binary()
    except SuiteUnavailable as e:
        pytest.skip(str(e))
    return module_broker_factory(overrides=share_suites.FRANZ_GO_BROKER)


@pytest.mark.watchdog_s(share_suites.FRANZ_GO_TIMEOUT_S + 60)
@pytest.mark.parametrize("test", FRANZ_GO_TESTS)
def test_franz_go_share_test(share_broker, test, tmp_path):
    outcome = share_suites.run_franz_go(test, share_broker.bootstrap, tmp_path)
    assert outcome.passed, outcome.describe()
