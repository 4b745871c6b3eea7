"""The ceiling and the trio floor get what a broker gets from librdkafka: lz4 batches stay lz4 (a
broker without FindCoordinator v0 is sent them uncompressed, without a word)."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import systems  # noqa: E402

ATTRIBUTES_AT, LZ4 = 21, 3


@pytest.mark.parametrize("system_class", [systems.Ceiling, systems.TrioFloor])
def test_librdkafka_sends_it_lz4_batches(system_class):
    system = system_class()
    system.start()
    try:
        system.create_topic("lz4", 1)
        producer = confluent_kafka.Producer({"bootstrap.servers": system.bootstrap, "compression.type": "lz4",
                                             "linger.ms": 5})
        for _ in range(200):
            producer.produce("lz4", b"a" * 1024)
        assert producer.flush(30) == 0
        (segment,) = system.data_files()
        data = segment.read_bytes()
        (attributes,) = struct.unpack_from(">h", data, ATTRIBUTES_AT)
        assert attributes & 0x07 == LZ4
        assert len(data) < 200 * 1024 // 10  # compressed, not merely labelled so
    finally:
        system.stop()
