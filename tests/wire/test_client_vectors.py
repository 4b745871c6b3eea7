"""Request frames captured from real clients (tools/capture_vectors.py) decode to what they sent.

Each directory under vectors/ holds one client's frames for one compression codec and sent.json,
the records it produced. Decoding must give back that topic, partition and those records, and
encoding the decoded request must give back the client's bytes exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samsa.wire.compression import CompressionType
from samsa.wire.protocol import ApiKey, decode_request, encode_request
from samsa.wire.records import decode_batch, iter_batch_headers

VECTORS = Path(__file__).resolve().parent / "vectors"
SESSIONS = sorted(p for p in VECTORS.iterdir() if (p / "sent.json").is_file())


def load(session: Path) -> tuple[dict, list[tuple[dict, bytes]]]:
    sent = json.loads((session / "sent.json").read_text())
    frames = [(f, bytes.fromhex((session / f["file"]).read_text())) for f in sent["frames"]]
    return sent, frames


def optional_bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def test_every_client_and_codec_was_captured():
    names = {p.name for p in SESSIONS}
    for client in ("librdkafka", "kafka-python"):
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            assert f"{client}-{codec}" in names


@pytest.mark.parametrize("session", SESSIONS, ids=lambda p: p.name)
def test_frames_decode_and_reencode_to_the_same_bytes(session):
    sent, frames = load(session)
    assert [f["api_key"] for f, _ in frames].count(ApiKey.PRODUCE) == 1
    for described, frame in frames:
        header, request = decode_request(frame)
        assert (header.request_api_key, header.request_api_version) == (described["api_key"], described["api_version"])
        assert header.client_id.startswith("vectors-")
        again = encode_request(request, header.request_api_version, header.correlation_id, header.client_id)
        assert bytes(again[4:]) == frame


@pytest.mark.parametrize("session", SESSIONS, ids=lambda p: p.name)
def test_api_versions_and_metadata_requests(session):
    sent, frames = load(session)
    asked_for_topic = False
    for _described, frame in frames:
        header, request = decode_request(frame)
        if header.request_api_key == ApiKey.API_VERSIONS:
            assert request.client_software_name and request.client_software_version
        elif header.request_api_key == ApiKey.METADATA:
            names = [t.name for t in request.topics]  # [] at bootstrap: brokers only
            assert names in ([], [sent["topic"]])
            asked_for_topic |= names == [sent["topic"]]
    assert asked_for_topic


@pytest.mark.parametrize("session", SESSIONS, ids=lambda p: p.name)
def test_produce_request_carries_the_records_sent(session):
    sent, frames = load(session)
    [frame] = [frame for described, frame in frames if described["api_key"] == ApiKey.PRODUCE]
    _, request = decode_request(frame)
    [topic] = request.topic_data
    [partition] = topic.partition_data
    assert (topic.name, partition.index) == (sent["topic"], sent["partition"])
    records = partition.records
    assert isinstance(records, memoryview)  # zero-copy into the frame

    batches = list(iter_batch_headers(records))
    assert sum(header.size for _, header in batches) == len(records)
    expected_codec = CompressionType[sent["compression"].upper()]
    decoded = []
    for pos, header in batches:
        assert header.magic == 2 and header.compression == expected_codec
        assert header.producer_id == -1 and header.base_sequence == -1  # not idempotent
        batch_header, batch_records = decode_batch(records, pos)
        assert batch_header == header and len(batch_records) == header.records_count
        decoded += [(header, record) for record in batch_records]

    expected = sent["records"]
    assert len(decoded) == len(expected)
    for (header, record), want in zip(decoded, expected):
        assert record.key == optional_bytes(want["key"])
        assert record.value == optional_bytes(want["value"])
        assert header.record_timestamp(record) == want["timestamp"]
        assert [(name, value) for name, value in record.headers] == \
            [(name, optional_bytes(value)) for name, value in want["headers"]]
    first, *_ = batches
    assert first[1].base_timestamp == expected[0]["timestamp"]
    assert batches[-1][1].max_timestamp == expected[-1]["timestamp"]
