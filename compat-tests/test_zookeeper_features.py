"""UpdateFeatures in a ZooKeeper cluster: a Samsa broker answers as Kafka 3.9 in ZooKeeper mode does.
A ZooKeeper-mode broker supports no feature, so its controller refuses every update, each feature on
its own (INVALID_REQUEST, Kafka 3.9's KafkaController messages), and a broker that is not the
controller answers NOT_CONTROLLER. Each broker alone in its chroot is its cluster's controller."""

from __future__ import annotations

import pytest
from compat_util import wait_for
from wire_client import WireClient, metadata_controller

from server_process import HOST
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

pytest.importorskip("kazoo.client")

UpdateFeatures = request_class(ApiKey.UPDATE_FEATURES)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
T = 60
# {case: [(feature, level, upgrade type)]}; v0 has AllowDowngrade (any type but UPGRADE) instead.
CASES = {
    "upgrade": [("group.version", 1, UPGRADE)],
    "metadata-version": [("metadata.version", 21, UPGRADE)],
    "delete": [("share.version", 0, SAFE_DOWNGRADE)],
    "delete-unsafe": [("share.version", 0, UNSAFE_DOWNGRADE)],
    "level-0-as-an-upgrade": [("kraft.version", 0, UPGRADE)],
    "negative": [("group.version", -1, SAFE_DOWNGRADE)],
    "unknown-upgrade-type": [("group.version", 1, 5)],
    "empty-name": [("", 1, UPGRADE)],
    "several": [("transaction.version", 1, UPGRADE), ("nope", 1, UPGRADE), ("group.version", 0, SAFE_DOWNGRADE),
                ("streams.version", 1, UPGRADE), ("share.version", 2, UPGRADE)],
    "none": [],
}


def answer(port: int, updates, version: int) -> tuple:
    request = UpdateFeatures(validate_only=version >= 1, feature_updates=[
        UpdateFeatures.FeatureUpdateKey(feature=name, max_version_level=level,
                                        upgrade_type=kind if version >= 1 else UPGRADE,
                                        allow_downgrade=version == 0 and kind != UPGRADE)
        for name, level, kind in updates])
    if version == 0 and any(kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE) for _, _, kind in updates):
        return ()  # not expressible at v0
    with WireClient(HOST, port) as client:
        response = client.call(request, version)
    return (response.error_code, response.error_message,
            [(r.feature, r.error_code, r.error_message) for r in response.results])


def test_update_features_is_refused_as_kafka_39_refuses_it(kafka39_factory):
    """Kafka 3.9 alone in one chroot, a Samsa broker alone in another: both their cluster's
    controller, both answer alike; a second Samsa broker in Kafka's cluster answers NOT_CONTROLLER."""
    zk = kafka39_factory.zookeeper()
    kafka = kafka39_factory.kafka39(zk.connect + "/kafka/features-kafka", overrides={"broker.id": 0})
    samsa = kafka39_factory(overrides={"zookeeper.connect": zk.connect + "/kafka/features-samsa", "broker.id": 0})
    for kind, broker in (("Kafka", kafka), ("Samsa", samsa)):
        wait_for(lambda b=broker: metadata_controller(b.port) == 0, T, what=f"{kind} to be its cluster's controller")
    for version in (1, 0):
        for case, updates in CASES.items():
            expected = answer(kafka.port, updates, version)
            assert answer(samsa.port, updates, version) == expected, (case, version)
            if updates and expected:
                assert {code for _, code, _ in expected[2]} == {ErrorCode.INVALID_REQUEST}, (case, version)
    other = kafka39_factory(overrides={"zookeeper.connect": zk.connect + "/kafka/features-kafka", "broker.id": 1})
    wait_for(lambda: metadata_controller(other.port) == 0, T, what="Samsa to learn Kafka's controller")
    assert answer(other.port, CASES["upgrade"], 1) == (
        ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.", [])
