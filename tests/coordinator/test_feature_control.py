"""Feature updates as Kafka decides them (coordinator/feature_control.py). The messages are those
Kafka 4.4's broker (KRaft) and Kafka 3.9's (ZooKeeper mode) answered to the same updates."""

from samsa.coordinator.feature_control import (
    SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, metadata_changed, update_features, zk_update_features)
from samsa.coordinator.client_metrics import java_hash_order
from samsa.wire.errors import ErrorCode

# Kafka 4.4's ranges and default levels (node 0, as the compat tests' Kafka).
SUPPORTED = {"metadata.version": (7, 33), "kraft.version": (0, 1), "transaction.version": (0, 2),
             "group.version": (0, 1), "eligible.leader.replicas.version": (0, 1), "share.version": (0, 2),
             "streams.version": (0, 1)}
FINALIZED = {"metadata.version": 33, "kraft.version": 1, "transaction.version": 2, "group.version": 1,
             "eligible.leader.replicas.version": 1, "share.version": 2, "streams.version": 1}
FAILED = "Invalid update version {} for feature {}. "


def update(updates, finalized=None, supported=None):
    return update_features(FINALIZED if finalized is None else finalized, supported or SUPPORTED, 0, updates)


def error(updates, **kw):
    result = update(updates, **kw)
    assert result.error_code == ErrorCode.INVALID_UPDATE_VERSION
    return result.error_message


def test_an_upgrade_or_a_downgrade_within_the_range_is_applied():
    result = update({"share.version": (0, SAFE_DOWNGRADE), "group.version": (0, UNSAFE_DOWNGRADE)})
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    assert result.levels == {**FINALIZED, "share.version": 0, "group.version": 0}
    back = update({"share.version": (1, UPGRADE)}, finalized=result.levels)
    assert back.levels["share.version"] == 1
    assert update({"share.version": (2, UPGRADE)}).levels == FINALIZED  # the same level: fine


def test_invalid_updates_as_kafka_words_them():
    assert error({"share.version": (0, UPGRADE)}) == FAILED.format(0, "share.version") + (
        "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe "
        "downgrade.")
    assert error({"share.version": (3, UPGRADE)}) == FAILED.format(3, "share.version") + (
        "Local controller 0 only supports versions 0-2")
    assert error({"share.version": (-1, SAFE_DOWNGRADE)}) == FAILED.format(-1, "share.version") + (
        "A feature version cannot be less than 0.")
    assert error({"share.version": (1, 4)}) == FAILED.format(1, "share.version") + (
        "The controller does not support the given upgrade type.")
    assert error({"share.version": (1, 0)}) == FAILED.format(1, "share.version") + (
        "The controller does not support the given upgrade type.")
    assert error({"nope": (1, UPGRADE)}) == FAILED.format(1, "nope") + "Local controller 0 does not support this feature."
    assert error({"nope": (0, SAFE_DOWNGRADE)}) == FAILED.format(0, "nope") + "Feature nope not found."
    assert error({"kraft.version": (0, SAFE_DOWNGRADE)}) == FAILED.format(0, "kraft.version") + (
        "Can't downgrade the version of this feature.")
    assert error({"group.version": (1, SAFE_DOWNGRADE)}, finalized={**FINALIZED, "group.version": 0}) == (
        FAILED.format(1, "group.version") + "Can't downgrade to a newer version.")


def test_metadata_version_is_not_downgraded_past_a_change_of_the_metadata_records():
    prefix = "Unsupported metadata.version downgrade from 33 to {}. "
    assert error({"metadata.version": (32, SAFE_DOWNGRADE)}) == prefix.format(32) + (
        "Refusing to perform the requested downgrade because it might delete metadata information.")
    assert error({"metadata.version": (32, UNSAFE_DOWNGRADE)}) == prefix.format(32) + (
        "Unsafe metadata downgrade is not supported in this version.")
    assert error({"metadata.version": (34, UPGRADE)}) == FAILED.format(34, "metadata.version") + (
        "Local controller 0 only supports versions 7-33")
    assert update({"metadata.version": (33, UPGRADE)}).error_code == ErrorCode.NONE
    # 4.2-IV1 (29) to 4.2-IV0 (28): no change of the records between them
    assert not metadata_changed(29, 28) and metadata_changed(30, 29)
    assert update({"metadata.version": (28, SAFE_DOWNGRADE)}, finalized={**FINALIZED, "metadata.version": 29}
                  ).levels["metadata.version"] == 28


