"""kafkajs 2.2.4 (node) against a real broker through compat-tests/node/kafkajs_ops.js: its
producer with every codec (read back with confluent-kafka, since kafkajs can consume only in a
group), its admin client, and consuming in a group."""

from __future__ import annotations

import base64
import shutil
import time
from pathlib import Path

import pytest
from compat_util import (
    CODECS,
    NODE_DIR,
    confluent_consume_all,
    make_records,
    node_script,
)

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (Path(NODE_DIR) / "node_modules" / "kafkajs").is_dir(),
    reason="node or kafkajs missing (compat-tests/install.sh)")


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def unb64(s):
    return None if s is None else base64.b64decode(s)


def ops(broker, *operations, timeout=90):
    payload = {"brokers": [broker.bootstrap], "ops": list(operations), "globalTimeoutMs": (timeout - 5) * 1000}
    res = node_script("kafkajs_ops.js", payload, timeout)
    return res["results"]


def ok(result):
    assert "error" not in result, result.get("error")
    return result["ok"]


def error_types(result) -> set[str]:
    """The Kafka error types of a failed op, its nested and original errors included."""
    assert "error" in result, f"expected an error, got {result}"
    out, todo = set(), [result["error"]]
    while todo:
        e = todo.pop()
        if e.get("type"):
            out.add(e["type"])
        todo += e.get("errors", []) + [e[k] for k in ("originalError", "cause") if e.get(k)]
    return out


def js_messages(recs):
    return [{"key": b64(r.key), "value": b64(r.value), "partition": r.partition, "timestamp": r.timestamp,
             "headers": [[k, b64(v)] for k, v in r.headers]} for r in recs]


def test_produce_every_codec(broker, topic_name):
    recs = make_records(30, partitions=2, seed=21, null_header_values=False)
    operations = [{"op": "createTopics", "topics": [{"topic": f"{topic_name}-{c}", "numPartitions": 2}]}
                  for c in CODECS]
    operations += [{"op": "produce", "topic": f"{topic_name}-{c}", "codec": c, "messages": js_messages(recs)}
                   for c in CODECS]
    results = ops(broker, *operations)
    for c, r in zip(CODECS, results[:len(CODECS)]):
        assert ok(r) is True, (c, r)
    for c, r in zip(CODECS, results[len(CODECS):]):
        meta = ok(r)
        assert sorted((m["partition"], m["baseOffset"], m["errorCode"]) for m in meta) == [(0, 0, 0), (1, 0, 0)], (c, meta)

    for c in CODECS:
        got = confluent_consume_all(broker.bootstrap, f"{topic_name}-{c}", {0: 15, 1: 15})
        for part in (0, 1):
            exp = [r for r in recs if r.partition == part]
            assert [m.offset() for m in got[part]] == list(range(15)), c
            for m, r in zip(got[part], exp):
                assert (m.key(), m.value(), m.headers() or [], m.timestamp()[1]) == \
                    (r.key, r.value, r.headers, r.timestamp), (c, part, m.offset())


def test_idempotent_producer(broker, topic_name):
    recs = make_records(10, seed=2, headers=False)
    (r,) = ops(broker, {"op": "produce", "topic": topic_name, "codec": "gzip", "idempotent": True,
                        "messages": js_messages(recs)})
    assert ok(r)[0]["baseOffset"] == 0
    got = confluent_consume_all(broker.bootstrap, topic_name, {0: 10})
    assert [m.value() for m in got[0]] == [r.value for r in recs]


