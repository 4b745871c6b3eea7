"""samsa produce and samsa consume against a real broker: round trips in text and JSON with keys
and headers, starting points, a group's committed offsets, exit codes."""

from __future__ import annotations

import json

import group_broker

from samsa.cli.fetching import READ_COMMITTED, READ_UNCOMMITTED, decode_partition
from samsa.cli.partitioner import murmur2, partition_for_key
from samsa.cli.record_io import OutputRecord, format_json, parse_json_line
from samsa.wire import records

broker = group_broker.broker  # this module's broker, instead of conftest's




def test_murmur2_is_kafkas():
    # Kafka's UtilsTest.testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_text_round_trip_with_keys_and_headers(broker, samsa, stdin, topic):
    stdin(b"k1:v1\nk2:v2\nno separator here\nk1:v3")
    code, out, err = samsa("produce", topic, "-K", ":", "-H", "source=test", "-H", "n=1", "-b", broker)
    assert (code, out, err) == (0, "", "")

    code, out, err = samsa("consume", topic, "-f", "json", "-c", "4", "-b", broker)
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted((r["key"] or "", r["value"]) for r in records) == [
        ("", "no separator here"), ("k1", "v1"), ("k1", "v3"), ("k2", "v2")]
    assert all(r["headers"] == {"source": "test", "n": "1"} for r in records)
    by_key = {r["key"]: r["partition"] for r in records}
    assert by_key["k1"] == partition_for_key(b"k1", 3) and by_key["k2"] == partition_for_key(b"k2", 3)
    k1 = [r["value"] for r in records if r["key"] == "k1"]
    assert k1 == ["v1", "v3"]  # one partition keeps the order

    code, out, _ = samsa("consume", topic, "-K", "=", "-p", str(partition_for_key(b"k1", 3)), "-e", "-b", broker)
    assert out == "k1=v1\nk1=v3\n"


def test_json_round_trip(broker, samsa, stdin, topic):
    lines = [
        {"key": "a", "value": "plain text", "headers": {"h": "x"}},
        {"key": None, "value": {"nested": [1, 2]}, "partition": 2},
        {"key": "b", "value": None, "headers": [["dup", "1"], ["dup", "2"]], "timestamp": 1_700_000_000_000},
    ]
    stdin("\n".join(json.dumps(line) for line in lines).encode() + b"\n\n")
    code, _, err = samsa("produce", topic, "-f", "json", "--acks", "1", "--compression", "gzip", "-b", broker)
    assert code == 0, err

    code, out, err = samsa("consume", topic, "-f", "json", "-e", "-b", broker)
    assert code == 0, err
    records = sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["partition"])
    assert len(records) == 3
    by_key = {r["key"]: r for r in records}
    assert by_key["a"]["value"] == "plain text" and by_key["a"]["headers"] == {"h": "x"}
    assert by_key[None]["value"] == '{"nested":[1,2]}' and by_key[None]["partition"] == 2
    assert by_key["b"]["value"] is None and by_key["b"]["headers"] == [["dup", "1"], ["dup", "2"]]
    assert by_key["b"]["timestamp"] == 1_700_000_000_000
    assert {r["topic"] for r in records} == {topic}
    assert len({(r["partition"], r["offset"]) for r in records}) == 3

    # consume's JSON is produce's input: the records go round again unchanged but for their offsets
    stdin(out.encode())
    assert samsa("produce", topic, "-f", "json", "-b", broker)[0] == 0
    code, again, _ = samsa("consume", topic, "-f", "json", "-e", "-b", broker)
    without_offset = [json.dumps({k: v for k, v in json.loads(line).items() if k != "offset"}) for line in again.splitlines()]
    assert len(without_offset) == 6 and all(without_offset.count(r) == 2 for r in without_offset)


