"""Transaction version 2 (KIP-890 part 2) over loopback, as Kafka 4.4 serves it: no
AddPartitionsToTxn (Produce v12+ and TxnOffsetCommit v5+ add the partitions), an epoch bump at every
EndTxn v5 that the markers carry, Produce v13's topic ids, WriteTxnMarkers v2's epoch check, and a
version 1 producer beside it unchanged."""

from __future__ import annotations

import time

from samsa.wire import records
from samsa.wire.errors import ErrorCode as E
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, create_topic_request, run_broker
from test_transactions import READ_COMMITTED, EndTxn, Produce, Txn, WriteTxnMarkers, committed, fetch, txn_commit

Metadata = request_class(ApiKey.METADATA)
ApiVersions = request_class(ApiKey.API_VERSIONS)


class TxnV2(Txn):
    """A producer of transaction version 2: EndTxn v5 moves it to the epoch the response names."""

    async def send_v2(self, topic: str, values: list[bytes], version: int = 12, topic_id=None) -> tuple[int, int]:
        sequence = self.sequences.get((topic, 0), 0)
        batch = records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate(values)],
                                    producer_id=self.pid, producer_epoch=self.epoch, base_sequence=sequence,
                                    is_transactional=True, base_timestamp=int(time.time() * 1000))
        data = Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(index=0,
                                                                                                 records=batch)])
        if version >= 13:
            data.name, data.topic_id = "", topic_id
        response = await self.client.call(Produce(transactional_id=self.id, acks=-1, timeout_ms=5000,
                                                  topic_data=[data]), version)
        part = response.responses[0].partition_responses[0]
        if part.error_code == E.NONE:
            self.sequences[(topic, 0)] = sequence + len(values)
        return part.error_code, part.base_offset

    async def end_v2(self, commit: bool = True) -> int:
        response = await self.client.call(EndTxn(transactional_id=self.id, producer_id=self.pid,
                                                 producer_epoch=self.epoch, committed=commit), 5)
        if response.error_code == E.NONE:
            if (response.producer_id, response.producer_epoch) != (self.pid, self.epoch):
                self.sequences.clear()  # a new epoch starts its sequences at 0
            self.pid, self.epoch = response.producer_id, response.producer_epoch
        return response.error_code


def markers(data) -> list[tuple[int, int, bool]]:
    """(producer id, epoch, commit) of every marker fetched."""
    out = []
    for header, record in records.iter_records(bytes(data.records)):
        if header.is_control:
            out.append((header.producer_id, header.producer_epoch, record.key[3] == 1))
    return out


