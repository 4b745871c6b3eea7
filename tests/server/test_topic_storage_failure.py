"""A topic whose logs cannot be made is not created: the client gets KAFKA_STORAGE_ERROR and the
broker keeps no half-made topic that later Metadata requests would trip over."""

from __future__ import annotations

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, create_topic_request, run_with_broker

Metadata = request_class(ApiKey.METADATA)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)


def block_partition_dir(tmp_path, topic: str, partition: int) -> None:
    # A file where the partition's directory must go: the real failure a full or broken disk gives.
    (tmp_path / "data" / f"{topic}-{partition}").write_bytes(b"")


def test_create_topics_undoes_a_topic_whose_log_cannot_be_made(tmp_path):
    async def scenario(broker):
        block_partition_dir(tmp_path, "t", 2)
        client = await Client.connect(broker.endpoints[0].port)
        created = await client.call(create_topic_request("t", partitions=4), 7)
        assert created.topics[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "t" not in broker.services.metadata.topics
        assert not [key for key in broker.services.replica_manager.partitions if key[0] == "t"]
        metadata = await client.call(Metadata(topics=None), 9)
        assert metadata.topics == []
        (tmp_path / "data" / "t-2").unlink()
        again = await client.call(create_topic_request("t", partitions=4), 7)
        assert again.topics[0].error_code == ErrorCode.NONE

    run_with_broker(broker_config(tmp_path), scenario)


def test_auto_creation_that_fails_answers_a_storage_error(tmp_path):
    async def scenario(broker):
        block_partition_dir(tmp_path, "auto", 0)
        client = await Client.connect(broker.endpoints[0].port)
        metadata = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="auto")],
                                              allow_auto_topic_creation=True), 9)
        assert metadata.topics[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "auto" not in broker.services.metadata.topics

    run_with_broker(broker_config(tmp_path), scenario)


def test_create_partitions_keeps_the_old_count_when_a_new_log_cannot_be_made(tmp_path):
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("t", partitions=1), 7)
        block_partition_dir(tmp_path, "t", 2)
        grown = await client.call(CreatePartitions(
            topics=[CreatePartitions.CreatePartitionsTopic(name="t", count=3, assignments=None)],
            timeout_ms=5000, validate_only=False), 3)
        assert grown.results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert broker.services.metadata.topics["t"].num_partitions == 1
        assert sorted(key for key in broker.services.replica_manager.partitions if key[0] == "t") == [("t", 0)]

    run_with_broker(broker_config(tmp_path), scenario)
