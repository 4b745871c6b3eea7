"""Helpers for the storage tests: record batches built by kafka-python (an implementation
independent of ours), an explicit clock, a LogConfig indexing every batch, and a log cleaner over
given logs with the batches a log holds."""

from __future__ import annotations

import dataclasses

from kafka.record.default_records import DefaultRecordBatchBuilder

from samsa.storage.log import Log
from samsa.storage.log_cleaner import CleanerConfig, LogCleaner
from samsa.storage.log_config import LogConfig
from samsa.wire.records import is_crc_valid, iter_batch_headers

NO_PRODUCER = (-1, -1, -1)


def make_batch(timestamps=(1000,), *, value_size: int = 10, compression: int = 0, key: bytes | None = b"k",
               producer: tuple[int, int, int] = NO_PRODUCER) -> bytearray:
    """A v2 batch with one record per timestamp, base offset 0."""
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=0,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=1 << 30)
    for delta, timestamp in enumerate(timestamps):
        builder.append(delta, timestamp=timestamp, key=key, value=bytes(value_size), headers=[])
    return bytearray(builder.build())


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def small_config(**overrides) -> LogConfig:
    """Kafka's defaults, except an index entry for every batch."""
    return dataclasses.replace(LogConfig(index_interval_bytes=0), **overrides)


def cleaner_for(directory, clock, *logs, **config) -> LogCleaner:
    cleaner = LogCleaner(CleanerConfig(**config), [directory], lambda: list(logs), clock)
    cleaner.load_checkpoints()
    return cleaner


def batches(log: Log):
    """(header, bytes) of every batch, each checked for its CRC."""
    out = []
    for segment in log.segments:
        data = segment.log.read_bytes()
        for position, header in iter_batch_headers(data):
            assert is_crc_valid(data, position, header)
            out.append((header, data[position:position + header.size]))
    return out