def test_admin(broker, topic_name):
    base = (int(time.time()) - 900) * 1000
    msgs = [{"key": b64(b"k%d" % i), "value": b64(b"v%d" % i), "partition": 0, "timestamp": base + i * 10}
            for i in range(8)]
    res = ops(
        broker,
        {"op": "createTopics", "topics": [{"topic": topic_name, "numPartitions": 2,
                                           "configEntries": [{"name": "retention.ms", "value": "7200000"}]}]},
        {"op": "createTopics", "topics": [{"topic": topic_name, "numPartitions": 2}]},
        {"op": "fetchTopicMetadata", "topics": [topic_name]},
        {"op": "describeConfigs", "resources": [{"type": 2, "name": topic_name,
                                                 "configNames": ["retention.ms", "cleanup.policy"]}]},
        {"op": "alterConfigs", "resources": [{"type": 2, "name": topic_name,
                                              "configEntries": [{"name": "retention.ms", "value": "3600000"}]}]},
        {"op": "describeConfigs", "resources": [{"type": 2, "name": topic_name, "configNames": ["retention.ms"]}]},
        {"op": "createPartitions", "topicPartitions": [{"topic": topic_name, "count": 3}]},
        {"op": "fetchTopicMetadata", "topics": [topic_name]},
        {"op": "produce", "topic": topic_name, "messages": msgs},
        {"op": "fetchTopicOffsets", "topic": topic_name},
        {"op": "fetchTopicOffsetsByTimestamp", "topic": topic_name, "timestamp": base + 35},
        {"op": "deleteTopicRecords", "topic": topic_name, "partitions": [{"partition": 0, "offset": "5"}]},
        {"op": "fetchTopicOffsets", "topic": topic_name},
        {"op": "describeCluster"},
        {"op": "listTopics"},
        {"op": "deleteTopics", "topics": [topic_name]},
        {"op": "listTopics"},
    )
    (created, again, md1, cfg1, alter, cfg2, cparts, md2, produced, offs1, bytime, delrec, offs2,
     cluster, topics1, deleted, topics2) = res

    assert ok(created) is True
    # kafkajs reports an existing topic as "not created" (false), having seen TOPIC_ALREADY_EXISTS.
    assert ok(again) is False
    (t,) = ok(md1)["topics"]
    assert t["name"] == topic_name and sorted(p["partitionId"] for p in t["partitions"]) == [0, 1]

    entries = {e["configName"]: e for e in ok(cfg1)["resources"][0]["configEntries"]}
    assert entries["retention.ms"]["configValue"] == "7200000" and not entries["retention.ms"]["isDefault"]
    assert entries["cleanup.policy"]["configValue"] == "delete" and entries["cleanup.policy"]["isDefault"]
    assert ok(alter)["resources"][0]["errorCode"] == 0
    entries = {e["configName"]: e for e in ok(cfg2)["resources"][0]["configEntries"]}
    assert entries["retention.ms"]["configValue"] == "3600000"

    ok(cparts)
    (t,) = ok(md2)["topics"]
    assert sorted(p["partitionId"] for p in t["partitions"]) == [0, 1, 2]

    ok(produced)
    offsets = {o["partition"]: o for o in ok(offs1)}
    assert (offsets[0]["low"], offsets[0]["high"]) == ("0", "8")
    assert (offsets[1]["low"], offsets[1]["high"]) == ("0", "0")
    bt = {o["partition"]: o["offset"] for o in ok(bytime)}
    assert bt[0] == "4"
    ok(delrec)
    offsets = {o["partition"]: o for o in ok(offs2)}
    assert (offsets[0]["low"], offsets[0]["high"]) == ("5", "8")

    c = ok(cluster)
    assert [(b["host"], b["port"]) for b in c["brokers"]] == [("127.0.0.1", broker.port)]
    assert c["clusterId"] and c["controller"] == c["brokers"][0]["nodeId"]

    assert topic_name in ok(topics1)
    ok(deleted)
    assert topic_name not in ok(topics2)


def test_admin_errors(broker, topic_name):
    res = ops(
        broker,
        {"op": "createTopics", "topics": [{"topic": topic_name, "numPartitions": 1, "replicationFactor": 3}]},
        {"op": "createTopics", "topics": [{"topic": topic_name, "numPartitions": 1,
                                           "configEntries": [{"name": "cleanup.policy", "value": "sometimes"}]}]},
        {"op": "deleteTopics", "topics": [topic_name + "-missing"]},
        {"op": "fetchTopicOffsets", "topic": topic_name + "-missing"},
    )
    assert error_types(res[0]) == {"INVALID_REPLICATION_FACTOR"}, res[0]
    assert error_types(res[1]) == {"INVALID_CONFIG"}, res[1]
    assert error_types(res[2]) == {"UNKNOWN_TOPIC_OR_PARTITION"}, res[2]
    assert "error" in res[3], res[3]


def test_consume_in_group_every_codec(broker, topic_name):
    recs = make_records(12, partitions=1, seed=5, null_header_values=False)
    operations = []
    for c in CODECS:
        operations.append({"op": "produce", "topic": f"{topic_name}-{c}", "codec": c, "messages": js_messages(recs)})
        operations.append({"op": "consumeGroup", "topic": f"{topic_name}-{c}", "groupId": f"g-{topic_name}-{c}",
                           "count": len(recs), "timeoutMs": 20000})
    res = ops(broker, *operations, timeout=180)
    for i, c in enumerate(CODECS):
        ok(res[2 * i])
        got = ok(res[2 * i + 1])
        assert [m["offset"] for m in got] == list(range(len(recs))), c
        for m, r in zip(got, recs):
            assert (unb64(m["key"]), unb64(m["value"]), m["timestamp"]) == (r.key, r.value, r.timestamp), c
            assert [(k, unb64(v)) for k, v in m["headers"]] == r.headers, c