def test_transaction_version_2_is_finalized(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        response = await client.call(ApiVersions(client_software_name="t", client_software_version="1"), 3)
        assert [(f.min_version_level, f.max_version_level) for f in response.finalized_features
                if f.name == "transaction.version"] == [(2, 2)]
        served = {k.api_key: k.max_version for k in response.api_keys}
        assert (served[ApiKey.PRODUCE], served[ApiKey.END_TXN], served[ApiKey.TXN_OFFSET_COMMIT],
                served[ApiKey.WRITE_TXN_MARKERS]) == (13, 5, 6, 2)

    run_broker(broker_config(tmp_path), scenario)


def test_each_end_bumps_the_epoch_the_markers_carry_and_the_old_epoch_is_fenced(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        txn = TxnV2(client, "tx")
        assert await txn.init(5) == E.NONE
        pid, epoch = txn.pid, txn.epoch
        # No AddPartitionsToTxn: the partition leader adds the partition.
        assert (await txn.send_v2("t", [b"a", b"b"]))[0] == E.NONE
        assert await txn.end_v2() == E.NONE
        assert (txn.pid, txn.epoch) == (pid, epoch + 1)
        data = await fetch(client, "t")
        assert [v for _, v in records_values(data)] == [b"a", b"b"]
        assert markers(data) == [(pid, epoch + 1, True)]
        # The old epoch is fenced; the new one opens the next transaction, which aborts.
        stale = TxnV2(client, "tx")
        stale.pid, stale.epoch = pid, epoch
        assert (await stale.send_v2("t", [b"zombie"]))[0] == E.INVALID_PRODUCER_EPOCH
        assert (await txn.send_v2("t", [b"c"]))[0] == E.NONE
        assert await txn.end_v2(commit=False) == E.NONE
        assert (txn.pid, txn.epoch) == (pid, epoch + 2)
        data = await fetch(client, "t")
        assert [v for _, v in records_values(data)] == [b"a", b"b", b"c"]
        assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(pid, 3)]
        assert markers(data) == [(pid, epoch + 1, True), (pid, epoch + 2, False)]
        # A retried EndTxn names the epoch before the bump and hears the new one again.
        retry = TxnV2(client, "tx")
        retry.pid, retry.epoch = pid, epoch + 1
        assert await retry.end_v2(commit=False) == E.NONE
        assert (retry.pid, retry.epoch) == (pid, epoch + 2)

    run_broker(broker_config(tmp_path), scenario)


def test_the_leader_checks_a_version_2_transactions_sequences_and_epoch(tmp_path):
    """Kafka's ProducerAppendInfo under transaction version 2: each transaction starts a partition at
    sequence 0, a gap is out of order, the epoch before the end's bump is refused, with Kafka's
    answer (no message, the log start offset)."""
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        txn = TxnV2(client, "tx")
        assert await txn.init(5) == E.NONE
        txn.sequences[("t", 0)] = 3
        assert (await txn.send_v2("t", [b"late"]))[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        txn.sequences[("t", 0)] = 0
        assert await txn.send_v2("t", [b"a"]) == (E.NONE, 0)
        txn.sequences[("t", 0)] = 2
        assert (await txn.send_v2("t", [b"gap"]))[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        txn.sequences[("t", 0)] = 1
        stale_epoch = txn.epoch
        assert await txn.end_v2() == E.NONE
        stale = TxnV2(client, "tx")
        stale.pid, stale.epoch, stale.sequences[("t", 0)] = txn.pid, stale_epoch, 1
        assert (await stale.send_v2("t", [b"zombie"]))[0] == E.INVALID_PRODUCER_EPOCH
        assert await txn.send_v2("t", [b"b"]) == (E.NONE, 2)
        assert await txn.end_v2() == E.NONE
        assert [v for _, v in records_values(await fetch(client, "t"))] == [b"a", b"b"]

    run_broker(broker_config(tmp_path), scenario)


def records_values(data) -> list[tuple[int, bytes]]:
    return [(header.record_offset(record), record.value) for header, record in records.iter_records(
        bytes(data.records)) if not header.is_control]


def test_produce_v13_names_topics_by_id(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        topic_id = (await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="t")]), 12)).topics[0].topic_id
        txn = TxnV2(client, "tx")
        assert await txn.init(5) == E.NONE
        assert await txn.send_v2("t", [b"a"], 13, topic_id) == (E.NONE, 0)
        assert await txn.end_v2() == E.NONE
        assert [v for _, v in records_values(await fetch(client, "t"))] == [b"a"]
        unknown = Produce.TopicProduceData(topic_id=type(topic_id)(int=1), partition_data=[
            Produce.PartitionProduceData(index=0, records=records.build_batch([records.Record(0, 0, None, b"x", [])]))])
        response = await client.call(Produce(acks=1, timeout_ms=5000, topic_data=[unknown]), 13)
        assert response.responses[0].topic_id == unknown.topic_id
        assert response.responses[0].partition_responses[0].error_code == E.UNKNOWN_TOPIC_ID

    run_broker(broker_config(tmp_path), scenario)


def test_txn_offset_commit_v5_adds_the_offsets_partition(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("in"), 7)
        txn = TxnV2(client, "tx")
        assert await txn.init(5) == E.NONE
        # No AddOffsetsToTxn: v5 adds the group's partition of __consumer_offsets.
        response = await client.call(txn_commit(txn, 5), 5)
        assert response.topics[0].partitions[0].error_code == E.NONE
        assert await committed(client) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert await txn.end_v2() == E.NONE
        assert await committed(client) == (E.NONE, 5)
        # v4 still needs AddOffsetsToTxn.
        response = await client.call(txn_commit(txn, 9), 4)
        assert response.topics[0].partitions[0].error_code == E.TRANSACTION_ABORTABLE
        # v6 names the topic by id (KIP-1319).
        topic_id = (await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="in")]), 12)).topics[0].topic_id
        by_id = txn_commit(txn, 11)
        by_id.topics[0].name, by_id.topics[0].topic_id = "", topic_id
        response = await client.call(by_id, 6)
        assert (response.topics[0].topic_id, response.topics[0].partitions[0].error_code) == (topic_id, E.NONE)
        assert await txn.end_v2() == E.NONE
        assert await committed(client) == (E.NONE, 11)
        by_id.topics[0].topic_id = type(topic_id)(int=7)
        response = await client.call(by_id, 6)
        assert response.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID

    run_broker(broker_config(tmp_path), scenario)


