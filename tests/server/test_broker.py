"""The broker over real loopback sockets: framing, bad input, produce and fetch, restart.

Each test runs a Broker in-process under trio and speaks to it with Samsa's own codec, so that it
can send what real clients never would (malformed frames, unknown versions, huge sizes).
"""

from __future__ import annotations

import struct

import trio

from loopback import (
    SIZE, Client, broker_config, create_topic_request, fetch_request, one_batch, produce_request, run_broker,
    run_with_broker,
)

from samsa.server.network.socket_server import _LargeFrameMemory
from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, decode_response, encode_request, request_class


def test_malformed_frame_closes_only_that_connection(tmp_path):
    async def scenario(port):
        good = await Client.connect(port)
        bad = await Client.connect(port)
        # A request header that claims a 100-byte client id inside a 10-byte frame.
        await bad.send_raw(SIZE.pack(10) + struct.pack(">hhih", 18, 0, 1, 100))
        assert await bad.read_frame() is None
        response = await good.call(request_class(ApiKey.API_VERSIONS)(), 0)
        assert response.error_code == ErrorCode.NONE

    run_broker(broker_config(tmp_path), scenario)


def test_a_listener_without_a_host_listens_on_every_interface(tmp_path):
    """PLAINTEXT://:port, Kafka's way to bind every interface (the broker failed to start on it)."""
    async def scenario(port):
        client = await Client.connect(port)
        response = await client.call(request_class(ApiKey.API_VERSIONS)(), 0)
        assert response.error_code == ErrorCode.NONE

    run_broker(broker_config(tmp_path, listeners="PLAINTEXT://:0", advertised_listeners="PLAINTEXT://localhost:0"),
               scenario)


