"""The share coordinator: the durable state of share partitions, sans I/O (Kafka's
ShareCoordinatorShard, ShareCoordinatorOffsetsManager and the keying of ShareCoordinatorService).

A share partition (a share group consuming one topic partition) is keyed by (group id, topic id,
partition) and kept by the shard of one partition of `__share_group_state`: the key's coordinator
key "groupId:topicId:partition" hashed as Kafka hashes it names that partition. Its state (start
offset, state and leader epochs, the state batches of its in-flight records) is written as
ShareSnapshot records (the whole state) and ShareUpdate records (a write's batches), a snapshot
every `share.coordinator.snapshot.update.records.per.snapshot` updates, and rebuilt by replaying
them (coordinator/share_coordinator_records.py; batches combine as
coordinator/share_state_batches.py says).

The server hands each RPC in one partition at a time (ShareCoordinatorService splits the
requests), with the clock and a ticket, and carries out the `Actions` returned: the partition's
result (the response's PartitionResult) goes to the ticket once the records it needs are appended
(`complete_append`, with the offset of the first); the state changes then, by replaying the
records written, as at load. Epochs fence stale writers: a write or read from an older leader epoch
is FENCED_LEADER_EPOCH, a write or initialize with an older state epoch FENCED_STATE_EPOCH. The
errors and their messages are Kafka's.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..wire.errors import ErrorCode
from ..wire.protocol import ApiKey, response_class
from .actions import Actions, Append, Ticket
from .group_coordinator import partition_for as hash_partition
from .share_coordinator_records import (
    ShareGroupOffset, SharePartitionKey, ShareRecord, read_record, snapshot_record, tombstone_record, update_record,
)
from .share_state import PersisterStateBatch
from .share_state_batches import combine_state_batches

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinatorConfig", "ShareCoordinatorShard", "SharePartitionKey",
           "ShareCoordinatorOffsetsManager", "coordinator_key", "parse_coordinator_key", "partition_for"]

log = logging.getLogger("samsa.share_coordinator")

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

InitializeResponse = response_class(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
ReadResponse = response_class(ApiKey.READ_SHARE_GROUP_STATE)
WriteResponse = response_class(ApiKey.WRITE_SHARE_GROUP_STATE)
DeleteResponse = response_class(ApiKey.DELETE_SHARE_GROUP_STATE)
SummaryResponse = response_class(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)

# Kafka's ShareCoordinatorShard exceptions: their messages are the responses' error messages.
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."
WRITE_UNINITIALIZED_SHARE_PARTITION = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED_SHARE_PARTITION = "Read operation on uninitialized share partition not allowed."
# Kafka 4.4's Errors.FENCED_STATE_EPOCH text; wire/errors.py is generated from an older error table,
# whose text for it Kafka has since changed.
FENCED_STATE_EPOCH_MESSAGE = "The coordinator rejected the request because the state epoch did not match."

_NO_REDUNDANT_OFFSET = 1 << 63  # Long.MAX_VALUE: nothing known redundant yet


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    """Kafka's configs of the same names (and defaults), `share.coordinator.*`."""

    state_topic_num_partitions: int = 50
    snapshot_update_records_per_snapshot: int = 500
    cold_partition_snapshot_interval_ms: int = 300_000


# --- keys -----------------------------------------------------------------------------------------

def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: "groupId:topicId:partition", FindCoordinator's key."""
    return f"{key.group_id}:{kafka_uuid_string(key.topic_id)}:{key.partition}"


_INT = re.compile(r"[+-]?[0-9]+")


