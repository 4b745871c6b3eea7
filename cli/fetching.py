"""Reading a topic: offsets by ListOffsets (earliest, latest, by timestamp) and records by Fetch
from each partition's leader, the batches decoded by wire/records. Shared by `samsa consume`,
`samsa groups` and `samsa bench consume`.

read_committed, as Kafka's consumer does it: the broker returns records up to the last stable
offset with the list of aborted transactions (producer id, first offset) in that range; a
transactional batch is dropped while its producer has an aborted transaction open at that point,
which the producer's ABORT marker closes. Control batches are never shown.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import NamedTuple

import trio

from ..wire.errors import ErrorCode
from ..wire.protocol import message_class
from ..wire.records import ControlRecordType, decode_batch, iter_batch_headers, parse_control_record, peek_magic
from . import CommandError
from .client import KafkaClient, check_error
from .record_io import OutputRecord
from .topic_metadata import TopicInfo, describe_topic, response_topic_name, topic_reference

ListOffsetsRequest = message_class("ListOffsetsRequest")
FetchRequest = message_class("FetchRequest")

EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
FETCH_TOPIC_IDS_SINCE = 13
LEADER_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
                ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.REPLICA_NOT_AVAILABLE}
PARTITION_MAX_BYTES = 1 << 20
FETCH_MAX_BYTES = 50 << 20


async def list_offsets(client: KafkaClient, info: TopicInfo, timestamps: dict[int, int],
                       isolation: int = READ_UNCOMMITTED) -> dict[int, int]:
    """The offset ListOffsets gives each partition for its timestamp (EARLIEST, LATEST or ms): for
    a timestamp, the first offset at or after it, LATEST's offset when no record is that recent."""
    found: dict[int, int] = {}

    async def ask(leader: int, partitions: list[int]) -> None:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, timeout_ms=30_000, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=info.name, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                                        timestamp=timestamps[p]) for p in partitions])])
        response = await client.send(request, leader)
        for topic in response.topics:
            for partition in topic.partitions:
                check_error(partition.error_code, None, f"{info.name}-{partition.partition_index}")
                found[partition.partition_index] = partition.offset

    async with trio.open_nursery() as nursery:
        for leader, partitions in info.by_leader(sorted(timestamps)).items():
            nursery.start_soon(ask, leader, partitions)
    missing = [p for p, offset in found.items() if offset < 0]  # no record at or after the timestamp
    if missing:
        found.update(await list_offsets(client, info, dict.fromkeys(missing, LATEST), isolation))
    return found


def decode_partition(topic: str, partition: int, data, position: int, aborted: Iterable[tuple[int, int]],
                     isolation: int) -> tuple[list[OutputRecord], int]:
    """The records at or after `position` in a Fetch response's records, and the position after
    the last complete batch."""
    records: list[OutputRecord] = []
    aborted_by_offset = sorted(aborted, key=lambda a: a[1])
    open_aborts: set[int] = set()
    next_position = position
    if len(data) and peek_magic(data) < 2:
        raise CommandError(f"{topic}-{partition}: the log holds message format v0/v1, which consume does not read")
    for pos, header in iter_batch_headers(data):
        next_position = max(next_position, header.next_offset)
        if header.last_offset < position:
            continue
        if isolation == READ_COMMITTED:
            while aborted_by_offset and aborted_by_offset[0][1] <= header.last_offset:
                open_aborts.add(aborted_by_offset.pop(0)[0])
        _, batch = decode_batch(data, pos)
        if header.is_control:
            for record in batch:
                if parse_control_record(record).type is ControlRecordType.ABORT:
                    open_aborts.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in open_aborts:
            continue
        for record in batch:
            offset = header.record_offset(record)
            if offset >= position:
                records.append(OutputRecord(topic, partition, offset, header.record_timestamp(record),
                                            record.key, record.value, record.headers, header.timestamp_type))
    return records, next_position


class BatchCount(NamedTuple):
    records: int
    bytes: int  # the batch's size as fetched (compressed, header included)


