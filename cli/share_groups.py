"""Share groups (KIP-932) for `samsa groups describe`: kafka-share-groups --describe's tables.

A share group is described by ShareGroupDescribe (state, members, each member's assignment) and
DescribeShareGroupOffsets with every topic (each share partition's start offset and, from v1, its
lag, KIP-1226). describe prints kafka-share-groups --describe's offsets table (a row per share
partition, "-" where the group has no start offset yet or the broker no lag), then, when the group
has members, its --describe --members table; "has no active members" goes to stderr as the tool
prints it.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

from ..wire.errors import ErrorCode
from ..wire.protocol import message_class
from .client import KafkaClient, check_error

ShareGroupDescribeRequest = message_class("ShareGroupDescribeRequest")
DescribeShareGroupOffsetsRequest = message_class("DescribeShareGroupOffsetsRequest")

MISSING = "-"


class ShareMember(NamedTuple):
    member_id: str
    host: str
    client_id: str
    assignment: list[tuple[str, int]]


class SharePartitionOffset(NamedTuple):
    topic: str
    partition: int
    start_offset: int | None  # None: not initialized with an offset yet
    lag: int | None  # None: unknown (DescribeShareGroupOffsets v0, or no start offset)


class ShareGroup(NamedTuple):
    group_id: str
    state: str
    members: list[ShareMember]
    offsets: list[SharePartitionOffset]


async def describe_share_group(client: KafkaClient, group_id: str) -> ShareGroup | None:
    """The share group, None when the coordinator knows no share group of that id (or serves none)."""
    coordinator = await client.coordinator(group_id)
    if not await client.supports(ShareGroupDescribeRequest, coordinator):
        return None
    response = await client.send(ShareGroupDescribeRequest(group_ids=[group_id]), coordinator)
    (found,) = response.groups
    if found.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check_error(found.error_code, found.error_message, group_id)
    members = [ShareMember(m.member_id, m.client_host, m.client_id,
                           [(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions])
               for m in found.members]
    offsets = await share_group_offsets(client, coordinator, group_id)
    return ShareGroup(group_id, found.group_state, members, offsets)


async def share_group_offsets(client: KafkaClient, coordinator: int, group_id: str) -> list[SharePartitionOffset]:
    """Every share partition of the group with its start offset and lag, by topic and partition."""
    request = DescribeShareGroupOffsetsRequest(groups=[
        DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)])
    response = await client.send(request, coordinator)
    (found,) = response.groups
    check_error(found.error_code, found.error_message, group_id)
    offsets = []
    for topic in found.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.NONE:
                continue  # as Kafka's admin client: skipped
            start = p.start_offset if p.start_offset >= 0 else None
            lag = getattr(p, "lag", -1)
            offsets.append(SharePartitionOffset(topic.topic_name, p.partition_index, start,
                                                lag if start is not None and lag >= 0 else None))
    return sorted(offsets)


def print_share_group(group: ShareGroup) -> None:
    """kafka-share-groups --describe's offsets table, then --describe --members' table."""
    g = group.group_id
    if not group.offsets:
        print(f"\nShare group '{g}' has no offset information.")
    else:
        group_width = max(15, len(g))
        topic_width = max(15, *(len(o.topic) for o in group.offsets))
        line = f"%-{group_width}s %-{topic_width}s %-10s %-13s %s"
        print("\n" + "\n".join(line % row for row in [("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"), *(
            (g, o.topic, o.partition, MISSING if o.start_offset is None else o.start_offset,
             MISSING if o.lag is None else o.lag) for o in group.offsets)]))
    if group.state == "Empty":
        print(f"\nShare group '{g}' has no active members.", file=sys.stderr)
    if not group.members:
        return
    members = sorted(group.members)
    widths = [max(15, len(g)), *(max(15, *(len(m[i]) for m in members)) for i in range(3))]
    line = "%-{}s %-{}s %-{}s %-{}s %-12s %s".format(*widths)
    print("\n" + "\n".join(line % row for row in [
        ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"),
        *((g, m.member_id, m.host, m.client_id, len(m.assignment), assignment_string(m.assignment))
          for m in members)]))


def assignment_string(assignment: list[tuple[str, int]]) -> str:
    """Kafka's getAssignmentString: `topic:0,1;other:2`, topics and partitions sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in by_topic.items()))