def test_txn_offset_commit_checks_the_offsets_partitions_producer_state_first(tmp_path):
    """As Kafka's CoordinatorPartitionWriter: the group's partition of __consumer_offsets makes the
    producer's verification before the coordinator is asked; an open transaction there needs none,
    an epoch older than the partition's (its marker carried the bump) is refused there."""
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("in"), 7)
        txn = TxnV2(client, "tx")
        assert await txn.init(5) == E.NONE
        for offset in (5, 6):  # the second in the transaction the first opened there
            response = await client.call(txn_commit(txn, offset), 5)
            assert response.topics[0].partitions[0].error_code == E.NONE
        stale_epoch = txn.epoch
        assert await txn.end_v2() == E.NONE
        assert await committed(client) == (E.NONE, 6)
        current_epoch, txn.epoch = txn.epoch, stale_epoch
        for version in (5, 4):
            response = await client.call(txn_commit(txn, 9), version)
            assert response.topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH
        txn.epoch = current_epoch
        response = await client.call(txn_commit(txn, 9), 5)
        assert response.topics[0].partitions[0].error_code == E.NONE
        assert await txn.end_v2(commit=False) == E.NONE
        assert await committed(client) == (E.NONE, 6)

    run_broker(broker_config(tmp_path), scenario)


def test_write_txn_markers_v2_takes_a_marker_only_above_the_producers_epoch(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        txn = TxnV2(client, "tx")
        assert await txn.init(5) == E.NONE
        assert (await txn.send_v2("t", [b"a"]))[0] == E.NONE

        async def marker(version: int, epoch: int, transaction_version: int = 2) -> int:
            response = await client.call(WriteTxnMarkers(markers=[WriteTxnMarkers.WritableTxnMarker(
                producer_id=txn.pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
                transaction_version=transaction_version if version >= 2 else 0,
                topics=[WriteTxnMarkers.WritableTxnMarkerTopic(name="t", partition_indexes=[0])])]), version)
            return response.markers[0].topics[0].partitions[0].error_code

        # The open transaction's own epoch: a version 2 marker must carry a bumped one.
        assert await marker(2, txn.epoch) == E.INVALID_PRODUCER_EPOCH
        assert await marker(2, txn.epoch, transaction_version=0) == E.NONE  # version 0: the same epoch ends it
        assert (await fetch(client, "t")).last_stable_offset == 2
        # Nothing open now: the same epoch again is a retry of a marker already written.
        assert await marker(2, txn.epoch) == E.NONE
        assert await marker(2, txn.epoch - 1 if txn.epoch else -5) == E.INVALID_PRODUCER_EPOCH

    run_broker(broker_config(tmp_path), scenario)


def test_a_version_1_producer_beside_keeps_its_epoch(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        txn = Txn(client, "v1")
        assert await txn.init() == E.NONE
        epoch = txn.epoch
        for commit in (True, False):
            assert await txn.add("t", 0) == [E.NONE]
            assert (await txn.send("t", [b"x"], version=11))[0] == E.NONE
            assert await txn.end(commit=commit, version=4) == E.NONE
        assert txn.epoch == epoch
        assert markers(await fetch(client, "t", isolation=READ_COMMITTED)) == [(txn.pid, epoch, True),
                                                                               (txn.pid, epoch, False)]

    run_broker(broker_config(tmp_path), scenario)


def test_a_zookeeper_cluster_serves_kafka_3_9s_versions():
    """Kafka 3.9 in ZooKeeper mode has no transaction version 2: its versions stay below it."""
    from samsa.server.handlers import ListenerType
    from samsa.server.handlers.api_versions import api_keys

    served = {k.api_key: k.max_version for k in api_keys(ListenerType.ZK_BROKER)}
    assert (served[ApiKey.PRODUCE], served[ApiKey.END_TXN], served[ApiKey.TXN_OFFSET_COMMIT],
            served[ApiKey.WRITE_TXN_MARKERS]) == (11, 4, 4, 1)


def test_a_zookeeper_cluster_finalizes_transaction_version_1(tmp_path):
    from samsa.server.broker import Broker

    single = Broker(broker_config(tmp_path / "single"))
    assert (single.features.supported["transaction.version"], single.features.level("transaction.version")) == (
        (0, 2), 2)
    member = Broker(broker_config(tmp_path / "member", zookeeper_connect="127.0.0.1:2181"))
    assert (member.features.supported["transaction.version"], member.features.level("transaction.version")) == (
        (0, 1), 1)
