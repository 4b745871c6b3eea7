"""Classic consumer group requests for the server tests (test_groups, test_acls): a broker
configured for quick groups, the requests with their usual fields, and a one-member group joined
and synced."""

from __future__ import annotations

from loopback import Client, broker_config

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

E = ErrorCode
FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
JoinGroup = request_class(ApiKey.JOIN_GROUP)
SyncGroup = request_class(ApiKey.SYNC_GROUP)
Heartbeat = request_class(ApiKey.HEARTBEAT)
LeaveGroup = request_class(ApiKey.LEAVE_GROUP)
OffsetCommit = request_class(ApiKey.OFFSET_COMMIT)
OffsetFetch = request_class(ApiKey.OFFSET_FETCH)
DescribeGroups = request_class(ApiKey.DESCRIBE_GROUPS)
ListGroups = request_class(ApiKey.LIST_GROUPS)
DeleteGroups = request_class(ApiKey.DELETE_GROUPS)
ApiVersions = request_class(ApiKey.API_VERSIONS)

SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x05topic\xff\xff\xff\xff"


def groups_config(tmp_path, **overrides):
    return broker_config(tmp_path, group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=5, **overrides)


def join_request(member_id: str = "", instance_id: str | None = None, group: str = "g"):
    return JoinGroup(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
                     group_instance_id=instance_id, protocol_type="consumer",
                     protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)])


def commit_request(group: str, member_id: str, generation: int, offsets: dict[int, int], topic: str = "topic"):
    return OffsetCommit(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, topics=[
        OffsetCommit.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommit.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="m")
            for p, o in offsets.items()])])


def fetch_request(group: str, partitions: list[int] | None, topic: str = "topic"):
    topics = None if partitions is None else [OffsetFetch.OffsetFetchRequestTopic(name=topic,
                                                                                   partition_indexes=partitions)]
    return OffsetFetch(group_id=group, topics=topics)


async def join_and_sync(client: Client, version: int, group: str = "g") -> tuple[str, int]:
    """A one-member group through JoinGroup (with KIP-394's second join from v4) and SyncGroup."""
    joined = await client.call(join_request(group=group), version)
    if joined.error_code == E.MEMBER_ID_REQUIRED:
        assert version >= 4
        joined = await client.call(join_request(joined.member_id, group=group), version)
    assert joined.error_code == E.NONE and joined.leader == joined.member_id, joined
    sync_version = min(version, 5)
    synced = await client.call(SyncGroup(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
                                         protocol_type="consumer", protocol_name="range", assignments=[
                                             SyncGroup.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                                  assignment=b"all")]),
                               sync_version)
    assert (synced.error_code, synced.assignment) == (E.NONE, b"all"), synced
    return joined.member_id, joined.generation_id
