"""Idempotent producers end to end over loopback: InitProducerId, a retried batch written once, a
sequence gap refused, producer ids and producer state across a restart."""

from __future__ import annotations

import time

from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from loopback import (
    Client, broker_config, create_topic_request, fetch_request, produce_request, run_broker,
)

InitProducerId = request_class(ApiKey.INIT_PRODUCER_ID)


def idempotent_batch(producer_id: int, sequence: int, values: list[bytes], epoch: int = 0) -> bytes:
    return records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate(values)],
                               producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                               base_timestamp=int(time.time() * 1000))


async def init_producer_id(client: Client, version: int = 4, **fields):
    request = InitProducerId(transactional_id=None, transaction_timeout_ms=60_000)
    for name, value in fields.items():
        setattr(request, name, value)
    return await client.call(request, version)


async def produce(client: Client, batch: bytes):
    response = await client.call(produce_request("t", batch, acks=-1), 9)
    part = response.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_init_producer_id_gives_each_idempotent_producer_a_new_id(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        ids = []
        for version in range(6):
            response = await init_producer_id(client, version)
            assert (response.error_code, response.producer_epoch) == (ErrorCode.NONE, 0)
            ids.append(response.producer_id)
        assert ids == list(range(6))
        # KIP-360: a producer naming its id and epoch still gets a new id without a transactional id.
        again = await init_producer_id(client, 4, producer_id=ids[-1], producer_epoch=0)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (ErrorCode.NONE, 6, 0)
        half = await init_producer_id(client, 4, producer_id=3, producer_epoch=-1)
        assert (half.error_code, half.producer_id) == (ErrorCode.INVALID_REQUEST, -1)
        # A transactional id gets its producer id from the transaction coordinator.
        transactional = await init_producer_id(client, 4, transactional_id="tx")
        assert (transactional.error_code, transactional.producer_id) == (ErrorCode.NONE, 7)

    run_broker(broker_config(tmp_path), scenario)


def test_a_retried_batch_is_written_once_and_a_gap_is_refused(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        pid = (await init_producer_id(client)).producer_id
        first = idempotent_batch(pid, 0, [b"a", b"b", b"c"])
        assert await produce(client, first) == (ErrorCode.NONE, 0)
        assert await produce(client, first) == (ErrorCode.NONE, 0)  # the retry: same answer, not written
        assert await produce(client, idempotent_batch(pid, 3, [b"d"])) == (ErrorCode.NONE, 3)
        assert await produce(client, idempotent_batch(pid, 9, [b"e"])) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        assert await produce(client, idempotent_batch(pid, 0, [b"x"], epoch=-1)) == \
            (ErrorCode.INVALID_PRODUCER_EPOCH, -1)
        fetched = await client.call(fetch_request("t", 0), 12)
        data = fetched.responses[0].partitions[0]
        assert data.high_watermark == 4
        values = [r.value for _, batch in _batches(bytes(data.records)) for r in batch]
        assert values == [b"a", b"b", b"c", b"d"]

    run_broker(broker_config(tmp_path), scenario)


def test_producer_ids_and_producer_state_survive_a_restart(tmp_path):
    config = broker_config(tmp_path)
    sent = {}

    async def before(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        pid = (await init_producer_id(client)).producer_id
        sent["pid"] = pid
        assert await produce(client, idempotent_batch(pid, 0, [b"a", b"b"])) == (ErrorCode.NONE, 0)
        sent["last"] = idempotent_batch(pid, 2, [b"c"])
        assert await produce(client, sent["last"]) == (ErrorCode.NONE, 2)

    async def after(port):
        client = await Client.connect(port)
        # The rest of the first block of ids is skipped, never handed out twice.
        assert (await init_producer_id(client)).producer_id == sent["pid"] + 1000
        assert await produce(client, sent["last"]) == (ErrorCode.NONE, 2)
        pid = sent["pid"]
        assert await produce(client, idempotent_batch(pid, 5, [b"e"])) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        assert await produce(client, idempotent_batch(pid, 3, [b"d"])) == (ErrorCode.NONE, 3)

    run_broker(config, before)
    run_broker(config, after)


def _batches(data: bytes):
    position = 0
    while position < len(data):
        header, batch = records.decode_batch(data, position)
        yield header, batch
        position += header.size
