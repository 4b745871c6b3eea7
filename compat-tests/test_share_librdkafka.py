"""librdkafka v2.15.0's own share-consumer tests (issue 28), each a pytest test, against Samsa and
against Kafka 4.4 configured alike (client_suites.LIBRDKAFKA_BROKER, as librdkafka's trivup
configures Kafka): every test Kafka passes, Samsa must pass. Full mode (no -Q), one test number a
run (`TESTS=0171 test-runner -L -p1`); client_suites.py says how they run. Its mock tests are
test_share_librdkafka_mock.py's (a module of their own, so that pytest-xdist runs them beside these).

The suite comes from `bash scripts/fetch-suites.sh librdkafka` (skipped without it), and runs only
with SAMSA_COMPAT_LIBRDKAFKA_SUITE=1: about 40 min a broker on two cores, beyond CI's budget.
"""

from __future__ import annotations

import pytest

import client_suites
from client_suites import LIBRDKAFKA_TESTS, SuiteUnavailable


@pytest.fixture(scope="module")
def suite() -> None:
    client_suites.librdkafka_gate()
    try:
        client_suites.librdkafka_dir()
    except SuiteUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def share_broker(suite, broker_kind, module_broker_factory):
    """One broker for every test, as trivup runs the suite against one cluster."""
    return module_broker_factory(overrides=client_suites.LIBRDKAFKA_BROKER)


@pytest.mark.slow
@pytest.mark.watchdog_s(client_suites.LIBRDKAFKA_TIMEOUT + 60)
@pytest.mark.parametrize("test", LIBRDKAFKA_TESTS)
def test_librdkafka_share_test(share_broker, test, tmp_path):
    outcome = client_suites.run_librdkafka(test, share_broker.bootstrap, tmp_path)
    assert outcome.passed, outcome.describe()