def count_batches(topic: str, partition: int, data, position: int, aborted, isolation: int
                  ) -> tuple[list[BatchCount], int]:
    """decode_partition's work for a bench: each complete batch's record count and size from its
    header alone (control batches left out; read_committed's filtering is not done)."""
    counts, next_position = [], position
    for _, header in iter_batch_headers(data):
        next_position = max(next_position, header.next_offset)
        if header.last_offset >= position and not header.is_control:
            counts.append(BatchCount(header.records_count, header.size))
    return counts, next_position


class Fetcher:
    """Positions per partition; each `await poll()` fetches once from every leader concerned (in
    parallel) and returns the records in partition order, advancing the positions past them.
    `end_offsets` holds each partition's high watermark (last stable offset with read_committed)
    as last seen."""

    def __init__(self, client: KafkaClient, info: TopicInfo, positions: dict[int, int],
                 isolation: int = READ_UNCOMMITTED, max_wait_ms: int = 500, decode=None) -> None:
        """`decode`: what poll() makes of a partition's records, decode_partition's signature
        (`count_batches` for a bench, which needs no record decoded)."""
        self.client, self.info = client, info
        self.decode = decode or decode_partition
        self.positions = dict(positions)
        self.isolation, self.max_wait_ms = isolation, max_wait_ms
        self.end_offsets: dict[int, int] = {}
        self._partition_max_bytes = dict.fromkeys(positions, PARTITION_MAX_BYTES)

    def at_end(self) -> bool:
        return all(p in self.end_offsets and self.positions[p] >= self.end_offsets[p] for p in self.positions)

    async def poll(self) -> list:
        fetched: dict[int, list] = {}
        moved: list[int] = []
        async with trio.open_nursery() as nursery:
            for leader, partitions in self.info.by_leader(sorted(self.positions)).items():
                nursery.start_soon(self._fetch_from, leader, partitions, fetched, moved)
        if moved:
            self.info = await describe_topic(self.client, self.info.name)
        return [record for partition in sorted(fetched) for record in fetched[partition]]

    async def _fetch_from(self, leader: int, partitions: list[int], fetched: dict[int, list[OutputRecord]],
                          moved: list[int]) -> None:
        version = await self.client.api_version(FetchRequest, leader)
        request = FetchRequest(
            replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=1, max_bytes=FETCH_MAX_BYTES,
            isolation_level=self.isolation, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(**topic_reference(self.info, version, FETCH_TOPIC_IDS_SINCE, "topic"),
                                            partitions=[FetchRequest.FetchPartition(
                                                partition=p, current_leader_epoch=-1, fetch_offset=self.positions[p],
                                                last_fetched_epoch=-1, log_start_offset=-1,
                                                partition_max_bytes=self._partition_max_bytes[p])
                                                for p in partitions])])
        response = await self.client.send(request, leader)
        check_error(response.error_code)
        for topic in response.responses:
            if response_topic_name(topic, self.info) != self.info.name:
                continue
            for data in topic.partitions:
                await self._take(data, fetched, moved)

    async def _take(self, data, fetched: dict[int, list], moved: list[int]) -> None:
        partition = data.partition_index
        if data.error_code in LEADER_MOVED:
            moved.append(partition)
            return
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            reset = await list_offsets(self.client, self.info, {partition: EARLIEST}, self.isolation)
            print(f"{self.info.name}-{partition}: offset {self.positions[partition]} is out of range, "
                  f"resetting to the earliest, {reset[partition]}", file=sys.stderr)
            self.positions[partition] = reset[partition]
            return
        check_error(data.error_code, None, f"{self.info.name}-{partition}")
        self.end_offsets[partition] = (data.last_stable_offset if self.isolation == READ_COMMITTED
                                       and data.last_stable_offset >= 0 else data.high_watermark)
        aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
        records, next_position = self.decode(self.info.name, partition, data.records or b"",
                                                  self.positions[partition], aborted, self.isolation)
        if next_position == self.positions[partition] and data.records and len(data.records):
            self._partition_max_bytes[partition] *= 2  # a batch larger than we asked for: ask for more
        self.positions[partition] = next_position
        fetched[partition] = records
