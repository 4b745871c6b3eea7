"""aiokafka 0.14 against a real broker: produce/consume with every codec, admin operations,
offsets by time, long poll. Each test runs its own event loop under a hard timeout."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka import errors as Errors
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from compat_util import CODECS, by_partition, make_records

T = 15


def run(coro, timeout: float = 90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


class Admin:
    def __init__(self, bootstrap):
        self.client = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=T * 1000)

    async def __aenter__(self):
        await self.client.start()
        return self.client

    async def __aexit__(self, *exc):
        await self.client.close()


async def partition_count(admin, topic):
    d = (await admin.describe_topics([topic]))[0]
    return len(d["partitions"]) if d["error_code"] == 0 else None


async def create(bootstrap, topic, partitions=1, configs=None):
    async with Admin(bootstrap) as admin:
        resp = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
        errs = [e for e in resp.topic_errors if e[1] != 0]
        assert not errs, errs
        await poll_until(lambda: partition_count(admin, topic), partitions)


async def poll_until(fn, expected, timeout=T):
    deadline = time.monotonic() + timeout
    while True:
        last = await fn()
        if last == expected:
            return
        assert time.monotonic() < deadline, f"waited {timeout}s for {expected!r}, last {last!r}"
        await asyncio.sleep(0.05)


async def consume(bootstrap, topic, counts, start=0, timeout=20, **extra):
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         fetch_max_wait_ms=100, request_timeout_ms=T * 1000, auto_offset_reset="earliest",
                         **extra)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in counts]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, start)
        got = {p: [] for p in counts}
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < n for p, n in counts.items()):
            assert time.monotonic() < deadline, f"consumed { {p: len(v) for p, v in got.items()} } of {counts}"
            for tp, recs in (await c.getmany(timeout_ms=500)).items():
                got[tp.partition].extend(recs)
        more = await c.getmany(timeout_ms=300)
        assert not any(more.values()), f"more records than produced: {more}"
        return got
    finally:
        await c.stop()


async def produce(bootstrap, topic, recs, **extra):
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=T * 1000, **extra)
    await p.start()
    try:
        futs = [await p.send(topic, value=r.value, key=r.key, partition=r.partition,
                             timestamp_ms=r.timestamp, headers=r.headers or None) for r in recs]
        return [await asyncio.wait_for(f, T) for f in futs]
    finally:
        await p.stop()


@pytest.mark.parametrize("codec,idempotent", [(c, False) for c in CODECS] + [("lz4", True)],
                         ids=CODECS + ["lz4-idempotent"])
def test_produce_consume_every_codec(broker, topic_name, codec, idempotent):
    async def main():
        await create(broker.bootstrap, topic_name, partitions=2)
        recs = make_records(40, partitions=2, seed=len(codec) * 31, null_header_values=False,
                            allow_null_key_and_value=False)
        metas = await produce(broker.bootstrap, topic_name, recs, linger_ms=5,
                              compression_type=None if codec == "none" else codec,
                              enable_idempotence=idempotent)
        per_part = {}
        for r, m in zip(recs, metas):
            assert m.partition == r.partition  # (aiokafka reports the batch's first timestamp)
            per_part.setdefault(m.partition, []).append(m.offset)
        for part, offs in per_part.items():
            assert offs == list(range(len(offs))), f"partition {part} acked offsets {offs}"
        expected = by_partition(recs)
        got = await consume(broker.bootstrap, topic_name, {p: len(v) for p, v in expected.items()})
        for part, rs in expected.items():
            assert [c.offset for c in got[part]] == list(range(len(rs)))
            for c, r in zip(got[part], rs):
                assert (c.key, c.value, list(c.headers or ()), c.timestamp, c.timestamp_type) == \
                    (r.key, r.value, [tuple(h) for h in r.headers], r.timestamp, 0), \
                    f"partition {part} offset {c.offset}"
    run(main())


def test_admin_operations(broker, topic_name):
    async def main():
        async with Admin(broker.bootstrap) as admin:
            resp = await admin.create_topics([NewTopic(topic_name, 2, 1, topic_configs={"retention.ms": "5000000"})])
            assert [(e[0], e[1]) for e in resp.topic_errors] == [(topic_name, 0)]
            await poll_until(lambda: partition_count(admin, topic_name), 2)
            resp = await admin.create_topics([NewTopic(topic_name, 2, 1)])
            assert resp.topic_errors[0][1] == Errors.TopicAlreadyExistsError.errno
            assert topic_name in await admin.list_topics()

            res = ConfigResource(ConfigResourceType.TOPIC, topic_name)
            (dresp,) = await admin.describe_configs([res])
            (_, _, _, _, entries) = dresp.resources[0][:5]
            cfg = {e[0]: e[1] for e in entries}
            assert cfg["retention.ms"] == "5000000"
            assert cfg["cleanup.policy"] == "delete"

            (aresp,) = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                                 {"retention.ms": "6000000"})])
            assert aresp.resources[0][0] == 0, aresp
            (dresp,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                                    {"retention.ms": None})])
            assert {e[0]: e[1] for e in dresp.resources[0][4]} == {"retention.ms": "6000000"}

            resp = await admin.create_partitions({topic_name: NewPartitions(3)})
            assert resp.topic_errors[0][1] == 0, resp
            await poll_until(lambda: partition_count(admin, topic_name), 3)

            cluster = await admin.describe_cluster()
            assert cluster["cluster_id"]
            assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [("127.0.0.1", broker.port)]

            await produce(broker.bootstrap, topic_name, make_records(9, partitions=3, null_header_values=False,
                                                                       allow_null_key_and_value=False))
            tp = TopicPartition(topic_name, 1)
            lows = await admin.delete_records({tp: RecordsToDelete(2)})
            assert lows == {tp: 2}

            resp = await admin.delete_topics([topic_name])
            assert resp.topic_error_codes[0][1] == 0, resp
            await poll_until(lambda: _absent(admin, topic_name), True)
    run(main())


async def _absent(admin, topic):
    return topic not in await admin.list_topics()


def test_offsets_lookup(broker, topic_name):
    async def main():
        await create(broker.bootstrap, topic_name)
        base = (int(time.time()) - 600) * 1000
        stamps = [base, base + 400, base + 200, base + 800, base + 100]
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await p.start()
        try:
            for i, ts in enumerate(stamps):
                await p.send_and_wait(topic_name, b"v%d" % i, partition=0, timestamp_ms=ts)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, request_timeout_ms=T * 1000)
        await c.start()
        try:
            tp = TopicPartition(topic_name, 0)
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 5}
            r = await c.offsets_for_times({tp: base + 250})
            assert (r[tp].offset, r[tp].timestamp) == (1, base + 400)
            r = await c.offsets_for_times({tp: base + 801})
            assert r[tp] is None
            c.assign([tp])
            c.seek(tp, 3)
            batch = await c.getmany(tp, timeout_ms=5000)
            assert [m.value for m in batch[tp]][:1] == [b"v3"]
        finally:
            await c.stop()
    run(main())


def test_long_poll_wakes_on_produce(broker, topic_name):
    async def main():
        await create(broker.bootstrap, topic_name)
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=5000, fetch_min_bytes=1, request_timeout_ms=30000)
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await c.start()
        await p.start()
        tp = TopicPartition(topic_name, 0)
        c.assign([tp])
        c.seek(tp, 0)
        lat = []
        try:
            assert await c.getmany(timeout_ms=500) == {}  # the fetcher is now parked in a long fetch
            for i in range(5):
                getter = asyncio.ensure_future(c.getone())
                await asyncio.sleep(0.3)
                await p.send_and_wait(topic_name, b"ping-%d" % i, partition=0)
                t_ack = time.monotonic()
                msg = await asyncio.wait_for(getter, 10)
                lat.append(time.monotonic() - t_ack)
                assert msg.value == b"ping-%d" % i
        finally:
            await p.stop()
            await c.stop()
        assert statistics.median(lat) < 0.1, f"receive minus ack latencies (s): {lat}"
        assert max(lat) < 1.0, f"receive minus ack latencies (s): {lat}"
    run(main())
