"""Records to a topic's partition leaders: one v2 batch per partition (wire/records.build_batch),
one Produce request per leader, the leaders asked in parallel; a leader that moved is looked up
again and the request retried, as Kafka's producer does. Shared by `samsa produce` and
`samsa bench produce`."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence

import trio

from ..wire.compression import CompressionType
from ..wire.errors import ErrorCode
from ..wire.protocol import message_class
from ..wire.records import Record, build_batch
from . import BAD_USAGE, CommandError
from .client import KafkaClient, check_error, send_without_response
from .partitioner import partition_for_key
from .record_io import InputRecord
from .topic_metadata import TopicInfo, describe_topic, response_topic_name, topic_reference

ProduceRequest = message_class("ProduceRequest")

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
COMPRESSIONS = [codec.client_name for codec in CompressionType]
TOPIC_IDS_SINCE = 13  # Produce v13 names topics by id
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS,
             ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
             ErrorCode.UNKNOWN_TOPIC_ID}
RETRIES = 5
RETRY_BACKOFF_S = 0.1


def build_partition_batch(records: Sequence[InputRecord], compression: int) -> bytes:
    """One batch of `records` (timestamps default to now), offsets 0..n-1 for the broker to assign."""
    now = int(time.time() * 1000)
    timestamps = [now if r.timestamp is None else r.timestamp for r in records]
    base = timestamps[0]
    return build_batch([Record(i, ts - base, r.key, r.value, r.headers)
                        for i, (r, ts) in enumerate(zip(records, timestamps))],
                       compression=compression, base_timestamp=base)


class Producer:
    """`await Producer.open(client, topic, acks, compression)`, then `partition_of(record)` and
    `await send({partition: [records]})`."""

    def __init__(self, client: KafkaClient, info: TopicInfo, acks: int, compression: int,
                 timeout_ms: int = 30_000) -> None:
        self.client, self.info = client, info
        self.acks, self.compression, self.timeout_ms = acks, compression, timeout_ms
        self._round_robin = itertools.cycle(info.partitions)

    @classmethod
    async def open(cls, client: KafkaClient, topic: str, acks: int, compression: int) -> Producer:
        return cls(client, await describe_topic(client, topic), acks, compression)

    def partition_of(self, record: InputRecord) -> int:
        """The record's own partition, else its key's (Kafka's murmur2), else the next in turn."""
        if record.partition is not None:
            if record.partition not in self.info.leaders:
                raise CommandError(f"{self.info.name} has no partition {record.partition}", BAD_USAGE)
            return record.partition
        if record.key is not None:
            return partition_for_key(record.key, len(self.info.leaders))
        return next(self._round_robin)

    async def send(self, records: Mapping[int, Sequence[InputRecord]]) -> dict[int, int]:
        """Each partition's records as one batch; the base offset each got (-1 with acks=0)."""
        batches = {p: build_partition_batch(rs, self.compression) for p, rs in records.items() if rs}
        return await self.send_batches(batches)

    async def send_batches(self, batches: dict[int, bytes]) -> dict[int, int]:
        offsets: dict[int, int] = {}
        pending = dict(batches)
        for attempt in range(RETRIES + 1):
            failed: dict[int, ErrorCode] = {}
            async with trio.open_nursery() as nursery:
                for leader, partitions in self.info.by_leader(sorted(pending)).items():
                    nursery.start_soon(self._send_to, leader, {p: pending[p] for p in partitions}, offsets, failed)
            if not failed:
                return offsets
            if attempt == RETRIES:
                break
            pending = {p: pending[p] for p in failed}
            await trio.sleep(RETRY_BACKOFF_S)
            self.info = await describe_topic(self.client, self.info.name)
        partition, code = next(iter(failed.items()))
        check_error(code, None, f"{self.info.name}-{partition}")
        return offsets

    async def _send_to(self, leader: int, batches: dict[int, bytes], offsets: dict[int, int],
                       failed: dict[int, ErrorCode]) -> None:
        version = await self.client.api_version(ProduceRequest, leader)
        request = ProduceRequest(acks=self.acks, timeout_ms=self.timeout_ms, topic_data=[ProduceRequest.TopicProduceData(
            **topic_reference(self.info, version, TOPIC_IDS_SINCE),
            partition_data=[ProduceRequest.PartitionProduceData(index=p, records=b) for p, b in batches.items()])])
        if self.acks == 0:
            await send_without_response(self.client, request, leader)
            offsets.update(dict.fromkeys(batches, -1))
            return
        response = await self.client.send(request, leader)
        for topic in response.responses:
            if response_topic_name(topic, self.info) != self.info.name:
                continue
            for partition in topic.partition_responses:
                if partition.error_code in RETRIABLE:
                    failed[partition.index] = ErrorCode(partition.error_code)
                else:
                    check_error(partition.error_code, partition.error_message, f"{self.info.name}-{partition.index}")
                    offsets[partition.index] = partition.base_offset
