"""What the share fetch tests share: a persister kept in memory (a real implementation of
server/share/persister.py's Protocol, standing in for the share coordinator's until it is wired),
and the ShareFetch / ShareAcknowledge requests a share consumer sends."""

from __future__ import annotations

import uuid

from samsa.coordinator.share_state import UNINITIALIZED_START_OFFSET, PersisterStateBatch, SharePartitionState
from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

ShareFetch = request_class(ApiKey.SHARE_FETCH)
ShareAcknowledge = request_class(ApiKey.SHARE_ACKNOWLEDGE)
ACCEPT, RELEASE, REJECT, RENEW, GAP = 1, 2, 3, 4, 0


class MemoryPersister:
    """The share coordinator's state in a dict: what it was written, as ReadShareGroupState reads
    it back. A write's batches replace what they overlap; batches below its start offset go; an
    older state or leader epoch is fenced, as Kafka's ShareCoordinatorShard answers."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, uuid.UUID, int], SharePartitionState] = {}
        self.writes: list[tuple[tuple[str, uuid.UUID, int], SharePartitionState]] = []
        self.fail_writes_with: int | None = None  # an error every write answers, when set

    async def initialize_state(self, group_id, topic_id, partition, state_epoch, start_offset) -> int:
        self.states[(group_id, topic_id, partition)] = SharePartitionState(state_epoch, start_offset)
        return ErrorCode.NONE

    async def read_state(self, group_id, topic_id, partition, leader_epoch):
        key = (group_id, topic_id, partition)
        state = self.states.get(key)
        if state is None:  # never initialized: the share partition resolves its start offset
            return ErrorCode.NONE, SharePartitionState(0, UNINITIALIZED_START_OFFSET, leader_epoch)
        if leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        state = SharePartitionState(state.state_epoch, state.start_offset, leader_epoch, state.state_batches,
                                    state.delivery_complete_count)
        self.states[key] = state
        return ErrorCode.NONE, state

    async def write_state(self, group_id, topic_id, partition, state: SharePartitionState) -> int:
        if self.fail_writes_with is not None:
            return self.fail_writes_with
        key = (group_id, topic_id, partition)
        old = self.states.get(key)
        if old is not None and state.state_epoch < old.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        if old is not None and state.leader_epoch < old.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        self.writes.append((key, state))
        offsets: dict[int, tuple[int, int]] = {}
        for batch in (old.state_batches if old is not None else []):
            for offset in range(batch.first_offset, batch.last_offset + 1):
                offsets[offset] = (batch.delivery_state, batch.delivery_count)
        for batch in state.state_batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                offsets[offset] = (batch.delivery_state, batch.delivery_count)
        start = state.start_offset if state.start_offset >= 0 else (old.start_offset if old else 0)
        merged: list[PersisterStateBatch] = []
        for offset in sorted(o for o in offsets if o >= start):
            delivery_state, count = offsets[offset]
            last = merged[-1] if merged else None
            if (last is not None and last.last_offset + 1 == offset and last.delivery_state == delivery_state
                    and last.delivery_count == count):
                merged[-1] = PersisterStateBatch(last.first_offset, offset, delivery_state, count)
            else:
                merged.append(PersisterStateBatch(offset, offset, delivery_state, count))
        self.states[key] = SharePartitionState(state.state_epoch, start, state.leader_epoch, merged,
                                               state.delivery_complete_count)
        return ErrorCode.NONE

    async def delete_state(self, group_id, topic_id, partitions):
        for partition in partitions:
            self.states.pop((group_id, topic_id, partition), None)
        return {partition: ErrorCode.NONE for partition in partitions}

    async def read_summary(self, group_id, topic_id, partition, leader_epoch):
        state = self.states.get((group_id, topic_id, partition))
        if state is None:
            return ErrorCode.NONE, SharePartitionState(0, UNINITIALIZED_START_OFFSET, leader_epoch)
        return ErrorCode.NONE, SharePartitionState(state.state_epoch, state.start_offset, state.leader_epoch, [],
                                                   state.delivery_complete_count)


def share_fetch(group: str, member: str, epoch: int, topic_id: uuid.UUID | None = None, partitions=(0,), *,
                max_wait_ms: int = 5000, min_bytes: int = 1, max_bytes: int = 1 << 20, max_records: int = 500,
                batch_size: int = 500, acks: dict[int, list[tuple[int, int, list[int]]]] | None = None,
                forget: list[int] | None = None, acquire_mode: int = 0, renew: bool = False):
    """A ShareFetch for `partitions` of one topic, with acknowledgements {partition: [(first, last, types)]}."""
    acks = acks or {}
    topics = []
    if topic_id is not None and (partitions or acks):
        topics.append(ShareFetch.FetchTopic(topic_id=topic_id, partitions=[
            ShareFetch.FetchPartition(partition_index=p, acknowledgement_batches=[
                ShareFetch.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=types)
                for f, last, types in acks.get(p, ())])
            for p in sorted(set(partitions) | set(acks))]))
    forgotten = [ShareFetch.ForgottenTopic(topic_id=topic_id, partitions=forget)] if forget else []
    return ShareFetch(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
                      min_bytes=min_bytes, max_bytes=max_bytes, max_records=max_records, batch_size=batch_size,
                      share_acquire_mode=acquire_mode, is_renew_ack=renew, topics=topics,
                      forgotten_topics_data=forgotten)


def share_acknowledge(group: str, member: str, epoch: int, topic_id: uuid.UUID,
                      acks: dict[int, list[tuple[int, int, list[int]]]], renew: bool = False):
    return ShareAcknowledge(group_id=group, member_id=member, share_session_epoch=epoch, is_renew_ack=renew, topics=[
        ShareAcknowledge.AcknowledgeTopic(topic_id=topic_id, partitions=[
            ShareAcknowledge.AcknowledgePartition(partition_index=p, acknowledgement_batches=[
                ShareAcknowledge.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=types)
                for f, last, types in batches])
            for p, batches in acks.items()])])


def fetched_values(partition) -> list[tuple[int, bytes]]:
    """(offset, value) of the records of a ShareFetch partition that its acquired ranges cover, as a
    share consumer takes them (control records left out)."""
    ranges = [(a.first_offset, a.last_offset) for a in partition.acquired_records]
    out = []
    for header, record in records.iter_records(bytes(partition.records or b"")):
        offset = header.record_offset(record)
        if not header.is_control and any(first <= offset <= last for first, last in ranges):
            out.append((offset, record.value))
    return out


def acquired(partition) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in partition.acquired_records]
