"""Helpers for the storage tests: record batches built by kafka-python (an implementation
independent of ours), an explicit clock, and a LogConfig indexing every batch."""

from __future__ import annotations

import dataclasses

from kafka.record.default_records import DefaultRecordBatchBuilder

from samsa.storage.log_config import LogConfig

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
    """Kafka's defaults, except an index entry for every batch and no timestamp bound."""
    return dataclasses.replace(LogConfig(index_interval_bytes=0), **overrides)
