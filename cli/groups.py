"""`samsa groups list|describe|reset-offsets|delete`: kafka-consumer-groups' jobs, with its output,
and kafka-share-groups' list and describe for share groups (KIP-932).

list prints the consumer groups' names (kafka-consumer-groups --list); `--type` picks the types
listed (classic, consumer, share: `--type share` is kafka-share-groups --list), `--state` prints
each group's type and state.

describe prints kafka-consumer-groups --describe's table: a row per partition a member is assigned
(members with the most partitions first), then a row per partition with a committed offset that no
member holds; LAG is the log end offset less the committed offset. A classic group is described by
DescribeGroups (assignments decoded from the consumer protocol), a KIP-848 consumer group by
ConsumerGroupDescribe. A share group is described as kafka-share-groups --describe describes it
(cli/share_groups.py): a row per share partition with its start offset and lag, then its members.

reset-offsets, as Kafka's tool: only for a group without active members (Empty, or not there yet);
prints the plan and commits it only with --execute.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from datetime import datetime
from typing import NamedTuple

import trio

from ..wire.errors import ErrorCode
from ..wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from ..wire.protocol import message_class
from . import BAD_USAGE, BROKER_REFUSED, CommandError
from .client import KafkaClient, action_parsers, check_error, open_client
from .fetching import EARLIEST, LATEST, list_offsets
from .group_offsets import commit_offsets, committed_offsets
from .share_groups import describe_share_group, print_share_group
from .topic_metadata import TopicInfo, describe_topic

HELP = "list, describe, reset the offsets of and delete consumer groups; list and describe share groups"

ListGroupsRequest = message_class("ListGroupsRequest")
DescribeGroupsRequest = message_class("DescribeGroupsRequest")
ConsumerGroupDescribeRequest = message_class("ConsumerGroupDescribeRequest")
DeleteGroupsRequest = message_class("DeleteGroupsRequest")

MISSING = "-"
CONSUMER_PROTOCOL_TYPES = {"", "consumer"}  # what ListGroupsOptions.forConsumerGroups() keeps
INACTIVE_STATES = {"Empty", "Dead"}
GROUP_TYPES = ("classic", "consumer", "share")  # ListGroups' GroupType (Kafka's GroupType names)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    with action_parsers(parser) as actions:
        list_ = actions.add_parser("list", help="the consumer groups' names (--type: of other types)")
        list_.add_argument("--type", action="append", choices=GROUP_TYPES, dest="types", metavar="TYPE",
                           help="list the groups of this type: classic, consumer or share (repeatable; "
                                "default: the groups of the consumer protocol, classic or consumer)")
        list_.add_argument("--state", action="store_true", help="print each group's type and state too")
        describe = actions.add_parser("describe", help="a group's partitions: committed offset, log end offset, lag, "
                                                       "member (a share group's: start offset, lag; members)")
        describe.add_argument("group")
        reset = actions.add_parser(
            "reset-offsets", help="plan new committed offsets for a group's partitions; --execute commits them",
            description="Print the offsets a group's partitions would get; with --execute commit them. "
                        "The group must have no active members.")
        reset.add_argument("group")
        reset.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P...]",
                           help="a topic, or some of its partitions (repeatable)")
        to = reset.add_mutually_exclusive_group(required=True)
        to.add_argument("--to-earliest", action="store_true", help="each partition's log start offset")
        to.add_argument("--to-latest", action="store_true", help="each partition's log end offset")
        to.add_argument("--to-datetime", metavar="ISO", help="the first offset at or after this time, e.g. "
                                                             "2026-01-31T12:00:00.000 (local time without a zone)")
        to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
        to.add_argument("--to-offset", type=int, metavar="N", help="offset N")
        mode = reset.add_mutually_exclusive_group()
        mode.add_argument("--execute", action="store_true", help="commit the new offsets")
        mode.add_argument("--dry-run", action="store_true", help="only print them (the default)")
        delete = actions.add_parser("delete", help="delete groups (without active members) and their offsets")
        delete.add_argument("groups", nargs="+", metavar="GROUP")


def run(args: argparse.Namespace) -> int:
    return trio.run(ACTIONS[args.action], args)


# --- list --------------------------------------------------------------------------------------

async def list_groups(args: argparse.Namespace) -> int:
    """Every broker's groups (each coordinates some), as kafka-consumer-groups --list (or, with
    --type share, kafka-share-groups --list)."""
    async with open_client(args) as client:
        metadata = await client.metadata([])
        groups: dict[str, tuple[str, str]] = {}
        for broker in metadata.brokers:
            response = await client.send(ListGroupsRequest(), broker.node_id)
            check_error(response.error_code)
            for g in response.groups:
                kind = g.group_type or "classic"  # ListGroups before v5 knows classic groups only
                if (kind in args.types if args.types else
                        g.protocol_type in CONSUMER_PROTOCOL_TYPES or kind == "consumer"):
                    groups[g.group_id] = (kind, g.group_state)
    if not args.state:
        for name in sorted(groups):
            print(name)
        return 0
    width = max(15, *(len(name) for name in groups)) if groups else 15
    line = f"%-{width}s %-10s %s"
    print(line % ("GROUP", "TYPE", "STATE"))
    for name, (kind, state) in sorted(groups.items()):
        print(line % (name, kind, state or MISSING))
    return 0


# --- describe ----------------------------------------------------------------------------------

class Member(NamedTuple):
    member_id: str
    host: str
    client_id: str
    assignment: list[tuple[str, int]]


class Group(NamedTuple):
    group_id: str
    state: str
    members: list[Member]


async def describe_group(client: KafkaClient, group_id: str) -> Group:
    """The group's state and members; state "Dead" for a group that does not exist."""
    coordinator = await client.coordinator(group_id)
    response = await client.send(DescribeGroupsRequest(groups=[group_id]), coordinator)
    (found,) = response.groups
    if found.error_code == ErrorCode.NONE and found.group_state != "Dead":
        return Group(group_id, found.group_state, [
            Member(m.member_id, m.client_host, m.client_id, decode_assignment(m.member_assignment))
            for m in found.members])
    if found.error_code not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
        check_error(found.error_code, found.error_message, group_id)
    consumer_group = await describe_consumer_group(client, coordinator, group_id)
    return consumer_group or Group(group_id, "Dead", [])


