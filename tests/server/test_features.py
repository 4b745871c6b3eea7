"""Feature levels (server/features.py) and UpdateFeatures (server/handlers/update_features.py): what
is finalized, kept in the metadata image across restarts, and what answers UNSUPPORTED_VERSION while
a feature is at level 0, as Kafka 4.4 answers (checked against its broker)."""

from loopback import Client, broker_config, run_broker

from samsa.server.features import CONSUMER_GROUPS, SHARE_GROUPS, STREAMS_GROUPS, BrokerFeatures
from samsa.server.handlers import ListenerType, load_handlers
from samsa.server.handlers.api_versions import api_keys
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

UpdateFeatures = request_class(ApiKey.UPDATE_FEATURES)
ApiVersions = request_class(ApiKey.API_VERSIONS)
ShareGroupHeartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
ConsumerGroupHeartbeat = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
ConsumerGroupDescribe = request_class(ApiKey.CONSUMER_GROUP_DESCRIBE)
DescribeShareGroupOffsets = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
AlterShareGroupOffsets = request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
SAFE_DOWNGRADE = 2


def test_share_version_1_is_finalized_by_default_as_in_kafka():
    features = BrokerFeatures.create()
    assert features.level("share.version") == 1 and features.supported["share.version"] == (0, 1)
    assert features.level("group.version") == 1
    assert features.level("streams.version") == 1 and features.supported["streams.version"] == (0, 1)
    assert features.epoch == 0


def test_levels_kept_in_the_image_replace_the_defaults_where_supported():
    features = BrokerFeatures.create({"share.version": 0, "group.version": 7, "nope": 1}, epoch=3)
    assert (features.level("share.version"), features.level("group.version"), features.epoch) == (0, 1, 3)
    assert not features.enabled(SHARE_GROUPS) and features.enabled(CONSUMER_GROUPS)


def test_finalize_tells_the_listeners_what_moved():
    features = BrokerFeatures.create()
    moved = []
    features.listeners.append(lambda *change: moved.append(change))
    features.finalize({**features.finalized, "share.version": 0}, 1)
    assert moved == [("share.version", 1, 0)] and features.epoch == 1


def test_the_apis_of_a_feature_are_advertised_whatever_its_level():
    gated = {h.api_key: h.feature for h in load_handlers().values() if h.feature is not None}
    assert gated == {**dict.fromkeys([76, 77, 78, 79, 90, 91, 92], SHARE_GROUPS),
                     **dict.fromkeys([68, 69], CONSUMER_GROUPS), **dict.fromkeys([88, 89, 93], STREAMS_GROUPS)}
    assert set(gated) <= {k.api_key for k in api_keys(ListenerType.BROKER)}


def update(*updates, validate_only=False):
    return UpdateFeatures(validate_only=validate_only, feature_updates=[
        UpdateFeatures.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind)
        for name, level, kind in updates])


async def api_versions(client):
    response = await client.call(ApiVersions(client_software_name="t", client_software_version="1"), 3)
    return response.finalized_features_epoch, {f.name: f.max_version_level for f in response.finalized_features}


