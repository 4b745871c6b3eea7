"""kcat 1.7.1 (Debian, librdkafka 2.0.2) against a real broker, run as a subprocess: produce and
consume with every codec, keys, NULLs and headers; metadata listing; offset queries."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from compat_util import CODECS, confluent_consume_all, create_topic
from confluent_kafka import Producer

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (compat-tests/install.sh)")

T = 30


def kcat(broker, *args, input: bytes | None = None, timeout: float = T, check: bool = True):
    cmd = ["kcat", "-b", broker.bootstrap, "-m", "10", *args]
    p = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\nstdout: {p.stdout[-3000:]!r}\nstderr: {p.stderr[-3000:]!r}")
    return p


def lines_of(n):
    """kcat input lines key<TAB>value; empty key or value means NULL (-Z)."""
    out = []
    for i in range(n):
        key = "" if i % 5 == 1 else f"key-{i}"
        value = "" if i % 7 == 3 else f"value-{i} " + "lorem ipsum dolor sit amet " * (i % 9 + 1)
        out.append((key, value))
    return out


def consume_json(broker, topic, partition=0, *extra):
    p = kcat(broker, "-C", "-t", topic, "-p", str(partition), "-e", "-q", "-J", *extra)
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name)
    data = lines_of(30)
    stdin = "".join(f"{k}\t{v}\n" for k, v in data).encode()
    kcat(broker, "-P", "-t", topic_name, "-p", "0", "-K", "\t", "-Z", "-H", "h1=one", "-H", "dup=a",
         "-H", "dup=b", "-X", f"compression.codec={codec}", "-X", "linger.ms=20", input=stdin)

    msgs = consume_json(broker, topic_name)
    assert [m["offset"] for m in msgs] == list(range(30))
    for m, (k, v) in zip(msgs, data):
        assert m["key"] == (k or None)
        assert m["payload"] == (v or None)
        assert m["headers"] == ["h1", "one", "dup", "a", "dup", "b"]
        assert m["tstype"] == "create"

    # The same records read by another client: NULLs are NULLs, not empty strings.
    got = confluent_consume_all(broker.bootstrap, topic_name, {0: 30})[0]
    assert [(m.key(), m.value()) for m in got] == [
        (k.encode() or None, v.encode() or None) for k, v in data]
    assert got[0].headers() == [("h1", b"one"), ("dup", b"a"), ("dup", b"b")]


def test_metadata_list(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    md = json.loads(kcat(broker, "-L", "-J", "-t", topic_name).stdout)
    assert len(md["brokers"]) == 1
    b = md["brokers"][0]
    assert b["name"] == broker.bootstrap
    (t,) = md["topics"]
    assert t["topic"] == topic_name and "error" not in t
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]
    for p in t["partitions"]:
        assert p["leader"] == b["id"]
        assert p["replicas"] == [{"id": b["id"]}] and p["isrs"] == [{"id": b["id"]}]

    full = json.loads(kcat(broker, "-L", "-J").stdout)
    assert topic_name in [x["topic"] for x in full["topics"]]


def test_offsets_and_timestamps(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    base = (int(time.time()) - 1800) * 1000
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(10):
        p.produce(topic_name, f"m{i}".encode(), key=f"k{i}".encode(), partition=0, timestamp=base + i * 100)
    assert p.flush(T) == 0

    def query(ts):
        out = kcat(broker, "-Q", "-t", f"{topic_name}:0:{ts}").stdout.decode()
        line = [x for x in out.splitlines() if x.startswith(topic_name)][0]
        return int(line.rsplit(" ", 1)[1])

    assert query(base) == 0
    assert query(base + 350) == 4
    assert query(base + 900) == 9
    assert query(base + 10_000) == -1

    def values(*args):
        out = kcat(broker, "-C", "-t", topic_name, "-p", "0", "-e", "-q", "-f", "%o:%s\n", *args).stdout.decode()
        return out.split()

    assert values("-o", "beginning") == [f"{i}:m{i}" for i in range(10)]
    assert values("-o", "-3") == ["7:m7", "8:m8", "9:m9"]
    assert values("-o", "4", "-c", "2") == ["4:m4", "5:m5"]
    assert values("-o", f"s@{base + 650}") == ["7:m7", "8:m8", "9:m9"]
    assert values("-o", "beginning", "-o", f"e@{base + 300}") == ["0:m0", "1:m1", "2:m2"]


def test_auto_create_on_produce(broker, topic_name):
    kcat(broker, "-P", "-t", topic_name, "-p", "0", input=b"first\nsecond\n")
    msgs = consume_json(broker, topic_name, 0, "-o", "beginning")
    assert [(m["offset"], m["payload"]) for m in msgs] == [(0, "first"), (1, "second")]
    md = json.loads(kcat(broker, "-L", "-J", "-t", topic_name).stdout)
    assert len(md["topics"][0]["partitions"]) == 1  # num.partitions defaults to 1
