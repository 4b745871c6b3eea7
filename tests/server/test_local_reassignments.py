"""The single broker as its own controller answers the reassignment APIs (kafka-reassign-partitions
sends them before moving replicas between log dirs): nothing under way, its own replica the only
valid target, as Kafka's KRaft controller validates one."""

from __future__ import annotations

from loopback import Client, broker_config, create_topic_request, run_broker

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

AlterPartitionReassignments = request_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
ListPartitionReassignments = request_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)


def test_reassignments_on_a_single_broker(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("r", partitions=2), 7)
        listed = await client.call(ListPartitionReassignments(timeout_ms=1000, topics=None), 0)
        assert (listed.error_code, listed.error_message, listed.topics) == (ErrorCode.NONE, None, [])
        targets = {0: [0], 1: [3], 2: [0]}
        answer = await client.call(AlterPartitionReassignments(timeout_ms=1000, topics=[
            AlterPartitionReassignments.ReassignableTopic(name="r", partitions=[
                AlterPartitionReassignments.ReassignablePartition(p, replicas) for p, replicas in targets.items()]),
            AlterPartitionReassignments.ReassignableTopic(name="none", partitions=[
                AlterPartitionReassignments.ReassignablePartition(0, None)])]), 0)
        assert answer.error_code == ErrorCode.NONE
        assert {(t.name, p.partition_index): (p.error_code, p.error_message)
                for t in answer.responses for p in t.partitions} == {
            ("r", 0): (ErrorCode.NONE, None),
            ("r", 1): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes broker 3, but no such broker is registered."),
            ("r", 2): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition r:2."),
            ("none", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named none.")}

    run_broker(broker_config(tmp_path), scenario)
