"""samsa groups against a real broker: list, describe's exact table with lag, reset-offsets as a
dry run and with --execute, delete."""

from __future__ import annotations

import io
import itertools
import sys

import group_broker
import pytest
import trio
from group_requests import SyncGroup, join_request
from loopback import Client

from samsa.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from samsa.wire.protocol import message_class

ConsumerGroupHeartbeat = message_class("ConsumerGroupHeartbeatRequest")

broker = group_broker.broker  # this module's broker, instead of conftest's



TOPIC_NUMBERS = itertools.count()


@pytest.fixture
def topic(broker, samsa, monkeypatch):
    """A new topic of 2 partitions (a short name: the table's columns stay 15 wide), 6 records in
    partition 0, 2 in partition 1."""
    name = f"groups-{next(TOPIC_NUMBERS)}"
    assert samsa("topics", "create", name, "-p", "2", "-b", broker)[0] == 0
    for partition, count in ((0, 6), (1, 2)):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x\n" * count)))
        assert samsa("produce", name, "-p", str(partition), "-b", broker)[0] == 0
    return name


def table(*rows: tuple) -> str:
    """kafka-consumer-groups --describe's table for rows of a group no member holds (names under 15)."""
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID")
    return "\n" + "".join("%-15s %-15s %-10s %-15s %-15s %-15s %-15s %-15s %s\n" % row for row in [header, *rows])


def test_describe_shows_committed_offsets_and_lag(broker, samsa, topic):
    assert samsa("consume", topic, "-p", "0", "-g", "g-describe", "-c", "2", "-b", broker)[1] == "x\nx\n"
    code, out, err = samsa("groups", "describe", "g-describe", "-b", broker)
    assert code == 0, err
    assert out == table(("g-describe", topic, 0, 2, 6, 4, "-", "-", "-"))
    assert err == "\nConsumer group 'g-describe' has no active members.\n"

    assert samsa("consume", topic, "-p", "1", "-g", "g-describe", "-e", "-b", broker)[0] == 0
    assert samsa("groups", "describe", "g-describe", "-b", broker)[1] == table(
        ("g-describe", topic, 0, 2, 6, 4, "-", "-", "-"), ("g-describe", topic, 1, 2, 2, 0, "-", "-", "-"))

    assert "g-describe" in samsa("groups", "list", "-b", broker)[1].splitlines()


def join_as_member(broker: str, group: str, topic: str) -> str:
    """A consumer joined to `group` (JoinGroup, SyncGroup) holding both partitions of `topic`; its
    member id. No heartbeats follow: the session (10 s) outlives the test."""
    assignment = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=[0, 1])])

    async def join() -> str:
        client = await Client.connect(int(broker.rpartition(":")[2]))
        joined = await client.call(join_request(group=group), 4)
        joined = await client.call(join_request(joined.member_id, group=group), 4)
        synced = await client.call(SyncGroup(
            group_id=group, generation_id=joined.generation_id, member_id=joined.member_id, protocol_type="consumer",
            protocol_name="range", assignments=[SyncGroup.SyncGroupRequestAssignment(
                member_id=joined.member_id, assignment=b"\0\0" + bytes(assignment.encode(0)))]), 3)
        assert synced.error_code == 0, synced
        return joined.member_id

    return trio.run(join)


def test_describe_shows_an_active_members_partitions(broker, samsa, topic):
    assert samsa("consume", topic, "-p", "0", "-g", "g-active", "-c", "1", "-b", broker)[0] == 0
    member = join_as_member(broker, "g-active", topic)
    code, out, err = samsa("groups", "describe", "g-active", "-b", broker)
    assert (code, err) == (0, "")
    width = len(member)
    line = f"%-15s %-15s %-10s %-15s %-15s %-15s %-{width}s %-15s %s\n"
    assert out == "\n" + line % ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                 "CONSUMER-ID", "HOST", "CLIENT-ID") \
        + line % ("g-active", topic, 0, 1, 6, 5, member, "/127.0.0.1", "test") \
        + line % ("g-active", topic, 1, "-", 2, "-", member, "/127.0.0.1", "test")

    code, out, err = samsa("groups", "reset-offsets", "g-active", "--topic", topic, "--to-earliest", "-b", broker)
    assert (code, out) == (1, "")
    assert err == "samsa groups: Assignments can only be reset if the group 'g-active' is inactive, but the current " \
                  "state is Stable.\n"
    code, _, err = samsa("consume", topic, "-g", "g-active", "-c", "1", "-b", broker)
    assert code == 1 and "g-active" in err


