"""The share coordinator's shard on an explicit clock: every RPC with Kafka's answers and errors,
the epochs that fence stale writers, snapshots every so many updates, failed writes, cold
snapshots, pruning, and replaying its own `__share_group_state` records into the same state."""

from __future__ import annotations

import itertools
import uuid

import pytest

from samsa.coordinator.share_coordinator import (
    ShareCoordinatorConfig, ShareCoordinatorShard, SharePartitionKey, coordinator_key, parse_coordinator_key,
    partition_for,
)
from samsa.coordinator.share_coordinator_records import read_record
from samsa.coordinator.share_state import PersisterStateBatch as B
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Initialize = request_class(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
Read = request_class(ApiKey.READ_SHARE_GROUP_STATE)
Write = request_class(ApiKey.WRITE_SHARE_GROUP_STATE)
Delete = request_class(ApiKey.DELETE_SHARE_GROUP_STATE)
Summary = request_class(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)

TOPIC = uuid.UUID("6a3cbd4e-0f59-4c3c-9f0e-2a6f8e5d1c42")
GROUP = "g1"
KEY = SharePartitionKey(GROUP, TOPIC, 0)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4


class Harness:
    """Drives a shard as server/coordinators/share_service.py does: its partition's log kept in
    memory, appends failing with `fail_appends` when set."""

    def __init__(self, now: int = 1_000_000, topics: dict[uuid.UUID, int] | None = None, **config) -> None:
        self.now = now
        self.config = ShareCoordinatorConfig(**config)
        self.topics = {TOPIC: 3} if topics is None else topics
        self.shard = ShareCoordinatorShard(self.config, 7, self.topics.get)
        self.shard.load_complete()
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.fail_appends: int | None = None
        self._tickets = itertools.count()

    def apply(self, actions) -> dict:
        responses = {}
        pending = [actions]
        while pending:
            actions = pending.pop(0)
            responses.update(actions.responses)
            for append in actions.appends:
                assert append.partition == 7
                error = self.fail_appends or ErrorCode.NONE
                first = len(self.log)
                if error == ErrorCode.NONE:
                    self.log += [(first + i, key, value) for i, (key, value) in enumerate(append.records)]
                pending.append(self.shard.complete_append(append, error, self.now, first))
        return responses

    def call(self, operation, data, group=GROUP, topic=TOPIC):
        ticket = next(self._tickets)
        return self.apply(operation(self.now, ticket, group, topic, data))[ticket]

    def initialize(self, partition=0, state_epoch=0, start_offset=0, **kw):
        return self.call(self.shard.initialize_state, Initialize.PartitionData(
            partition=partition, state_epoch=state_epoch, start_offset=start_offset), **kw)

    def read(self, partition=0, leader_epoch=0, **kw):
        return self.call(self.shard.read_state, Read.PartitionData(partition=partition, leader_epoch=leader_epoch), **kw)

    def write(self, batches=(), partition=0, state_epoch=0, leader_epoch=0, start_offset=0, delivery_complete_count=-1,
              **kw):
        return self.call(self.shard.write_state, Write.PartitionData(
            partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            state_batches=[Write.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                           for b in batches]), **kw)

    def delete(self, partition=0, **kw):
        return self.call(self.shard.delete_state, Delete.PartitionData(partition=partition), **kw)

    def summary(self, partition=0, leader_epoch=0, **kw):
        return self.call(self.shard.read_state_summary, Summary.PartitionData(partition=partition,
                                                                              leader_epoch=leader_epoch), **kw)

    def kinds(self) -> str:
        """The log as S (snapshot), U (update) and T (tombstone)."""
        out = ""
        for _, key, value in self.log:
            record = read_record(key, value)
            out += "T" if record.value is None else "S" if record.snapshot else "U"
        return out

    def replayed(self) -> ShareCoordinatorShard:
        shard = ShareCoordinatorShard(self.config, 7, self.topics.get)
        for offset, key, value in self.log:
            shard.replay(offset, key, value)
        shard.load_complete()
        return shard


def batches(result) -> list[B]:
    return [B(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches]


def ok(result) -> bool:
    return result.error_code == ErrorCode.NONE and result.error_message is None


# --- keys -------------------------------------------------------------------------------------------

def test_coordinator_keys_are_kafkas():
    key = SharePartitionKey("my:group", uuid.UUID(bytes=bytes(range(16))), 12)
    text = coordinator_key(key)
    assert text == "my:group:AAECAwQFBgcICQoLDA0ODw:12"
    assert parse_coordinator_key(text) == key
    assert parse_coordinator_key("g:AAECAwQFBgcICQoLDA0ODw:+3").partition == 3
    # Java's String.split drops trailing empty fields: a trailing colon is no field.
    assert parse_coordinator_key("g:AAECAwQFBgcICQoLDA0ODw:1::").partition == 1
    assert 0 <= partition_for(key, 50) < 50


@pytest.mark.parametrize("text, message", [
    ("", "Share partition key cannot be empty"),
    ("g:AAECAwQFBgcICQoLDA0ODw", "Invalid key format"),
    (" :AAECAwQFBgcICQoLDA0ODw:1", "GroupId must not be empty"),
    ("g:not-a-uuid:1", "Invalid topic ID: not-a-uuid"),
    ("g:AAECAwQFBgcICQoLDA0ODw:x", "Invalid partition: x"),
    ("g:AAECAwQFBgcICQoLDA0ODw:99999999999", "Invalid partition"),
])
def test_invalid_coordinator_keys(text, message):
    with pytest.raises(ValueError, match=message):
        parse_coordinator_key(text)


# --- the RPCs ---------------------------------------------------------------------------------------

def test_initialize_then_read_the_state_back():
    h = Harness()
    assert ok(h.initialize(state_epoch=1, start_offset=10))
    assert h.kinds() == "S"
    result = h.read(leader_epoch=0)
    assert ok(result) and (result.partition, result.state_epoch, result.start_offset, batches(result)) == (0, 1, 10, [])
    assert h.kinds() == "S"  # the leader epoch (0) is the one recorded: nothing written
    # A new leader reads at its epoch: recorded first (an update without batches), then answered.
    result = h.read(leader_epoch=3)
    assert ok(result) and result.start_offset == 10
    assert h.kinds() == "SU" and h.shard.leader_epochs[KEY] == 3 and h.shard.state_of(KEY).leader_epoch == 3


def test_writes_combine_batches_and_never_move_the_start_offset_back():
    h = Harness()
    h.initialize(start_offset=0)
    assert ok(h.write([B(0, 9, AVAILABLE, 1)], start_offset=0))
    assert ok(h.write([B(0, 4, ACKNOWLEDGED, 1)], start_offset=0))
    assert batches(h.read()) == [B(0, 4, ACKNOWLEDGED, 1), B(5, 9, AVAILABLE, 1)]
    assert ok(h.write([B(5, 9, ACQUIRED, 2)], start_offset=5))
    assert h.read().start_offset == 5 and batches(h.read()) == [B(5, 9, ACQUIRED, 2)]
    assert ok(h.write([], start_offset=2))  # an older start offset: kept at 5
    assert h.read().start_offset == 5


def test_delivery_complete_count_follows_the_start_offset():
    h = Harness()
    h.initialize(start_offset=0)
    assert h.shard.state_of(KEY).delivery_complete_count == 0
    h.write(start_offset=0, delivery_complete_count=4)
    h.write(start_offset=0, delivery_complete_count=2)  # same start offset: the higher count stays
    assert h.shard.state_of(KEY).delivery_complete_count == 4
    h.write(start_offset=-1, delivery_complete_count=9)  # an older start offset: the count stays
    assert h.shard.state_of(KEY).delivery_complete_count == 4
    h.write(start_offset=8, delivery_complete_count=1)  # a newer one: its count
    assert h.shard.state_of(KEY).delivery_complete_count == 1
    h2 = Harness()
    h2.initialize(start_offset=-1)  # not initialized with an offset: unknown
    assert h2.shard.state_of(KEY).delivery_complete_count == -1


def test_write_or_read_before_initialize_is_refused():
    h = Harness()
    result = h.write()
    assert (result.error_code, result.error_message) == (
        ErrorCode.INVALID_REQUEST, "Write operation on uninitialized share partition not allowed.")
    result = h.read()
    assert (result.error_code, result.error_message) == (
        ErrorCode.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.")
    assert h.log == []


def test_negative_ids_and_epochs_are_invalid_requests():
    h = Harness()
    h.initialize()
    cases = [
        (h.write(partition=-1), "The partition id cannot be a negative number."),
        (h.write(leader_epoch=-1), "The leader epoch cannot be a negative number."),
        (h.write(state_epoch=-1), "The state epoch cannot be a negative number."),
        (h.read(partition=-1), "The partition id cannot be a negative number."),
        (h.read(leader_epoch=-1), "The leader epoch cannot be a negative number."),
        (h.initialize(partition=-1), "The partition id cannot be a negative number."),
        (h.initialize(state_epoch=-1), "The state epoch cannot be a negative number."),
        (h.delete(partition=-1), "The partition id cannot be a negative number."),
        (h.summary(partition=-1), "The partition id cannot be a negative number."),
    ]
    for result, message in cases:
        assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_an_older_leader_epoch_is_fenced():
    h = Harness()
    h.initialize()
    h.read(leader_epoch=5)
    for result in (h.write(leader_epoch=4), h.read(leader_epoch=4)):
        assert (result.error_code, result.error_message) == (ErrorCode.FENCED_LEADER_EPOCH,
                                                             ErrorCode.FENCED_LEADER_EPOCH.message)
    assert ok(h.write(leader_epoch=5)) and ok(h.write(leader_epoch=6))
    # A write does not record its leader epoch (only a read does): epoch 5 still passes.
    assert h.shard.leader_epochs[KEY] == 5 and ok(h.write(leader_epoch=5))


def test_an_older_state_epoch_is_fenced_and_initialize_starts_a_new_one():
    h = Harness()
    h.initialize(state_epoch=2, start_offset=0)
    h.write([B(0, 3, ACKNOWLEDGED, 1)], state_epoch=2)
    fenced = (ErrorCode.FENCED_STATE_EPOCH, "The coordinator rejected the request because the state epoch did not match.")
    result = h.write(state_epoch=1)
    assert (result.error_code, result.error_message) == fenced
    result = h.initialize(state_epoch=1)
    assert (result.error_code, result.error_message) == fenced
    # The same or a newer state epoch re-initializes: a new snapshot, the batches gone.
    assert ok(h.initialize(state_epoch=3, start_offset=50))
    state = h.shard.state_of(KEY)
    assert (state.state_epoch, state.start_offset, state.state_batches, state.snapshot_epoch) == (3, 50, (), 1)
    result = h.read()
    assert (result.state_epoch, result.start_offset, batches(result)) == (3, 50, [])


def test_unknown_topics_and_partitions():
    h = Harness()
    h.initialize()
    other = uuid.uuid4()
    for result in (h.initialize(partition=3), h.initialize(topic=other), h.summary(partition=3),
                   h.delete(topic=other)):
        assert (result.error_code, result.error_message) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
    del h.topics[TOPIC]  # deleted under the share partition
    for result in (h.write(), h.read()):
        assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_summary_of_known_and_unknown_share_partitions():
    h = Harness()
    result = h.summary()
    assert ok(result) and (result.start_offset, result.delivery_complete_count, result.leader_epoch,
                           result.state_epoch) == (-1, -1, 0, 0)
    h.initialize(state_epoch=2, start_offset=7)
    h.read(leader_epoch=4)
    h.write(start_offset=9, delivery_complete_count=3, leader_epoch=4, state_epoch=2)
    result = h.summary()
    assert ok(result) and (result.start_offset, result.delivery_complete_count, result.leader_epoch,
                           result.state_epoch) == (9, 3, 4, 2)
    assert h.kinds() == "SUU"  # a summary writes nothing


def test_delete_writes_a_tombstone_and_deleting_nothing_succeeds():
    h = Harness()
    assert ok(h.delete()) and h.log == []
    h.initialize(state_epoch=4)
    h.read(leader_epoch=2)
    assert ok(h.delete())
    assert h.kinds() == "SUT" and h.shard.state_of(KEY) is None
    assert KEY not in h.shard.leader_epochs and KEY not in h.shard.state_epochs
    assert h.read().error_code == ErrorCode.INVALID_REQUEST
    assert ok(h.initialize(state_epoch=0))  # the old state epoch is forgotten with it


def test_a_snapshot_every_so_many_updates():
    h = Harness(snapshot_update_records_per_snapshot=3)
    h.initialize(start_offset=0)
    for i in range(8):
        h.write([B(i, i, ACKNOWLEDGED, 1)], start_offset=0)
    assert h.kinds() == "SUUUSUUUS"
    snapshot = read_record(*h.log[4][1:])
    assert snapshot.value.snapshot_epoch == 1 and snapshot.value.state_batches == (B(0, 3, ACKNOWLEDGED, 1),)
    update = read_record(*h.log[5][1:])
    assert update.value.snapshot_epoch == 1 and update.value.state_batches == (B(4, 4, ACKNOWLEDGED, 1),)
    assert batches(h.read()) == [B(0, 7, ACKNOWLEDGED, 1)]


def test_every_write_is_a_snapshot_with_zero_updates_per_snapshot():
    h = Harness(snapshot_update_records_per_snapshot=0)
    h.initialize()
    h.write([B(0, 1, ARCHIVED, 5)])
    h.read(leader_epoch=1)
    assert h.kinds() == "SSS"


def test_replaying_the_log_gives_the_same_state():
    h = Harness(snapshot_update_records_per_snapshot=2)
    keys = [SharePartitionKey(g, TOPIC, p) for g in ("a", "b:c") for p in range(3)]
    for key in keys:
        h.initialize(partition=key.partition, state_epoch=1, start_offset=0, group=key.group_id)
    for step in range(12):
        key = keys[step % len(keys)]
        h.read(partition=key.partition, leader_epoch=step // 4, group=key.group_id)
        h.write([B(step, step + 3, step % 3, step % 4)], partition=key.partition, leader_epoch=step // 4,
                state_epoch=1, start_offset=step // 2, delivery_complete_count=step, group=key.group_id)
    h.delete(partition=2, group="a")
    replayed = h.replayed()
    assert replayed.share_state == h.shard.share_state
    assert replayed.leader_epochs == h.shard.leader_epochs
    assert replayed.state_epochs == h.shard.state_epochs
    assert replayed.snapshot_update_counts == h.shard.snapshot_update_counts
    assert replayed.last_redundant_offset() == h.shard.last_redundant_offset()


def test_a_failed_write_changes_nothing_and_says_why():
    h = Harness()
    h.initialize()
    h.fail_appends = ErrorCode.NOT_LEADER_OR_FOLLOWER
    result = h.write([B(0, 1, ACKNOWLEDGED, 1)])
    assert (result.error_code, result.error_message) == (
        ErrorCode.NOT_COORDINATOR, "Unable to write share group state: " + ErrorCode.NOT_LEADER_OR_FOLLOWER.message)
    h.fail_appends = ErrorCode.REQUEST_TIMED_OUT
    result = h.read(leader_epoch=2)
    assert result.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert result.error_message.startswith("Unable to read share group state: ")
    h.fail_appends = ErrorCode.MESSAGE_TOO_LARGE
    assert h.initialize(state_epoch=1).error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    h.fail_appends = None
    assert h.shard.state_of(KEY).state_batches == () and h.shard.leader_epochs[KEY] == 0
    assert h.shard.state_of(KEY).state_epoch == 0 and h.kinds() == "S"


def test_an_inactive_shard_refuses_with_its_error():
    h = Harness()
    h.shard.active, h.shard.inactive_error = False, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    result = h.initialize()
    assert (result.error_code, result.error_message) == (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        "Unable to initialize share group state: " + ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.message)
    h.shard.unload()
    for result in (h.read(), h.write(), h.delete(), h.summary()):
        assert result.error_code == ErrorCode.NOT_COORDINATOR and result.error_message.startswith("Unable to ")


def test_cold_partitions_are_snapshotted_once_their_last_snapshot_is_old():
    h = Harness(cold_partition_snapshot_interval_ms=1000)
    h.initialize(start_offset=0)
    h.write([B(0, 0, ACKNOWLEDGED, 1)])
    assert h.apply(h.shard.snapshot_cold_partitions(h.now + 999)) == {} and h.kinds() == "SU"
    h.now += 1000
    h.apply(h.shard.snapshot_cold_partitions(h.now))
    assert h.kinds() == "SUS"
    state = h.shard.state_of(KEY)
    assert state.write_timestamp == h.now and state.create_timestamp == h.now - 1000 and state.snapshot_epoch == 1
    assert state.state_batches == (B(0, 0, ACKNOWLEDGED, 1),)
    # Every share partition is cold-snapshotted already: nothing more to do.
    h.now += 5000
    h.apply(h.shard.snapshot_cold_partitions(h.now))
    assert h.kinds() == "SUS"


def test_the_last_redundant_offset_is_the_oldest_last_snapshot():
    h = Harness(snapshot_update_records_per_snapshot=1)
    a, b = SharePartitionKey("a", TOPIC, 0), SharePartitionKey("b", TOPIC, 0)
    h.initialize(group="a")  # offset 0
    h.initialize(group="b")  # offset 1
    assert h.shard.last_redundant_offset() is None  # offset 0 is the first: nothing before it
    h.write(group="a")  # 2: an update
    h.write(group="a")  # 3: a snapshot of a
    assert h.shard.offsets.offsets == {a: 3, b: 1} and h.shard.last_redundant_offset() == 1
    h.write(group="b")  # 4: an update
    h.write(group="b")  # 5: a snapshot of b
    assert h.shard.last_redundant_offset() == 3
    h.delete(group="a")  # 6: a's tombstone; b's snapshot at 5 is now the oldest needed
    assert h.shard.last_redundant_offset() == 5 and h.shard.offsets.offsets == {b: 5}


def test_the_share_partitions_of_deleted_topics_are_forgotten():
    h = Harness(topics={TOPIC: 3, (other := uuid.uuid4()): 1})
    h.initialize()
    h.initialize(partition=1)
    h.initialize(topic=other)
    h.apply(h.shard.cleanup_share_state({TOPIC}))
    assert h.kinds() == "SSSTT"
    assert set(h.shard.share_state) == {SharePartitionKey(GROUP, other, 0)}
