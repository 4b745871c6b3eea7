"""Streams groups (KIP-1071) through a real broker on loopback sockets: topology descriptions
(KIP-1331), as Kafka 4.4 answers without a description plugin."""

from __future__ import annotations

from loopback import Client, create_topic_request, run_broker
from group_requests import ApiVersions, E, groups_config

from samsa.wire.protocol import ApiKey, request_class

StreamsHeartbeat = request_class(ApiKey.STREAMS_GROUP_HEARTBEAT)
StreamsDescribe = request_class(ApiKey.STREAMS_GROUP_DESCRIBE)
DescriptionUpdate = request_class(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
NO_PLUGIN = "The broker has no streams group topology description plugin configured."


def join_request() -> object:
    topology = StreamsHeartbeat.Topology(epoch=0, subtopologies=[
        StreamsHeartbeat.Subtopology(subtopology_id="0", source_topics=["in"])])
    return StreamsHeartbeat(group_id="app", member_id="m-1", member_epoch=0, process_id="p1",
                            rebalance_timeout_ms=30_000, topology=topology, active_tasks=[], standby_tasks=[],
                            warmup_tasks=[])


def description() -> object:
    node = DescriptionUpdate.TopologyDescriptionNode
    return DescriptionUpdate.TopologyDescription(subtopologies=[
        DescriptionUpdate.TopologyDescriptionSubtopology(subtopology_id="0", nodes=[
            node(name="KSTREAM-SOURCE-0000000000", node_type=1, source_topics=["in"],
                 successors=["KSTREAM-SINK-0000000001"]),
            node(name="KSTREAM-SINK-0000000001", node_type=3, sink_topic="out")])])


def test_topology_description_is_never_asked_for_and_its_update_is_unsupported(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        served = {k.api_key: (k.min_version, k.max_version) for k in (await client.call(ApiVersions(), 0)).api_keys}
        assert served[ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE] == (0, 0)
        assert (await client.call(create_topic_request("in", 2), 4)).topics[0].error_code == E.NONE
        joined = await client.call(join_request(), 1)
        assert joined.error_code == E.NONE and joined.topology_description_required is False
        update = await client.call(DescriptionUpdate(group_id="app", member_id=joined.member_id, topology_epoch=0,
                                                     topology_description=description()), 0)
        assert (update.error_code, update.error_message) == (E.UNSUPPORTED_VERSION, NO_PLUGIN)
        # An unknown group or member is refused the same way: the plugin is checked first.
        unknown = await client.call(DescriptionUpdate(group_id="nope", member_id="m", topology_epoch=3,
                                                      topology_description=description()), 0)
        assert (unknown.error_code, unknown.error_message) == (E.UNSUPPORTED_VERSION, NO_PLUGIN)
        [asked] = (await client.call(StreamsDescribe(group_ids=["app"], include_topology_description=True), 1)).groups
        [not_asked] = (await client.call(StreamsDescribe(group_ids=["app"]), 1)).groups
        assert (asked.error_code, asked.topology_description_status, asked.topology_description) == (E.NONE, 1, None)
        assert (not_asked.topology_description_status, not_asked.topology_description) == (0, None)

    run_broker(groups_config(tmp_path), scenario)