def test_a_dependency_on_metadata_version_is_checked_against_the_proposed_levels():
    low = {**FINALIZED, "metadata.version": 22, "eligible.leader.replicas.version": 0}
    assert error({"eligible.leader.replicas.version": (1, UPGRADE)}, finalized=low) == (
        FAILED.format(1, "eligible.leader.replicas.version")
        + "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23")
    together = update({"eligible.leader.replicas.version": (1, UPGRADE), "metadata.version": (23, UPGRADE)},
                      finalized=low)
    assert together.error_code == ErrorCode.NONE and together.levels["metadata.version"] == 23


def test_the_first_invalid_update_in_java_hashmap_order_is_the_error():
    # Kafka 4.4 reported metadata.version's error, not ELR's, for this pair.
    assert java_hash_order(["eligible.leader.replicas.version", "metadata.version"]) == [
        "metadata.version", "eligible.leader.replicas.version"]
    message = error({"share.version": (9, UPGRADE), "group.version": (9, UPGRADE)})
    assert message.startswith(FAILED.format(9, "group.version"))
    assert java_hash_order(["transaction.version", "nope"]) == ["nope", "transaction.version"]


def test_a_failed_request_changes_nothing():
    result = update({"share.version": (0, SAFE_DOWNGRADE), "nope": (1, UPGRADE)})
    assert result.error_code == ErrorCode.INVALID_UPDATE_VERSION and result.levels == FINALIZED


def test_zookeeper_mode_refuses_each_feature_as_kafka_3_9():
    errors, target = zk_update_features({}, {}, [
        ("transaction.version", 1, UPGRADE), ("nope", 1, UPGRADE), ("group.version", 0, SAFE_DOWNGRADE),
        ("kraft.version", 0, UPGRADE), ("share.version", 1, 5)])
    not_supported = "Could not apply finalized feature update because the provided feature is not supported."
    assert errors == {
        "nope": (ErrorCode.INVALID_REQUEST, not_supported),
        "transaction.version": (ErrorCode.INVALID_REQUEST, not_supported),
        "group.version": (ErrorCode.INVALID_REQUEST, "Can not delete non-existing finalized feature."),
        "kraft.version": (ErrorCode.INVALID_REQUEST, "Can not provide versionLevel: 0 less than 1 without setting "
                                                     "the SAFE downgradeType in the request."),
        "share.version": (ErrorCode.INVALID_REQUEST, "Received unknown upgrade type."),
    }
    order = list(errors)
    assert order.index("nope") < order.index("transaction.version") and target == {}  # as Kafka 3.9 answered


def test_zookeeper_mode_applies_what_its_brokers_support():
    errors, target = zk_update_features({"a": 2, "b": 1}, {"a": (1, 3)}, [
        ("a", 3, UPGRADE), ("b", 0, SAFE_DOWNGRADE)])
    assert errors == {"a": (ErrorCode.NONE, None), "b": (ErrorCode.NONE, None)} and target == {"a": 3}
    errors, _ = zk_update_features({"a": 2}, {"a": (1, 3)}, [("a", 2, UPGRADE)])
    assert errors["a"][1] == "Can not upgrade a finalized feature from existing versionLevel:2 to the same value."
    errors, _ = zk_update_features({"a": 2}, {"a": (1, 3)}, [("a", 1, UPGRADE)])
    assert errors["a"][1] == ("Can not downgrade finalized feature from existing versionLevel:2 to provided "
                              "versionLevel:1 without setting the downgradeType to SAFE in the request.")