def test_frames_pipelined_in_one_write_dribbled_bytewise_or_larger_than_a_read_are_each_answered(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        versions = encode_request(request_class(ApiKey.API_VERSIONS)(), 0, 101, "test")
        big = encode_request(produce_request("t", one_batch([b"v" * 40_000])), 9, 102, "test")
        # Two requests and the start of a third in one write, the rest of it a byte at a time.
        await client.send_raw(bytes(versions + big + versions[:3]))
        for byte in versions[3:]:
            await client.send_raw(bytes([byte]))
        for expected in (101, 102, 101):
            frame = await client.read_frame()
            assert frame is not None and SIZE.unpack_from(frame)[0] == expected
        fetched = await client.call(fetch_request("t", 0), 12)
        header, batch = records.decode_batch(bytes(fetched.responses[0].partitions[0].records))
        assert [r.value for r in batch] == [b"v" * 40_000]

    run_broker(broker_config(tmp_path), scenario)


def test_large_frames_past_the_unreceived_budget_grow_with_their_bytes(tmp_path, monkeypatch):
    """A frame announced when the broker already holds its budget of memory for bytes not yet
    received (slowloris clients) is read into a buffer that grows as its bytes arrive: the request
    comes out whole, and the budget is given back."""
    monkeypatch.setattr(_LargeFrameMemory, "UNRECEIVED_BUDGET", 0)
    values = [bytes([i]) * 90_000 for i in range(10)]  # under max.message.bytes

    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        request = bytes(encode_request(produce_request("t", one_batch(values)), 9, 5, "test"))
        for start in range(0, len(request), 50_000):
            await client.send_raw(request[start:start + 50_000])
            await trio.sleep(0)
        frame = await client.read_frame()
        assert frame is not None and SIZE.unpack_from(frame)[0] == 5
        fetched = await client.call(fetch_request("t", 0), 12)
        _, batch = records.decode_batch(bytes(fetched.responses[0].partitions[0].records))
        assert [r.value for r in batch] == values
        assert _LargeFrameMemory.unreceived == 0

    run_broker(broker_config(tmp_path), scenario)


def test_frame_larger_than_socket_request_max_bytes_is_refused(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.send_raw(SIZE.pack(2_000_000))
        assert await client.read_frame() is None

    run_broker(broker_config(tmp_path, socket_request_max_bytes=1_000_000), scenario)


def test_unknown_api_versions_version_gets_v0_with_unsupported_version(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        # ApiVersions v99 with a v2 header: key, version, correlation id, client id, no tags.
        body = struct.pack(">hhih", 18, 99, 7, 4) + b"test" + b"\x00"
        await client.send_raw(SIZE.pack(len(body)) + body)
        correlation_id, response = decode_response(await client.read_frame(), ApiKey.API_VERSIONS, 0)
        assert correlation_id == 7
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version) for k in response.api_keys] == [(ApiKey.API_VERSIONS, 0)]

    run_broker(broker_config(tmp_path), scenario)


def test_api_versions_v3_refuses_a_nameless_client_and_serves_produce_from_v0(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        ApiVersions = request_class(ApiKey.API_VERSIONS)
        unnamed = await client.call(ApiVersions(client_software_name="", client_software_version="1"), 3)
        assert unnamed.error_code == ErrorCode.INVALID_REQUEST
        response = await client.call(ApiVersions(client_software_name="test", client_software_version="1.0"), 3)
        served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert served[ApiKey.PRODUCE] == (0, 13)  # v0-2 kept: librdkafka needs them for compression
        assert served[ApiKey.FETCH][0] == 0
        # Every served range, and that none is an unstable version: test_api_versions_table.py.

    run_broker(broker_config(tmp_path), scenario)


def test_produce_then_fetch_returns_the_batch_with_assigned_offsets(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        created = await client.call(create_topic_request("t"), 7)
        assert created.topics[0].error_code == ErrorCode.NONE
        for expected_base in (0, 2):
            produced = await client.call(produce_request("t", one_batch([b"a", b"b"])), 9)
            part = produced.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (ErrorCode.NONE, expected_base)
        fetched = await client.call(fetch_request("t", 3), 12)
        data = fetched.responses[0].partitions[0]
        assert data.error_code == ErrorCode.NONE and data.high_watermark == 4
        header, batch = records.decode_batch(bytes(data.records))
        # An offset inside a batch returns the whole batch.
        assert header.base_offset == 2 and [r.value for r in batch] == [b"a", b"b"]

    run_broker(broker_config(tmp_path), scenario)


def test_corrupt_batch_gets_corrupt_message_and_nothing_is_appended(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        batch = bytearray(one_batch([b"payload"]))
        batch[-1] ^= 0xFF  # breaks the CRC
        produced = await client.call(produce_request("t", bytes(batch)), 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
        fetched = await client.call(fetch_request("t", 0), 12)
        assert fetched.responses[0].partitions[0].high_watermark == 0

    run_broker(broker_config(tmp_path), scenario)


def test_a_failed_acks_0_produce_closes_the_connection_and_a_good_one_gets_no_answer(tmp_path):
    """Kafka closes the connection of a failed acks=0 produce, so that the client, which waits for
    no answer, notices and refreshes its metadata."""
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        await client.send_without_response(produce_request("t", one_batch([b"kept"]), acks=0), 9)
        fetched = await client.call(fetch_request("t", 0), 12)  # answered: the produce was not
        assert fetched.responses[0].partitions[0].high_watermark == 1
        await client.send_without_response(produce_request("missing", one_batch([b"lost"]), acks=0), 9)
        with trio.fail_after(10):  # closed, not left open without an answer
            assert await client.read_frame() is None

    run_broker(broker_config(tmp_path, auto_create_topics_enable="false"), scenario)


def test_long_poll_wakes_when_data_arrives(tmp_path):
    async def scenario(port):
        consumer = await Client.connect(port)
        producer = await Client.connect(port)
        await producer.call(create_topic_request("t"), 7)
        woke = {}

        async def poll():
            start = trio.current_time()
            response = await consumer.call(fetch_request("t", 0, max_wait_ms=10_000), 12)
            woke["after"] = trio.current_time() - start
            woke["records"] = response.responses[0].partitions[0].records

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(0.2)
            await producer.call(produce_request("t", one_batch([b"x"])), 9)
        assert len(woke["records"]) > 0
        assert woke["after"] < 5  # woken by the produce, not by max_wait_ms

    run_broker(broker_config(tmp_path), scenario)


def test_data_and_topics_survive_a_restart(tmp_path):
    config = broker_config(tmp_path)

    async def write(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("kept", partitions=2), 7)
        await client.call(produce_request("kept", one_batch([b"1", b"2", b"3"])), 9)

    async def read(port):
        client = await Client.connect(port)
        fetched = await client.call(fetch_request("kept", 0), 12)
        data = fetched.responses[0].partitions[0]
        assert data.high_watermark == 3
        _, batch = records.decode_batch(bytes(data.records))
        assert [r.value for r in batch] == [b"1", b"2", b"3"]
        Metadata = request_class(ApiKey.METADATA)
        meta = await client.call(Metadata(topics=None), 12)
        assert {t.name: len(t.partitions) for t in meta.topics} == {"kept": 2}

    run_broker(config, write)
    run_broker(config, read)


def test_after_a_clean_restart_a_partition_log_opens_on_first_use(tmp_path):
    config = broker_config(tmp_path)

    async def write(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("lazy", partitions=3), 7)
        await client.call(produce_request("lazy", one_batch([b"1", b"2"])), 9)

    async def use(broker):
        opened = broker.services.log_manager.opened_logs
        client = await Client.connect(broker.endpoints[0].port)
        meta = await client.call(request_class(ApiKey.METADATA)(topics=None), 12)
        assert [len(t.partitions) for t in meta.topics] == [3]
        assert opened() == []  # Metadata comes from the metadata image
        fetched = await client.call(fetch_request("lazy", 0), 12)
        assert fetched.responses[0].partitions[0].high_watermark == 2
        assert [log.name for log in opened()] == ["lazy-0"]
        produced = await client.call(produce_request("lazy", one_batch([b"3"])), 9)
        assert produced.responses[0].partition_responses[0].base_offset == 2

    run_broker(config, write)
    run_with_broker(config, use)


def test_topic_compression_type_recompresses_only_when_it_differs(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        Create = request_class(ApiKey.CREATE_TOPICS)
        gzip_topic = Create.CreatableTopic(name="gz", num_partitions=1, replication_factor=1, configs=[
            Create.CreatableTopicConfig(name="compression.type", value="gzip")])
        await client.call(Create(topics=[gzip_topic], timeout_ms=5000), 7)
        await client.call(create_topic_request("as-sent"), 7)
        plain = one_batch([b"a" * 100, b"b" * 100])
        for topic in ("gz", "as-sent"):
            produced = await client.call(produce_request(topic, plain), 9)
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        stored = {}
        for topic in ("gz", "as-sent"):
            fetched = await client.call(fetch_request(topic, 0), 12)
            header, batch = records.decode_batch(bytes(fetched.responses[0].partitions[0].records))
            assert [r.value for r in batch] == [b"a" * 100, b"b" * 100]
            stored[topic] = header.compression
        assert stored == {"gz": records.CompressionType.GZIP, "as-sent": records.CompressionType.NONE}

    run_broker(broker_config(tmp_path), scenario)


def test_old_message_formats_are_converted_up_on_produce_and_down_on_fetch(tmp_path):
    from samsa.wire import legacy

    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("old"), 7)
        message_set = legacy.build_message_set(
            [legacy.LegacyMessage(0, 1, 0, 1_700_000_000_000, b"k", b"v1"),
             legacy.LegacyMessage(1, 1, 0, 1_700_000_000_001, None, b"v2")], magic=1)
        produced = await client.call(produce_request("old", message_set), 2)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        # A v2 client reads a v2 batch, timestamps kept.
        modern = await client.call(fetch_request("old", 0), 12)
        header, batch = records.decode_batch(bytes(modern.responses[0].partitions[0].records))
        assert header.magic == 2 and [(r.key, r.value) for r in batch] == [(b"k", b"v1"), (None, b"v2")]
        assert header.base_timestamp == 1_700_000_000_000
        # A Fetch v3 client reads message format v1, from its fetch offset on.
        old = await client.call(fetch_request("old", 1), 3)
        messages = list(legacy.iter_messages(bytes(old.responses[0].partitions[0].records)))
        assert [(m.offset, m.magic, m.value) for m in messages] == [(1, 1, b"v2")]
        # A v3+ produce of an old format is refused.
        refused = await client.call(produce_request("old", message_set), 3)
        assert refused.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD

    run_broker(broker_config(tmp_path), scenario)


def test_a_deleted_topics_directory_goes_after_its_delay_not_at_the_retention_check(tmp_path):
    """Kafka's kafka-delete-logs task: the directory renamed `-delete` is removed once
    log.segment.delete.delay.ms has passed, while log.retention.check.interval.ms (5 minutes here) is
    far off: a deleted topic's pages do not stay in the page cache until then."""
    data = tmp_path / "data"

    async def scenario(port):
        client = await Client.connect(port)
        assert (await client.call(create_topic_request("doomed"), 7)).topics[0].error_code == ErrorCode.NONE
        produced = await client.call(produce_request("doomed", one_batch([b"a"])), 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        delete = request_class(ApiKey.DELETE_TOPICS)(topic_names=["doomed"], timeout_ms=5000)
        assert (await client.call(delete, 5)).responses[0].error_code == ErrorCode.NONE
        marked = [p for p in data.iterdir() if p.name.startswith("doomed-0.") and p.name.endswith("-delete")]
        assert len(marked) == 1  # renamed, kept for its delay (LogManager's unit tests time it exactly)
        with trio.fail_after(30):  # the 300 s retention check is not what removes it
            while marked[0].exists():
                await trio.sleep(0.05)

    run_broker(broker_config(tmp_path, log_segment_delete_delay_ms=2000, log_retention_check_interval_ms=300_000),
               scenario)


def test_segments_the_cleaner_replaced_go_after_their_delay_not_at_the_retention_check(tmp_path):
    """Kafka's delete-file task: segments renamed `.deleted` (here by the cleaner's swap) are
    removed once file.delete.delay.ms has passed, while log.retention.check.interval.ms (5 minutes
    here) is far off."""
    partition_dir = tmp_path / "data" / "compacted-0"

    def deleted_files() -> list[str]:
        return [p.name for p in partition_dir.iterdir() if p.name.endswith(".deleted")]

    async def scenario(port):
        client = await Client.connect(port)
        Create = request_class(ApiKey.CREATE_TOPICS)
        configs = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
        create = Create(topics=[Create.CreatableTopic(
            name="compacted", num_partitions=1, replication_factor=1,
            configs=[Create.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])], timeout_ms=5000)
        assert (await client.call(create, 7)).topics[0].error_code == ErrorCode.NONE
        for i in range(8):  # one key: each batch replaces the last; a segment rolls every few
            batch = records.build_batch([records.Record(0, 0, b"key", b"%d" % i * 600, [])])
            produced = await client.call(produce_request("compacted", batch), 9)
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        with trio.fail_after(30):  # the cleaner swaps the cleaned segments in, the old ones renamed
            while not deleted_files():
                await trio.sleep(0.02)
        with trio.fail_after(30):  # and they go after their 1 s delay, not at the 300 s retention check
            while deleted_files():
                await trio.sleep(0.05)

    run_broker(broker_config(tmp_path, log_cleaner_backoff_ms=100, log_segment_delete_delay_ms=1000,
                             log_retention_check_interval_ms=300_000), scenario)


def test_an_incremental_fetch_leaves_out_what_has_nothing_new_and_waits_for_what_has(tmp_path):
    """KIP-227: partitions of a session with nothing new (no records, offsets as last sent) are not
    in an incremental answer; a fetch that finds nothing new anywhere long-polls, and is answered
    with only the partition an append reached."""
    Fetch = request_class(ApiKey.FETCH)

    def session_fetch(session_id: int, epoch: int, partitions: list[int], max_wait_ms: int):
        return Fetch(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                     session_id=session_id, session_epoch=epoch, topics=[Fetch.FetchTopic(topic="t", partitions=[
                         Fetch.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                         for p in partitions])] if partitions else [])

    async def scenario(broker):
        port = broker.endpoints[0].port
        consumer = await Client.connect(port)
        producer = await Client.connect(port)
        await producer.call(create_topic_request("t", partitions=3), 7)
        opened = await consumer.call(session_fetch(0, 0, [0, 1, 2], 0), 12)
        assert sorted(p.partition_index for p in opened.responses[0].partitions) == [0, 1, 2]
        quiet = await consumer.call(session_fetch(opened.session_id, 1, [], 0), 12)
        assert (quiet.error_code, quiet.responses) == (ErrorCode.NONE, [])
        answered = {}

        async def poll():
            answered["response"] = await consumer.call(session_fetch(opened.session_id, 2, [], 10_000), 12)

        partition = broker.services.replica_manager.get("t", 1)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll)
                while not partition.has_parked_fetches:  # parked, not answered at once
                    await trio.sleep(0.01)
                await producer.call(produce_request("t", one_batch([b"x"])), 9)  # partition 0
        topics = answered["response"].responses
        assert [(t.topic, [p.partition_index for p in t.partitions]) for t in topics] == [("t", [0])]
        assert len(topics[0].partitions[0].records) > 0

    run_with_broker(broker_config(tmp_path), scenario)
