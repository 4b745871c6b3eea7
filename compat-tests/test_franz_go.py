"""franz-go v1.22.3's kgo integration tests, the whole package, against Samsa and against Kafka 4.4,
each configured as franz-go's CI job for Apache Kafka configures Kafka (client_suites.FRANZ_GO_BROKER,
with its SASL_PLAINTEXT listener for SCRAM-SHA-256 and the user testuser:testpass), that listener
also offering OAUTHBEARER with Kafka's default unsecured validator (KGO_TEST_OAUTH_SEEDS, for
TestOAuthAuth): every test passes on both, but one that skips itself on both (SKIPPED). The
share-group, broker-side regex, SCRAM and OAUTHBEARER tests must pass, not skip (a broker without
what they need makes them skip). client_suites.py says how the package runs (TestShareGroupETL
alone, after the others; a test that failed, once more alone).

The test binary comes from `bash scripts/fetch-suites.sh franz-go` (skipped without it).
"""

from __future__ import annotations

import pytest

import client_suites
from client_suites import FRANZ_GO_TESTS, SuiteUnavailable
from compat_util import confluent_admin
from server_process import free_port

T = 30
SCRAM_USER, SCRAM_PASSWORD = "testuser", "testpass"

# Tests that skip themselves on both brokers here, and why.
SKIPPED = {
    # Kafka 4.4 still takes Produce v0-2 (KIP-896 kept them), and so does Samsa.
    "TestIssueProduceBrokerTooOldFailsRecords": "broker still takes produce v2",
}
# Must pass, not skip: share groups, the broker-side regex of KIP-848, SCRAM and OAUTHBEARER.
MUST_PASS = [*FRANZ_GO_TESTS, "Test848RegexBrokerResolves", "TestSCRAMAuth", "TestSCRAMAuthBadCredentials",
             "TestOAuthAuth"]
OAUTHBEARER_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


@pytest.fixture(scope="module")
def kgo(broker_kind, tmp_path_factory):
    """The package's verdicts against a broker with franz-go's CI settings and a SCRAM listener."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from conftest import BrokerPool

    try:
        client_suites.franz_go_binary()
        client_suites.franz_go_package_dir()
    except SuiteUnavailable as e:
        pytest.skip(str(e))
    pool = BrokerPool(tmp_path_factory, f"franz-go-{broker_kind}", broker_kind)
    try:
        broker = pool(start=False)
        sasl_port = free_port()
        broker.overrides.update({
            **client_suites.FRANZ_GO_BROKER,
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTHBEARER_LOGIN,
        })
        broker.start()
        admin = confluent_admin(broker.bootstrap)
        upsertion = UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), SCRAM_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsertion], request_timeout=T).values():
            assert future.result(T) is None
        yield client_suites.run_franz_go_package(
            broker.bootstrap, tmp_path_factory.mktemp("kgo"),
            {"KGO_TEST_SCRAM_SEEDS": f"127.0.0.1:{sasl_port}", "KGO_TEST_SCRAM": f"{SCRAM_USER}:{SCRAM_PASSWORD}",
             "KGO_TEST_OAUTH_SEEDS": f"127.0.0.1:{sasl_port}"})
    finally:
        pool.close()


@pytest.mark.watchdog_s(client_suites.FRANZ_GO_PACKAGE_TIMEOUT_S
                        + client_suites.FRANZ_GO_TIMEOUT_S * len(client_suites.FRANZ_GO_ALONE) + 120)
def test_no_kgo_test_fails(kgo):
    # v1.22.3's package has 156 top-level tests: fewer means it stopped early (a panic, the timeout).
    assert len(kgo.verdicts) >= 156, f"the package ran {len(kgo.verdicts)} tests (logs: {kgo.log_dir})"
    if kgo.flaky:  # each failed beside the others and passed alone (client_suites.run_franz_go_package)
        print(f"flaky, passed when run again alone: {kgo.flaky}")
    failed = {name: kgo.reasons[name] for name, verdict in kgo.verdicts.items() if verdict != "PASS"
              and not (verdict == "SKIP" and SKIPPED.get(name, "\0") in kgo.reasons[name])}
    assert not failed, f"{failed}\n(logs: {kgo.log_dir})"


def test_the_share_regex_and_scram_tests_pass(kgo):
    assert {name: kgo.verdicts.get(name) for name in MUST_PASS} == dict.fromkeys(MUST_PASS, "PASS"), kgo.log_dir
