"""A compacted topic over loopback: a record without key is refused as Kafka refuses it."""

from __future__ import annotations

from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, fetch_request, produce_request, run_broker

CreateTopics = request_class(ApiKey.CREATE_TOPICS)


def test_a_record_without_key_is_refused_with_its_index(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        created = await client.call(CreateTopics(timeout_ms=5000, topics=[CreateTopics.CreatableTopic(
            name="c", num_partitions=1, replication_factor=1,
            configs=[CreateTopics.CreatableTopicConfig(name="cleanup.policy", value="compact")])]), 7)
        assert created.topics[0].error_code == ErrorCode.NONE
        batch = records.build_batch([records.Record(0, 0, b"k", b"1", []), records.Record(1, 0, None, b"2", [])])

        response = await client.call(produce_request("c", batch), 8)
        part = response.responses[0].partition_responses[0]
        message = "Compacted topic cannot accept message without key in topic partition c-0"
        assert part.error_code == ErrorCode.INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [(1, message)]
        assert part.error_message == (
            "One or more records have been rejected due to 1 record errors in total, and only showing the first "
            f"three errors at most: [RecordError(batchIndex=1, message='{message}')]")
        old = await client.call(produce_request("c", batch), 7)  # before record_errors existed
        assert old.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD

        keyed = records.build_batch([records.Record(0, 0, b"k", b"1", [])])
        response = await client.call(produce_request("c", keyed), 8)
        assert response.responses[0].partition_responses[0].base_offset == 0
        fetched = await client.call(fetch_request("c", 0), 11)
        assert fetched.responses[0].partitions[0].high_watermark == 1

    run_broker(broker_config(tmp_path), scenario)
