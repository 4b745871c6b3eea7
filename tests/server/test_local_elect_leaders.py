"""The single broker as its own controller answers ElectLeaders (kafka-leader-election) as Kafka 4's
KRaft controller does: every partition is led by its one, preferred replica, so none needs an
election; the answer's shape is ReplicationControlManager.electLeaders'."""

from __future__ import annotations

from loopback import Client, broker_config, create_topic_request, run_broker

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

ElectLeaders = request_class(ApiKey.ELECT_LEADERS)
NOT_NEEDED = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")


def results(answer) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
    return [(t.topic, [(p.partition_id, p.error_code, p.error_message) for p in t.partition_result])
            for t in answer.replica_election_results]


def test_elect_leaders_on_a_single_broker(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("e", partitions=2), 7)
        named = [ElectLeaders.TopicPartitions("e", [1, 2, 1]), ElectLeaders.TopicPartitions("none", [0])]
        for version, election_type in ((0, 0), (1, 0), (2, 1)):
            answer = await client.call(ElectLeaders(election_type=election_type, topic_partitions=named,
                                                    timeout_ms=1000), version)
            assert answer.error_code == ErrorCode.NONE
            # Every partition asked, in order, a repeat too.
            assert results(answer) == [
                ("e", [(1, *NOT_NEEDED), (2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as e-2"),
                       (1, *NOT_NEEDED)]),
                ("none", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as none")])]
        # None named: every topic, listed without the partitions that need no election.
        answer = await client.call(ElectLeaders(election_type=1, topic_partitions=None, timeout_ms=1000), 2)
        assert ("e", []) in results(answer) and all(not partitions for _, partitions in results(answer))
        empty = await client.call(ElectLeaders(election_type=7, topic_partitions=[], timeout_ms=1000), 2)
        assert (empty.error_code, results(empty)) == (ErrorCode.NONE, [])
        unknown = await client.call(ElectLeaders(election_type=7, topic_partitions=named[:1], timeout_ms=1000), 2)
        refused = (ErrorCode.INVALID_REQUEST, "Unknown election type 7")
        assert (unknown.error_code, results(unknown)) == (ErrorCode.INVALID_REQUEST, [("e", [(p, *refused) for p in (1, 2, 1)])])

    run_broker(broker_config(tmp_path), scenario)