def test_update_features_changes_levels_live_and_durably(tmp_path):
    config = broker_config(tmp_path)

    async def downgrade(port):
        client = await Client.connect(port)
        epoch, finalized = await api_versions(client)
        assert (epoch, finalized["share.version"], finalized["metadata.version"]) == (0, 1, 33)
        checked = await client.call(update(("share.version", 0, SAFE_DOWNGRADE), validate_only=True), 2)
        assert (checked.error_code, checked.error_message, checked.results) == (ErrorCode.NONE, None, [])
        assert await api_versions(client) == (epoch, finalized)  # validate-only: nothing changed
        done = await client.call(update(("share.version", 0, SAFE_DOWNGRADE), ("group.version", 0, SAFE_DOWNGRADE)), 1)
        assert [(r.feature, r.error_code, r.error_message) for r in done.results] == [
            ("share.version", 0, "NONE"), ("group.version", 0, "NONE")]
        epoch, finalized = await api_versions(client)
        assert epoch == 1 and "share.version" not in finalized and "group.version" not in finalized
        # Still advertised; answered UNSUPPORTED_VERSION, as Kafka 4.4 answers them.
        heartbeat = await client.call(ShareGroupHeartbeat(group_id="g", member_id="m" * 22, member_epoch=0,
                                                          subscribed_topic_names=["t"]), 1)
        assert (heartbeat.error_code, heartbeat.error_message) == (ErrorCode.UNSUPPORTED_VERSION, None)
        consumer = await client.call(ConsumerGroupHeartbeat(group_id="g", member_id="m" * 22, member_epoch=0,
                                                            rebalance_timeout_ms=1000, subscribed_topic_names=["t"]), 0)
        assert consumer.error_code == ErrorCode.UNSUPPORTED_VERSION
        described = await client.call(ConsumerGroupDescribe(group_ids=["g", "h"]), 0)
        assert [(g.group_id, g.error_code, g.error_message) for g in described.groups] == [
            ("g", ErrorCode.UNSUPPORTED_VERSION, None), ("h", ErrorCode.UNSUPPORTED_VERSION, None)]
        offsets = await client.call(DescribeShareGroupOffsets(groups=[
            DescribeShareGroupOffsets.DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=None)]), 0)
        assert [(g.group_id, g.error_code, g.topics) for g in offsets.groups] == [("g", ErrorCode.UNSUPPORTED_VERSION, [])]
        altered = await client.call(AlterShareGroupOffsets(group_id="g"), 0)
        assert (altered.error_code, altered.error_message) == (
            ErrorCode.UNSUPPORTED_VERSION, "The version of API is not supported.")

    async def after_restart(port):
        client = await Client.connect(port)
        epoch, finalized = await api_versions(client)
        assert epoch == 1 and "share.version" not in finalized
        upgraded = await client.call(update(("share.version", 1, 1)), 2)
        assert upgraded.error_code == ErrorCode.NONE
        epoch, finalized = await api_versions(client)
        assert (epoch, finalized["share.version"]) == (2, 1)
        heartbeat = await client.call(ShareGroupHeartbeat(group_id="g", member_id="m" * 22, member_epoch=0,
                                                          subscribed_topic_names=["t"]), 1)
        assert heartbeat.error_code != ErrorCode.UNSUPPORTED_VERSION

    run_broker(config, downgrade)
    run_broker(config, after_restart)


def test_an_invalid_update_fails_the_whole_request(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        node = 0 if config.node_id < 0 else config.node_id
        failed = await client.call(update(("group.version", 0, SAFE_DOWNGRADE), ("share.version", 2, 1)), 1)
        assert (failed.error_code, failed.error_message, failed.results) == (
            ErrorCode.INVALID_UPDATE_VERSION,
            "The update failed for all features since the following feature had an error: Invalid update version 2 "
            f"for feature share.version. Local controller {node} only supports versions 0-1", [])
        refused = await client.call(update(("metadata.version", 32, SAFE_DOWNGRADE)), 2)
        assert refused.error_message.endswith("Unsupported metadata.version downgrade from 33 to 32. Refusing to "
                                              "perform the requested downgrade because it might delete metadata "
                                              "information.")
        v0 = await client.call(UpdateFeatures(feature_updates=[UpdateFeatures.FeatureUpdateKey(
            feature="group.version", max_version_level=0, allow_downgrade=True)]), 0)
        assert v0.error_code == ErrorCode.INVALID_UPDATE_VERSION  # v0's AllowDowngrade: ignored, as by Kafka 4.4
        assert (await api_versions(client))[0] == 0

    config = broker_config(tmp_path)
    run_broker(config, scenario)


def test_update_features_needs_alter_on_the_cluster(tmp_path):
    config = broker_config(tmp_path, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer")

    async def scenario(port):
        client = await Client.connect(port)
        refused = await client.call(update(("share.version", 0, SAFE_DOWNGRADE)), 2)
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")

    run_broker(config, scenario)