def test_describe_of_an_unknown_group_is_exit_1(broker, samsa):
    code, out, err = samsa("groups", "describe", "no-such-group", "-b", broker)
    assert (code, out, err) == (1, "", "samsa groups: Consumer group 'no-such-group' does not exist.\n")


def test_reset_offsets_is_a_dry_run_without_execute(broker, samsa, topic):
    assert samsa("consume", topic, "-p", "0", "-g", "g-reset", "-c", "3", "-b", broker)[0] == 0
    before = samsa("groups", "describe", "g-reset", "-b", broker)[1]

    code, out, err = samsa("groups", "reset-offsets", "g-reset", "--topic", topic, "--to-earliest", "-b", broker)
    assert code == 0, err
    line = "%-30s %-30s %-10s %-15s\n"
    assert out == "\n" + line % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") + line % ("g-reset", topic, 0, 0) \
        + line % ("g-reset", topic, 1, 0)
    assert "nothing was committed" in err
    assert samsa("groups", "describe", "g-reset", "-b", broker)[1] == before

    code, out, _ = samsa("groups", "reset-offsets", "g-reset", "--topic", f"{topic}:0", "--shift-by", "-1",
                         "--execute", "-b", broker)
    assert out.endswith(line % ("g-reset", topic, 0, 2))
    assert samsa("groups", "describe", "g-reset", "-b", broker)[1] == table(("g-reset", topic, 0, 2, 6, 4, "-", "-", "-"))

    for how, expected in ((["--to-latest"], 6), (["--to-offset", "99"], 6), (["--to-offset", "1"], 1),
                          (["--to-datetime", "2000-01-01T00:00:00"], 0), (["--shift-by", "-5"], 0)):
        code, out, err = samsa("groups", "reset-offsets", "g-reset", "--topic", f"{topic}:0", *how, "--execute",
                               "-b", broker)
        assert (code, out.splitlines()[-1].split()[-1]) == (0, str(expected)), (how, err)
    assert samsa("consume", topic, "-p", "0", "-g", "g-reset", "-e", "-b", broker)[1] == "x\n" * 6


def test_reset_offsets_usage_errors(broker, samsa, topic):
    assert samsa("groups", "reset-offsets", "g", "--topic", topic, "-b", broker)[0] == 2  # no scenario
    assert samsa("groups", "reset-offsets", "g", "--to-latest", "-b", broker)[0] == 2  # no topic
    code, _, err = samsa("groups", "reset-offsets", "g-new", "--topic", topic, "--shift-by", "1", "-b", broker)
    assert code == 2 and "no committed offset" in err
    code, _, err = samsa("groups", "reset-offsets", "g", "--topic", "no-such-topic", "--to-latest", "-b", broker)
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_delete(broker, samsa, topic):
    assert samsa("consume", topic, "-g", "g-delete", "-c", "1", "-b", broker)[0] == 0
    code, out, _ = samsa("groups", "delete", "g-delete", "-b", broker)
    assert (code, out) == (0, "Deletion of requested consumer groups ('g-delete') was successful.\n")
    assert "g-delete" not in samsa("groups", "list", "-b", broker)[1].splitlines()
    code, out, _ = samsa("groups", "delete", "g-delete", "-b", broker)
    assert code == 1
    assert out == "\nError: Deletion of some consumer groups failed:\n* Group 'g-delete' could not be deleted due " \
                  "to: GROUP_ID_NOT_FOUND: The group id does not exist.\n"


def test_describe_shows_a_kip848_consumer_groups_member(broker, samsa, topic):
    async def join() -> None:
        client = await Client.connect(int(broker.rpartition(":")[2]))
        joined = await client.call(ConsumerGroupHeartbeat(
            group_id="g-848", member_id="member-848", member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[topic], topic_partitions=[]), 1)
        assert joined.error_code == 0 and len(joined.assignment.topic_partitions[0].partitions) == 2, joined

    trio.run(join)
    code, out, err = samsa("groups", "describe", "g-848", "-b", broker)
    assert (code, err) == (0, "")
    assert out == table(("g-848", topic, 0, "-", 6, "-", "member-848", "/127.0.0.1", "test"),
                        ("g-848", topic, 1, "-", 2, "-", "member-848", "/127.0.0.1", "test"))
    assert "g-848" in samsa("groups", "list", "-b", broker)[1].splitlines()