def parse_coordinator_key(key: str) -> SharePartitionKey:
    """Kafka's SharePartitionKey.getInstance(String); ValueError with Kafka's message when invalid.
    The group id may itself hold colons: the last two fields are the topic id and partition."""
    if not key:
        raise ValueError("Share partition key cannot be empty")
    tokens = key.split(":")
    while tokens and tokens[-1] == "":  # Java's String.split drops trailing empty strings
        tokens.pop()
    if len(tokens) < 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found - {key}")
    group_id = ":".join(tokens[:-2])
    if not group_id.strip():
        raise ValueError("GroupId must not be empty")
    topic_text, partition_text = tokens[-2], tokens[-1]
    try:
        if len(topic_text) > 24:
            raise ValueError
        raw = base64.urlsafe_b64decode(topic_text + "=" * (-len(topic_text) % 4))
        if len(raw) != 16:
            raise ValueError
        topic_id = uuid.UUID(bytes=raw)
    except (ValueError, binascii.Error):
        raise ValueError(f"Invalid topic ID: {topic_text}") from None
    if not _INT.fullmatch(partition_text) or not -(1 << 31) <= int(partition_text) < 1 << 31:
        raise ValueError(f"Invalid partition: {partition_text}")
    return SharePartitionKey(group_id, topic_id, int(partition_text))


def partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    """Kafka's `Utils.abs(key.asCoordinatorKey().hashCode()) % share.coordinator.state.topic.num.partitions`."""
    return hash_partition(coordinator_key(key), num_partitions)


# --- pruning ----------------------------------------------------------------------------------------

class ShareCoordinatorOffsetsManager:
    """Which records of the shard's partition no share partition needs any more (Kafka's
    ShareCoordinatorOffsetsManager): each partition's state is its last snapshot and the updates
    after it, so everything before the oldest of those last snapshots may be deleted."""

    def __init__(self) -> None:
        self.offsets: dict[SharePartitionKey, int] = {}  # each share partition's last snapshot
        self._last_redundant_offset = _NO_REDUNDANT_OFFSET

    def update_state(self, key: SharePartitionKey, offset: int, is_delete: bool) -> None:
        self._last_redundant_offset = min(self._last_redundant_offset, offset)
        self.offsets[key] = offset
        redundant = self._find_redundant_offset()
        if redundant is not None:
            self._last_redundant_offset = redundant
        if is_delete:
            del self.offsets[key]

    def _find_redundant_offset(self) -> int | None:
        if not self.offsets:
            return None
        so_far = _NO_REDUNDANT_OFFSET
        for offset in self.offsets.values():
            so_far = min(so_far, offset)
            if so_far == self._last_redundant_offset:
                return so_far
        return so_far

    def last_redundant_offset(self) -> int | None:
        """The offset before which the records may be deleted; None when none may."""
        value = self._last_redundant_offset
        return value if 0 < value != _NO_REDUNDANT_OFFSET else None


# --- the shard ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Rpc:
    """What an RPC's results look like, and how a failure to write is told (Kafka's
    ShareCoordinatorService: "Unable to <what>: <exception message>")."""

    result: type
    what: str

    def error(self, partition: int, error: int, message: str | None = None) -> Any:
        return self.result(partition=partition, error_code=error,
                           error_message=ErrorCode(error).message if message is None else message)

    def failed(self, partition: int, error: int, cause: int) -> Any:
        return self.error(partition, error, f"Unable to {self.what}: {ErrorCode(cause).message}")


_INITIALIZE = _Rpc(InitializeResponse.PartitionResult, "initialize share group state")
_READ = _Rpc(ReadResponse.PartitionResult, "read share group state")
_WRITE = _Rpc(WriteResponse.PartitionResult, "write share group state")
_DELETE = _Rpc(DeleteResponse.PartitionResult, "delete share group state")
_SUMMARY = _Rpc(SummaryResponse.PartitionResult, "read share group state summary")


