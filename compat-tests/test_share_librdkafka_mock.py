"""librdkafka v2.15.0's share-consumer tests against its own mock cluster (0155-0158, 0182, 0183:
`TESTS=N test-runner -l -p1`), unchanged: they need no broker and run once. client_suites.py says
how; the suite comes from `bash scripts/fetch-suites.sh librdkafka` (skipped without it), and runs
only with SAMSA_COMPAT_LIBRDKAFKA_SUITE=1 (8 min, and it checks the client, not the broker).
"""

from __future__ import annotations

import pytest

import client_suites
from client_suites import LIBRDKAFKA_MOCK_TESTS, SuiteUnavailable


@pytest.fixture(scope="module")
def suite() -> None:
    client_suites.librdkafka_gate()
    try:
        client_suites.librdkafka_dir()
    except SuiteUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.slow
@pytest.mark.watchdog_s(client_suites.LIBRDKAFKA_TIMEOUT + 60)
@pytest.mark.parametrize("test", LIBRDKAFKA_MOCK_TESTS)
def test_librdkafka_share_mock_test(suite, test, tmp_path):
    outcome = client_suites.run_librdkafka(test, None, tmp_path)
    assert outcome.passed, outcome.describe()
