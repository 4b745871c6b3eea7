"""librdkafka v2.15.0's whole broker suite (issue 29): every test number of tests/test.c with an
entry that needs a broker (client_suites.librdkafka_broker_tests(), less the share tests, which
test_share_librdkafka.py runs), each a pytest test, against Samsa and against Kafka 4.4 configured
alike (client_suites.LIBRDKAFKA_BROKER, as trivup configures Kafka, but one broker): each entry
passes or skips itself (saying why: SSL, SASL, a second broker's JMX), but those of FAILS_ON_BOTH,
which fail on Kafka 4.4 in this configuration too. The "noautocreate" scenario's tests (two of
0045's, 0107, 0111) run against a broker of their own that creates no topic by itself. Full mode
(no -Q), one test number a run; client_suites.py says how they run.

The suite comes from `bash scripts/fetch-suites.sh librdkafka` (skipped without it), and runs only
with SAMSA_COMPAT_LIBRDKAFKA_SUITE=all: one test number at a time, its test times add up to about
100 min a broker on two shared cores. `python compat-tests/client_suites.py librdkafka all
--bootstrap HOST:PORT --jobs 3` runs it against a broker already running (35 min), and prints each
entry's state.
"""

from __future__ import annotations

import pytest

import client_suites
from client_suites import LIBRDKAFKA_BROKER, LIBRDKAFKA_SCENARIOS, LIBRDKAFKA_TESTS, SuiteUnavailable

# Entries that fail on Kafka 4.4 as on Samsa here (compat-tests/README.md has the figures): what
# trivup's cluster has and this one has not.
FAILS_ON_BOTH = {
    # trivup's cluster has three brokers: these tests create their topics with replication factor 3
    # (test_create_topic(..., 3)), which one broker refuses, Kafka and Samsa alike
    # (INVALID_REPLICATION_FACTOR, "only 1 broker(s) are registered").
    name: "replication factor 3" for name in ("0098_consumer_txn", "0101_fetch_from_follower", "0103_transactions",
                                              "0107_topic_recreate", "0111_delay_create_topics")
}


def _tests(scenario: str) -> list[str]:
    try:
        return [t for t in client_suites.librdkafka_broker_tests(scenario) if t not in LIBRDKAFKA_TESTS]
    except SuiteUnavailable:
        return []  # the suite fixture skips; no parameters to collect


@pytest.fixture(scope="module")
def suite() -> None:
    client_suites.librdkafka_gate(whole=True)
    try:
        client_suites.librdkafka_dir()
    except SuiteUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def suite_broker(suite, broker_kind, module_broker_factory):
    """One broker for every test of the default scenario, as trivup runs the suite against one
    cluster."""
    return module_broker_factory(overrides=LIBRDKAFKA_BROKER)


@pytest.fixture(scope="module")
def noautocreate_broker(suite, broker_kind, module_broker_factory):
    return module_broker_factory(overrides={**LIBRDKAFKA_BROKER, **LIBRDKAFKA_SCENARIOS["noautocreate"]})


def _check(outcome: client_suites.Outcome) -> None:
    failed = {name: state for name, state in outcome.states.items()
              if state not in ("PASSED", "SKIPPED") and name not in FAILS_ON_BOTH}
    assert outcome.states and not failed, f"{failed}\n{outcome.describe()}"


@pytest.mark.slow
@pytest.mark.watchdog_s(client_suites.LIBRDKAFKA_TIMEOUT + 60)
@pytest.mark.parametrize("test", _tests("default"))
def test_librdkafka_broker_test(suite_broker, test, tmp_path):
    _check(client_suites.run_librdkafka(test, suite_broker.bootstrap, tmp_path))


@pytest.mark.slow
@pytest.mark.watchdog_s(client_suites.LIBRDKAFKA_TIMEOUT + 60)
@pytest.mark.parametrize("test", _tests("noautocreate"))
def test_librdkafka_noautocreate_test(noautocreate_broker, test, tmp_path):
    _check(client_suites.run_librdkafka(test, noautocreate_broker.bootstrap, tmp_path, scenario="noautocreate"))