async def describe_consumer_group(client: KafkaClient, coordinator: int, group_id: str) -> Group | None:
    """A KIP-848 consumer group by ConsumerGroupDescribe; None when the broker knows no such group."""
    try:
        await client.api_version(ConsumerGroupDescribeRequest, coordinator)
    except CommandError:
        return None  # a broker before KIP-848
    response = await client.send(ConsumerGroupDescribeRequest(group_ids=[group_id]), coordinator)
    (found,) = response.groups
    if found.error_code != ErrorCode.NONE:
        return None
    return Group(group_id, found.group_state, [
        Member(m.member_id, m.client_host, m.client_id,
               [(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions])
        for m in found.members])


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer protocol assignment (int16 version, then the assignment);
    nothing for a member of another protocol."""
    if len(data) < 2:
        return []
    version = min(int.from_bytes(data[:2], "big", signed=True), ConsumerProtocolAssignment.VALID_VERSIONS[1])
    try:
        assignment = ConsumerProtocolAssignment.decode(memoryview(data)[2:], max(version, 0))
    except Exception:  # noqa: BLE001 - not the consumer protocol: no partitions to show
        return []
    return [(t.topic, p) for t in assignment.assigned_partitions for p in t.partitions]


async def log_end_offsets(client: KafkaClient, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The log end offset of each partition that still exists."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    ends: dict[tuple[str, int], int] = {}
    for topic, wanted in sorted(by_topic.items()):
        try:
            info = await describe_topic(client, topic)
        except CommandError:
            continue  # deleted since: no log end offset
        offsets = await list_offsets(client, info, {p: LATEST for p in wanted if p in info.leaders})
        ends.update({(topic, p): offset for p, offset in offsets.items()})
    return ends


async def describe(args: argparse.Namespace) -> int:
    async with open_client(args) as client:
        group = await describe_group(client, args.group)
        if group.state == "Dead":
            share_group = await describe_share_group(client, args.group)
            if share_group is None:
                raise CommandError(f"Consumer group '{args.group}' does not exist.", BROKER_REFUSED)
            print_share_group(share_group)
            return 0
        committed = await committed_offsets(client, args.group)
        rows: list[tuple[str, ...]] = []
        members = sorted((m for m in group.members if m.assignment), key=lambda m: -len(m.assignment))
        assigned = {tp for m in members for tp in m.assignment}
        ends = await log_end_offsets(client, assigned | set(committed))

    def row(topic: str, partition: int, consumer: tuple[str, str, str]) -> tuple[str, ...]:
        offset, end = committed.get((topic, partition)), ends.get((topic, partition))
        lag = end - offset if offset is not None and end is not None else None
        return (args.group, topic, str(partition), *(MISSING if v is None else str(v) for v in (offset, end, lag)),
                *consumer)

    for member in members:
        rows += [row(t, p, (member.member_id, member.host, member.client_id)) for t, p in sorted(member.assignment)]
    rows += [row(t, p, (MISSING,) * 3) for t, p in sorted(set(committed) - assigned)]
    if group.state == "Empty":
        print(f"\nConsumer group '{args.group}' has no active members.", file=sys.stderr)
    elif group.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{args.group}' is rebalancing.", file=sys.stderr)
    if rows:
        header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID")
        print("\n" + "\n".join(describe_line(line, rows) for line in [header, *rows]))
    return 0


def describe_line(values: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """One line in kafka-consumer-groups --describe's columns: group, topic, consumer id and host
    as wide as their longest value (15 at least), partition 10, the offsets and lag 15."""
    widths = [max(15, *(len(r[i]) for r in rows)) if i in (0, 1, 6, 7) else 10 if i == 2 else 15
              for i in range(8)]
    return " ".join(value.ljust(width) for value, width in zip(values, widths)) + " " + values[8]


# --- reset-offsets -----------------------------------------------------------------------------

def parse_topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """TOPIC or TOPIC:P,P,... (Kafka's --topic syntax)."""
    topic, _, partitions = spec.partition(":")
    if not partitions:
        return topic, None
    try:
        return topic, [int(p) for p in partitions.split(",")]
    except ValueError:
        raise CommandError(f"bad --topic {spec!r}: expected TOPIC or TOPIC:PARTITION,PARTITION...", BAD_USAGE) from None


async def plan_reset(client: KafkaClient, args: argparse.Namespace, info: TopicInfo,
                     partitions: list[int]) -> dict[int, int]:
    if args.to_earliest:
        return await list_offsets(client, info, dict.fromkeys(partitions, EARLIEST))
    if args.to_latest:
        return await list_offsets(client, info, dict.fromkeys(partitions, LATEST))
    if args.to_datetime is not None:
        try:
            when = int(datetime.fromisoformat(args.to_datetime).timestamp() * 1000)
        except ValueError:
            raise CommandError(f"bad --to-datetime {args.to_datetime!r}: expected an ISO 8601 date-time",
                               BAD_USAGE) from None
        return await list_offsets(client, info, dict.fromkeys(partitions, when))
    earliest = await list_offsets(client, info, dict.fromkeys(partitions, EARLIEST))
    latest = await list_offsets(client, info, dict.fromkeys(partitions, LATEST))
    if args.to_offset is not None:
        wanted = dict.fromkeys(partitions, args.to_offset)
    else:
        committed = await committed_offsets(client, args.group, info)
        missing = [p for p in partitions if (info.name, p) not in committed]
        if missing:
            raise CommandError(f"cannot shift the offset of {info.name}-{missing[0]}: the group has no committed "
                               f"offset for it", BAD_USAGE)
        wanted = {p: committed[info.name, p] + args.shift_by for p in partitions}
    # As Kafka's tool: an offset outside the log is moved to its nearest end.
    return {p: min(max(offset, earliest[p]), latest[p]) for p, offset in wanted.items()}


async def reset_offsets(args: argparse.Namespace) -> int:
    async with open_client(args) as client:
        group = await describe_group(client, args.group)
        if group.state not in INACTIVE_STATES:
            raise CommandError(f"Assignments can only be reset if the group '{args.group}' is inactive, but the "
                               f"current state is {group.state}.")
        plans: list[tuple[TopicInfo, dict[int, int]]] = []
        for spec in args.topic:
            topic, partitions = parse_topic_partitions(spec)
            info = await describe_topic(client, topic)
            unknown = [p for p in partitions or () if p not in info.leaders]
            if unknown:
                raise CommandError(f"{topic} has no partition {unknown[0]}", BAD_USAGE)
            plans.append((info, await plan_reset(client, args, info, partitions or info.partitions)))
        if args.execute:
            for info, offsets in plans:
                await commit_offsets(client, args.group, info, offsets)
    line = "%-30s %-30s %-10s %-15s"
    print("\n" + line % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))
    for info, offsets in plans:
        for partition, offset in sorted(offsets.items()):
            print(line % (args.group, info.name, partition, offset))
    if not args.execute:
        print("\nDry run: nothing was committed; add --execute to commit these offsets.", file=sys.stderr)
    return 0


# --- delete ------------------------------------------------------------------------------------

async def delete(args: argparse.Namespace) -> int:
    deleted, failed = [], []
    async with open_client(args) as client:
        for group in args.groups:
            response = await client.send_to_coordinator(DeleteGroupsRequest(groups_names=[group]), group)
            (result,) = response.results
            if result.error_code == ErrorCode.NONE:
                deleted.append(group)
                continue
            try:
                check_error(result.error_code, getattr(result, "error_message", None))
            except CommandError as e:
                failed.append((group, str(e)))
    quoted = ", ".join(f"'{g}'" for g in deleted)
    if not failed:
        print(f"Deletion of requested consumer groups ({quoted}) was successful.")
        return 0
    print("\nError: Deletion of some consumer groups failed:")
    for group, error in failed:
        print(f"* Group '{group}' could not be deleted due to: {error}")
    if deleted:
        print(f"\nThese consumer groups were deleted successfully: {quoted}")
    return BROKER_REFUSED


ACTIONS = {"list": list_groups, "describe": describe, "reset-offsets": reset_offsets, "delete": delete}