def operation_error(error: int) -> int:
    """What a failed write means to the caller (Kafka's CoordinatorOperationExceptionHelper)."""
    if error == ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class ShareCoordinatorShard:
    """The share partitions of one partition of `__share_group_state`. `partition_count(topic_id)`:
    the topic's partition count as the metadata says now, None for an unknown topic."""

    def __init__(self, config: ShareCoordinatorConfig, partition_index: int,
                 partition_count: Callable[[uuid.UUID], int | None]) -> None:
        self.config = config
        self.partition_index = partition_index
        self._partition_count = partition_count
        self.share_state: dict[SharePartitionKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}  # the highest seen, from either record
        self.state_epochs: dict[SharePartitionKey, int] = {}  # the highest seen, from snapshots
        self.snapshot_update_counts: dict[SharePartitionKey, int] = {}  # updates since the last due snapshot
        self.offsets = ShareCoordinatorOffsetsManager()
        self.active = False  # until loaded
        # What requests hear while it is not active: in a cluster COORDINATOR_LOAD_IN_PROGRESS
        # while this broker loads the partition.
        self.inactive_error = ErrorCode.NOT_COORDINATOR
        self._appended_offset = -1  # the offset of the first record of the append being completed

    # --- loading --------------------------------------------------------------------------------

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        """One record of the partition, in log order, at its offset (RecordFormatError for a bad one)."""
        self._replay(offset, read_record(key, value))

    def _replay(self, offset: int, record: ShareRecord) -> None:
        key, value = record.key, record.value
        if record.snapshot:
            if value is None:
                log.debug("Tombstone records received for share partition key: %s", key)
                self.share_state.pop(key, None)
                self.leader_epochs.pop(key, None)
                self.state_epochs.pop(key, None)
                self.snapshot_update_counts.pop(key, None)
            else:
                self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
                self._raise_epoch(self.state_epochs, key, value.state_epoch)
                self.share_state[key] = value
                if self.snapshot_update_counts.get(key, -1) >= self.config.snapshot_update_records_per_snapshot:
                    self.snapshot_update_counts[key] = 0
            self.offsets.update_state(key, offset, value is None)
        else:
            assert value is not None  # read_record refuses update tombstones
            self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
            so_far = self.share_state.get(key)
            self.share_state[key] = value if so_far is None else _merge(so_far, value)
            self.snapshot_update_counts[key] = self.snapshot_update_counts.get(key, 0) + 1

    @staticmethod
    def _raise_epoch(epochs: dict[SharePartitionKey, int], key: SharePartitionKey, epoch: int) -> None:
        if epochs.get(key, epoch) <= epoch:
            epochs[key] = epoch

    def load_complete(self) -> None:
        self.active = True
        log.info("Loaded %d share partitions from %s-%d", len(self.share_state), SHARE_GROUP_STATE_TOPIC,
                 self.partition_index)

    def unload(self) -> None:
        """Stop coordinating (resigned, or shut down): later requests get NOT_COORDINATOR."""
        self.active = False
        self.inactive_error = ErrorCode.NOT_COORDINATOR

    # --- writes -----------------------------------------------------------------------------------

    def complete_append(self, append: Append, error: int, now_ms: int, first_offset: int) -> Actions:
        """The append's outcome; `first_offset`: its first record's offset in the log when it succeeded."""
        out = Actions()
        self._appended_offset = first_offset
        append.on_done(error, now_ms, out)
        return out

    def _write(self, out: Actions, ticket: Ticket | None, records: list[ShareRecord], rpc: _Rpc | None,
               result: Any, partition: int) -> None:
        """Append the records; once written, replay them and answer `result` (the RPC's failure if
        the append failed)."""
        def written(error: int, now_ms: int, out: Actions) -> None:
            if error != ErrorCode.NONE:
                log.info("Writing to %s-%d failed: %s", SHARE_GROUP_STATE_TOPIC, self.partition_index,
                         ErrorCode(error).name)
                if ticket is not None and rpc is not None:
                    out.respond(ticket, rpc.failed(partition, operation_error(error), error))
                return
            for i, record in enumerate(records):
                self._replay(self._appended_offset + i, record)
            if ticket is not None:
                out.respond(ticket, result)

        out.append(self.partition_index, [_encode(r) for r in records], written)

    def _refused(self, out: Actions, ticket: Ticket, rpc: _Rpc, partition: int) -> bool:
        if self.active:
            return False
        out.respond(ticket, rpc.failed(partition, self.inactive_error, self.inactive_error))
        return True

    def _unknown_partition(self, topic_id: uuid.UUID, partition: int, what: str) -> bool:
        count = self._partition_count(topic_id)
        if count is not None and count > partition:
            return False
        log.error("Topic or partition not found in metadata image when %s: %s-%d.", what, topic_id, partition)
        return True

    # --- the RPCs ----------------------------------------------------------------------------------

    def write_state(self, now_ms: int, ticket: Ticket, group_id: str, topic_id: uuid.UUID, data) -> Actions:
        """WriteShareGroupState for one partition (`data`: the request's PartitionData)."""
        out = Actions()
        rpc, partition = _WRITE, data.partition
        if self._refused(out, ticket, rpc, partition):
            return out
        key = SharePartitionKey(group_id, topic_id, partition)
        error = self._write_state_error(key, data)
        if error is not None:
            out.respond(ticket, rpc.error(partition, *error))
            return out
        record = self._share_state_record(key, data.leader_epoch, data.start_offset, data.delivery_complete_count,
                                          _batches(data.state_batches), False, now_ms)
        self._write(out, ticket, [record], rpc, WriteResponse.PartitionResult(partition=partition), partition)
        return out

    def _write_state_error(self, key: SharePartitionKey, data) -> tuple[int, str | None] | None:
        if data.partition < 0:
            return ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID
        if data.leader_epoch < 0:
            return ErrorCode.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH
        if data.state_epoch < 0:
            return ErrorCode.INVALID_REQUEST, NEGATIVE_STATE_EPOCH
        if key not in self.share_state:
            return ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED_SHARE_PARTITION
        if self.leader_epochs.get(key, data.leader_epoch) > data.leader_epoch:
            log.error("Write request leader epoch is smaller than last recorded current: %d, requested: %d.",
                      self.leader_epochs[key], data.leader_epoch)
            return ErrorCode.FENCED_LEADER_EPOCH, None
        if self.state_epochs.get(key, data.state_epoch) > data.state_epoch:
            log.info("Write request state epoch is smaller than last recorded current: %d, requested: %d.",
                     self.state_epochs[key], data.state_epoch)
            return ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE_EPOCH_MESSAGE
        if self._unknown_partition(key.topic_id, key.partition, "writing"):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return None

    def read_state(self, now_ms: int, ticket: Ticket, group_id: str, topic_id: uuid.UUID, data) -> Actions:
        """ReadShareGroupState for one partition (Kafka's readStateAndMaybeUpdateLeaderEpoch): a read
        at a new leader epoch records that epoch first, fencing the older leader's writes."""
        out = Actions()
        rpc, partition = _READ, data.partition
        if self._refused(out, ticket, rpc, partition):
            return out
        key = SharePartitionKey(group_id, topic_id, partition)
        error = self._read_state_error(key, data.leader_epoch)
        if error is not None:
            out.respond(ticket, rpc.error(partition, *error))
            return out
        value = self.share_state[key]
        result = ReadResponse.PartitionResult(
            partition=partition, start_offset=value.start_offset, state_epoch=value.state_epoch,
            state_batches=[ReadResponse.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                   delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                           for b in value.state_batches])
        if self.leader_epochs.get(key) == data.leader_epoch:
            out.respond(ticket, result)
            return out
        log.info("Read with leader epoch update call for key %s having new leader epoch %d.", key, data.leader_epoch)
        record = self._share_state_record(key, data.leader_epoch, value.start_offset, value.delivery_complete_count,
                                          (), True, now_ms)
        self._write(out, ticket, [record], rpc, result, partition)
        return out

    def _read_state_error(self, key: SharePartitionKey, leader_epoch: int) -> tuple[int, str | None] | None:
        if key.partition < 0:
            return ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID
        if leader_epoch < 0:
            return ErrorCode.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH
        if key not in self.share_state:
            log.error("Read on uninitialized share partition %s", key)
            return ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED_SHARE_PARTITION
        if self.leader_epochs.get(key, leader_epoch) > leader_epoch:
            log.error("Read request leader epoch is smaller than last recorded current: %d, requested: %d.",
                      self.leader_epochs[key], leader_epoch)
            return ErrorCode.FENCED_LEADER_EPOCH, None
        if self._unknown_partition(key.topic_id, key.partition, "reading"):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return None

    def read_state_summary(self, now_ms: int, ticket: Ticket, group_id: str, topic_id: uuid.UUID, data) -> Actions:
        """ReadShareGroupStateSummary for one partition: the state without its batches; an unknown
        share partition has start offset -1 (never initialized), not an error."""
        out = Actions()
        rpc, partition = _SUMMARY, data.partition
        if self._refused(out, ticket, rpc, partition):
            return out
        if partition < 0:
            out.respond(ticket, rpc.error(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID))
            return out
        if self._unknown_partition(topic_id, partition, "reading summary"):
            out.respond(ticket, rpc.error(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            return out
        value = self.share_state.get(SharePartitionKey(group_id, topic_id, partition))
        if value is None:
            out.respond(ticket, SummaryResponse.PartitionResult(partition=partition, start_offset=-1,
                                                                delivery_complete_count=-1, leader_epoch=0,
                                                                state_epoch=0))
        else:
            out.respond(ticket, SummaryResponse.PartitionResult(
                partition=partition, start_offset=value.start_offset,
                delivery_complete_count=value.delivery_complete_count, leader_epoch=value.leader_epoch,
                state_epoch=value.state_epoch))
        return out

    def delete_state(self, now_ms: int, ticket: Ticket, group_id: str, topic_id: uuid.UUID, data) -> Actions:
        """DeleteShareGroupState for one partition: a tombstone; deleting an unknown one succeeds."""
        out = Actions()
        rpc, partition = _DELETE, data.partition
        if self._refused(out, ticket, rpc, partition):
            return out
        if partition < 0:
            out.respond(ticket, rpc.error(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID))
            return out
        if self._unknown_partition(topic_id, partition, "deleting"):
            out.respond(ticket, rpc.error(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            return out
        key = SharePartitionKey(group_id, topic_id, partition)
        result = DeleteResponse.PartitionResult(partition=partition)
        if key not in self.share_state:
            log.warning("Attempted to delete non-existent share partition %s.", key)
            out.respond(ticket, result)
            return out
        self._write(out, ticket, [ShareRecord(key, True, None)], rpc, result, partition)
        return out

    def initialize_state(self, now_ms: int, ticket: Ticket, group_id: str, topic_id: uuid.UUID, data) -> Actions:
        """InitializeShareGroupState for one partition: a snapshot at the start offset (-1: to be
        resolved by the group's share.auto.offset.reset), a new state epoch replacing any older state."""
        out = Actions()
        rpc, partition = _INITIALIZE, data.partition
        if self._refused(out, ticket, rpc, partition):
            return out
        key = SharePartitionKey(group_id, topic_id, partition)
        error: tuple[int, str | None] | None = None
        if partition < 0:
            error = ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID
        elif data.state_epoch < 0:
            error = ErrorCode.INVALID_REQUEST, NEGATIVE_STATE_EPOCH
        elif self.state_epochs.get(key, data.state_epoch) > data.state_epoch:
            log.info("Initialize request state epoch is smaller than last recorded current: %d, requested: %d.",
                     self.state_epochs[key], data.state_epoch)
            error = ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE_EPOCH_MESSAGE
        elif self._unknown_partition(topic_id, partition, "initializing"):
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if error is not None:
            out.respond(ticket, rpc.error(partition, *error))
            return out
        current = self.share_state.get(key)
        value = ShareGroupOffset(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1, state_epoch=data.state_epoch,
            leader_epoch=0, start_offset=data.start_offset,
            delivery_complete_count=-1 if data.start_offset == -1 else 0,
            create_timestamp=now_ms, write_timestamp=now_ms)
        self._write(out, ticket, [ShareRecord(key, True, value)], rpc,
                    InitializeResponse.PartitionResult(partition=partition), partition)
        return out

    def _share_state_record(self, key: SharePartitionKey, leader_epoch: int, start_offset: int,
                            delivery_complete_count: int, batches: Iterable[PersisterStateBatch],
                            update_leader_epoch: bool, now_ms: int) -> ShareRecord:
        """Kafka's generateShareStateRecord: a ShareUpdate with the write's batches, or, once the
        partition has had its updates per snapshot, a ShareSnapshot of the combined state. A write
        never moves the start offset back, nor (but by a read) the leader epoch."""
        current = self.share_state[key]
        new_leader_epoch = leader_epoch if update_leader_epoch else current.leader_epoch
        new_start_offset = max(start_offset, current.start_offset)
        if start_offset == current.start_offset:
            delivery_complete_count = max(delivery_complete_count, current.delivery_complete_count)
        elif start_offset < current.start_offset:
            delivery_complete_count = current.delivery_complete_count
        if self.snapshot_update_counts.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
            return ShareRecord(key, True, ShareGroupOffset(
                snapshot_epoch=current.snapshot_epoch + 1, state_epoch=current.state_epoch,
                leader_epoch=new_leader_epoch, start_offset=new_start_offset,
                delivery_complete_count=delivery_complete_count,
                state_batches=tuple(combine_state_batches(current.state_batches, batches, new_start_offset)),
                create_timestamp=now_ms, write_timestamp=now_ms))
        return ShareRecord(key, False, ShareGroupOffset(
            snapshot_epoch=current.snapshot_epoch, state_epoch=0, leader_epoch=new_leader_epoch,
            start_offset=new_start_offset, delivery_complete_count=delivery_complete_count,
            state_batches=tuple(combine_state_batches((), batches, new_start_offset))))

    # --- periodic jobs and metadata ------------------------------------------------------------------

    def snapshot_cold_partitions(self, now_ms: int) -> Actions:
        """Kafka's snapshotColdPartitions: a snapshot of every share partition whose last one is
        older than share.coordinator.cold.partition.snapshot.interval.ms, so that pruning the topic
        is not held back by partitions no longer written (none when all were snapshotted so already)."""
        out = Actions()
        if not self.active:
            return out
        cold = sum(1 for v in self.share_state.values() if v.create_timestamp - v.write_timestamp != 0)
        if cold == len(self.share_state):
            log.debug("All share snapshot records already cold snapshotted, skipping.")
            return out
        records = [ShareRecord(key, True, value.but(snapshot_epoch=value.snapshot_epoch + 1, write_timestamp=now_ms))
                   for key, value in self.share_state.items()
                   if now_ms - value.write_timestamp >= self.config.cold_partition_snapshot_interval_ms]
        if records:
            self._write(out, None, records, None, None, -1)
        return out

    def cleanup_share_state(self, deleted_topic_ids: set[uuid.UUID]) -> Actions:
        """Kafka's maybeCleanupShareState: the share partitions of deleted topics are forgotten."""
        out = Actions()
        if not self.active or not deleted_topic_ids:
            return out
        records = [ShareRecord(key, True, None) for key in self.share_state if key.topic_id in deleted_topic_ids]
        if records:
            self._write(out, None, records, None, None, -1)
        return out

    def last_redundant_offset(self) -> int | None:
        """Where `__share_group_state`'s partition may be pruned to (deleteRecords), None for nowhere."""
        return self.offsets.last_redundant_offset()

    # --- for the persister and tests ----------------------------------------------------------------

    def state_of(self, key: SharePartitionKey) -> ShareGroupOffset | None:
        return self.share_state.get(key)


def _batches(wire_batches) -> tuple[PersisterStateBatch, ...]:
    return tuple(PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                 for b in wire_batches)


def _encode(record: ShareRecord) -> tuple[bytes, bytes | None]:
    if record.value is None:
        return tombstone_record(record.key)
    return (snapshot_record if record.snapshot else update_record)(record.key, record.value)


def _merge(so_far: ShareGroupOffset, update: ShareGroupOffset) -> ShareGroupOffset:
    """A ShareUpdate on top of the state before it (Kafka's ShareCoordinatorShard.merge)."""
    start_offset = so_far.start_offset if update.start_offset == -1 else update.start_offset
    leader_epoch = so_far.leader_epoch if update.leader_epoch == -1 else update.leader_epoch
    return ShareGroupOffset(
        snapshot_epoch=so_far.snapshot_epoch, state_epoch=so_far.state_epoch, leader_epoch=leader_epoch,
        start_offset=start_offset, delivery_complete_count=update.delivery_complete_count,
        state_batches=tuple(combine_state_batches(so_far.state_batches, update.state_batches, start_offset)),
        create_timestamp=so_far.create_timestamp, write_timestamp=so_far.write_timestamp)

