"""What the event loop does between requests: a woken long poll answers before the append that woke
it, an idle connection closes after connections.max.idle.ms and a busy one does not, and what
startup loaded and the partitions created since are out of the cyclic collector's scans."""

from __future__ import annotations

import gc
import select

import trio
from trio.testing import MockClock

from loopback import (
    Client, broker_config, create_topic_request, fetch_request, one_batch, produce_request, run_broker, run_with_broker,
)
from security_helpers import ApiVersions, closed



def test_a_woken_long_poll_answers_before_the_produce_that_woke_it(tmp_path):
    async def scenario(broker):
        port = broker.endpoints[0].port
        consumer = await Client.connect(port)
        producer = await Client.connect(port)
        await producer.call(create_topic_request("t"), 7)
        partition = broker.services.replica_manager.get("t", 0)
        for offset in range(3):
            await consumer.send(fetch_request("t", offset, max_wait_ms=30_000), 12)
            while not partition.has_parked_fetches:
                await trio.sleep(0.01)
            produced = await producer.call(produce_request("t", one_batch([b"x"])), 9)
            assert produced.responses[0].partition_responses[0].base_offset == offset
            # The broker wrote the fetch response first: it is already in the consumer's socket.
            readable, _, _ = select.select([consumer.stream.socket.fileno()], [], [], 0)
            assert readable, "the produce was answered before the fetch it woke"
            await consumer.receive()

    run_with_broker(broker_config(tmp_path), scenario)


def test_only_a_connection_idle_past_connections_max_idle_ms_is_closed(tmp_path):
    clock = MockClock()

    async def scenario(port):
        idle = await Client.connect(port)
        busy = await Client.connect(port)
        await idle.call(ApiVersions(), 0)
        await busy.call(ApiVersions(), 0)
        clock.jump(40)
        await busy.call(ApiVersions(), 0)  # its idle time starts again
        clock.jump(40)  # 80 s since idle's last request, 40 since busy's
        assert await closed(idle)
        assert (await busy.call(ApiVersions(), 0)).api_keys

    run_broker(broker_config(tmp_path, connections_max_idle_ms=60_000), scenario, clock=clock)


def test_what_startup_loaded_and_created_partitions_are_frozen_out_of_the_collectors_scans(tmp_path):
    async def scenario(port):
        assert gc.get_freeze_count() > 10_000  # modules, codecs, config: everything loaded
        before = gc.get_freeze_count()
        client = await Client.connect(port)
        await client.call(create_topic_request("wide", partitions=200), 7)
        assert gc.get_freeze_count() - before > 200 * 20  # each log's segment, indexes, paths, locks
        assert gc.isenabled()

    try:
        run_broker(broker_config(tmp_path), scenario)
    finally:
        gc.unfreeze()  # the test process's own objects were frozen with the broker's