def test_starting_points(broker, samsa, stdin, topic):
    stdin(b"".join(b"v%d\n" % i for i in range(5)))
    assert samsa("produce", topic, "-p", "1", "--acks", "0", "-b", broker)[0] == 0
    # acks=0 awaits nothing; a later request on a new connection still finds the records once written
    code, out, _ = samsa("consume", topic, "-p", "1", "-c", "5", "--timeout", "5", "-b", broker)
    assert out == "v0\nv1\nv2\nv3\nv4\n"
    assert samsa("consume", topic, "-p", "1", "--from", "3", "-e", "-b", broker)[1] == "v3\nv4\n"
    assert samsa("consume", topic, "-p", "1", "--from=-2", "-e", "-b", broker)[1] == "v3\nv4\n"
    assert samsa("consume", topic, "-p", "1", "--from", "end", "-e", "-b", broker)[1] == ""
    assert samsa("consume", topic, "-p", "1", "--from", "@0", "-c", "1", "-b", broker)[1] == "v0\n"
    assert samsa("consume", topic, "-p", "1", "--from", "@4102444800000", "-e", "-b", broker)[1] == ""  # 2100
    code, out, _ = samsa("consume", topic, "--timeout", "0.2", "-b", broker)
    assert (code, out) == (0, "v0\nv1\nv2\nv3\nv4\n")


def test_a_group_resumes_where_it_committed(broker, samsa, stdin, topic):
    stdin(b"".join(b"v%d\n" % i for i in range(6)))
    assert samsa("produce", topic, "-p", "0", "-b", broker)[0] == 0
    assert samsa("consume", topic, "-g", "resumer", "-c", "2", "-b", broker)[1] == "v0\nv1\n"
    assert samsa("consume", topic, "-g", "resumer", "-c", "3", "-b", broker)[1] == "v2\nv3\nv4\n"
    assert samsa("consume", topic, "-g", "resumer", "-e", "-b", broker)[1] == "v5\n"
    assert samsa("consume", topic, "-g", "resumer", "-e", "-b", broker)[1] == ""


def test_broker_errors_are_exit_1_and_bad_usage_exit_2(broker, samsa, stdin, topic):
    code, _, err = samsa("consume", "no-such-topic", "-e", "-b", broker)
    assert code == 1 and err == "samsa consume: no-such-topic: UNKNOWN_TOPIC_OR_PARTITION: " \
                                "This server does not host this topic-partition.\n"
    stdin(b"x\n")
    assert samsa("produce", "no-such-topic", "-b", broker)[0] == 1
    stdin(b"not json\n")
    code, _, err = samsa("produce", topic, "-f", "json", "-b", broker)
    assert code == 2 and err.startswith("samsa produce: line 1: not JSON")
    assert samsa("consume", topic, "--from", "yesterday", "-b", broker)[0] == 2
    assert samsa("produce", topic, "--acks", "2", "-b", broker)[0] == 2
    assert samsa("produce", topic, "-H", "no-equals", "-b", broker)[0] == 2
    code, _, err = samsa("consume", topic, "-p", "7", "-b", broker)
    assert (code, err) == (2, f"samsa consume: {topic} has no partition 7\n")


def test_read_committed_drops_aborted_transactions_and_markers():
    def batch(offset: int, values: list[bytes], producer_id: int = -1) -> bytes:
        return records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate(values)],
                                   base_offset=offset, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                   base_sequence=0 if producer_id >= 0 else -1, is_transactional=producer_id >= 0)

    log = (batch(0, [b"aborted-0", b"aborted-1"], producer_id=7)
           + records.build_control_batch("ABORT", 7, 0, 0, base_offset=2, timestamp=0)
           + batch(3, [b"plain"])
           + batch(4, [b"committed"], producer_id=8)
           + records.build_control_batch("COMMIT", 8, 0, 0, base_offset=5, timestamp=0))
    aborted = [(7, 0)]
    committed, end = decode_partition("t", 0, log, 0, aborted, READ_COMMITTED)
    assert [(r.offset, r.value) for r in committed] == [(3, b"plain"), (4, b"committed")] and end == 6
    everything, _ = decode_partition("t", 0, log, 1, aborted, READ_UNCOMMITTED)
    assert [r.value for r in everything] == [b"aborted-1", b"plain", b"committed"]  # from offset 1, no markers
    assert decode_partition("t", 0, log[:-10], 0, aborted, READ_COMMITTED)[1] == 5  # a partial last batch waits


def test_json_lines_keep_bytes_that_are_not_utf8():
    record = OutputRecord("t", 0, 1, 2, b"\xff\xfek", "café \x80".encode() + b"\x80", [("h", b"\x00\x9f")])
    line = format_json(record)
    assert json.loads(line)["key"] == "\udcff\udcfek"  # valid JSON: the bytes as escapes
    again = parse_json_line(line, 1, [])
    assert (again.key, again.value, again.headers) == (record.key, record.value, record.headers)
