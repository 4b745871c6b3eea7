"""Transactions end to end over loopback: the coordinator APIs, transactional produce with its
verification, read_committed Fetch and ListOffsets, offsets committed in a transaction, markers,
the describe/list APIs, timeouts, and a restart in the middle of a commit."""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace

import trio

from samsa.coordinator.transaction_log import TRANSACTION_STATE_TOPIC, encode_key, encode_value, read_record
from samsa.coordinator.transaction_metadata import TransactionState
from samsa.server.handlers import load_handlers
from samsa.server.metadata.cache import BrokerInfo
from samsa.server.coordinators.txn_marker_channel import TxnMarkerChannel
from samsa.server.zookeeper.metadata_cache import PartitionState as ZkPartitionState
from samsa.storage.log import AppendOrigin, Log
from samsa.storage.log_config import LogConfig
from samsa.wire import records
from samsa.wire.errors import ErrorCode as E
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, create_topic_request, run_broker, run_with_broker

FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
InitProducerId = request_class(ApiKey.INIT_PRODUCER_ID)
AddPartitions = request_class(ApiKey.ADD_PARTITIONS_TO_TXN)
AddOffsets = request_class(ApiKey.ADD_OFFSETS_TO_TXN)
EndTxn = request_class(ApiKey.END_TXN)
WriteTxnMarkers = request_class(ApiKey.WRITE_TXN_MARKERS)
TxnOffsetCommit = request_class(ApiKey.TXN_OFFSET_COMMIT)
OffsetFetch = request_class(ApiKey.OFFSET_FETCH)
Produce = request_class(ApiKey.PRODUCE)
Fetch = request_class(ApiKey.FETCH)
ListOffsets = request_class(ApiKey.LIST_OFFSETS)
DescribeTransactions = request_class(ApiKey.DESCRIBE_TRANSACTIONS)
ListTransactions = request_class(ApiKey.LIST_TRANSACTIONS)
DescribeProducers = request_class(ApiKey.DESCRIBE_PRODUCERS)
READ_COMMITTED = 1


class Txn:
    """A transactional producer speaking the protocol by hand."""

    def __init__(self, client: Client, transactional_id: str, timeout_ms: int = 60_000) -> None:
        self.client, self.id, self.timeout_ms = client, transactional_id, timeout_ms
        self.pid = self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}

    async def init(self, version: int = 4) -> int:
        response = await self.client.call(InitProducerId(transactional_id=self.id,
                                                         transaction_timeout_ms=self.timeout_ms), version)
        if response.error_code == E.NONE:
            self.pid, self.epoch = response.producer_id, response.producer_epoch
            self.sequences.clear()
        return response.error_code

    async def add(self, topic: str, *partitions: int, version: int = 3) -> list[int]:
        response = await self.client.call(AddPartitions(
            v3_and_below_transactional_id=self.id, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[AddPartitions.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))]),
            version)
        return [p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]

    async def send(self, topic: str, values: list[bytes], partition: int = 0, version: int = 9,
                   epoch: int | None = None) -> tuple[int, int, str | None]:
        sequence = self.sequences.get((topic, partition), 0)
        batch = records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate(values)],
                                    producer_id=self.pid, producer_epoch=self.epoch if epoch is None else epoch,
                                    base_sequence=sequence, is_transactional=True,
                                    base_timestamp=int(time.time() * 1000))
        response = await self.client.call(Produce(transactional_id=self.id, acks=-1, timeout_ms=5000, topic_data=[
            Produce.TopicProduceData(name=topic, partition_data=[
                Produce.PartitionProduceData(index=partition, records=batch)])]), version)
        part = response.responses[0].partition_responses[0]
        if part.error_code == E.NONE:
            self.sequences[(topic, partition)] = sequence + len(values)
        return part.error_code, part.base_offset, part.error_message

    async def end(self, commit: bool = True, version: int = 3) -> int:
        response = await self.client.call(EndTxn(transactional_id=self.id, producer_id=self.pid,
                                                 producer_epoch=self.epoch, committed=commit), version)
        return response.error_code


async def open_transaction(port: int, values: list[bytes], *, topic: str = "t",
                           timeout_ms: int = 60_000) -> tuple[Client, Txn]:
    """A client, a one-partition topic, and a transaction that wrote `values` to it."""
    client = await Client.connect(port)
    await client.call(create_topic_request(topic), 7)
    txn = Txn(client, "tx", timeout_ms)
    assert await txn.init() == E.NONE
    assert await txn.add(topic, 0) == [E.NONE]
    assert (await txn.send(topic, values))[0] == E.NONE
    return client, txn


async def fetch(client: Client, topic: str, offset: int = 0, isolation: int = READ_COMMITTED):
    response = await client.call(Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                       isolation_level=isolation, session_id=0, session_epoch=-1, topics=[
                                           Fetch.FetchTopic(topic=topic, partitions=[Fetch.FetchPartition(
                                               partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])]), 12)
    return response.responses[0].partitions[0]


def values(data) -> list[tuple[int, bytes]]:
    """(offset, value) of every data record; markers left out."""
    out = []
    for header, record in records.iter_records(bytes(data.records)):
        if not header.is_control:
            out.append((header.record_offset(record), record.value))
    return out


async def latest(client: Client, topic: str, isolation: int) -> int:
    response = await client.call(ListOffsets(replica_id=-1, isolation_level=isolation, topics=[
        ListOffsets.ListOffsetsTopic(name=topic, partitions=[ListOffsets.ListOffsetsPartition(
            partition_index=0, timestamp=-1)])]), 5)
    return response.topics[0].partitions[0].offset


async def wait_until(predicate, timeout_s: float = 10.0) -> None:
    with trio.fail_after(timeout_s):
        while not await predicate():
            await trio.sleep(0.05)


def test_commit_and_abort_as_read_committed_and_read_uncommitted_readers_see_them(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        found = await client.call(FindCoordinator(key_type=1, coordinator_keys=["tx"]), 4)
        assert (found.coordinators[0].error_code, found.coordinators[0].port) == (E.NONE, port)
        txn = Txn(client, "tx")
        assert await txn.init() == E.NONE
        assert await txn.add("t", 0) == [E.NONE]
        assert (await txn.send("t", [b"c1", b"c2"]))[:2] == (E.NONE, 0)
        # Open: read_committed stops at the transaction's first offset, read_uncommitted does not.
        data = await fetch(client, "t")
        assert (data.high_watermark, data.last_stable_offset, values(data)) == (2, 0, [])
        assert [v for _, v in values(await fetch(client, "t", isolation=0))] == [b"c1", b"c2"]
        assert await latest(client, "t", READ_COMMITTED) == 0 and await latest(client, "t", 0) == 2
        assert await txn.end(commit=True) == E.NONE
        data = await fetch(client, "t")
        assert (data.high_watermark, data.last_stable_offset, data.aborted_transactions) == (3, 3, [])
        assert values(data) == [(0, b"c1"), (1, b"c2")]

        assert await txn.add("t", 0) == [E.NONE]
        assert (await txn.send("t", [b"a1"]))[0] == E.NONE
        assert await txn.end(commit=False) == E.NONE
        data = await fetch(client, "t")
        # The aborted transaction is named, so the client drops its records.
        assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(txn.pid, 3)]
        assert values(data) == [(0, b"c1"), (1, b"c2"), (3, b"a1")]
        assert (await fetch(client, "t", isolation=0)).aborted_transactions is None
        assert await latest(client, "t", READ_COMMITTED) == 5

    run_broker(broker_config(tmp_path), scenario)


def test_a_transactional_batch_needs_its_partition_in_the_transaction(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t", 2), 7)
        txn = Txn(client, "tx")
        await txn.init()
        assert await txn.send("t", [b"x"], version=10) == (
            E.INVALID_TXN_STATE, -1, "Partition was not added to the transaction")
        assert (await txn.send("t", [b"x"], version=11))[0] == E.TRANSACTION_ABORTABLE
        await txn.add("t", 0)
        assert (await txn.send("t", [b"x"], partition=1, version=11))[0] == E.TRANSACTION_ABORTABLE
        assert (await txn.send("t", [b"x"], epoch=txn.epoch + 1))[0] == E.INVALID_PRODUCER_EPOCH  # fenced epoch
        assert (await txn.send("t", [b"x"]))[0] == E.NONE
        # While the commit is written, a late batch is refused: it cannot start a hanging transaction.
        assert await txn.end() == E.NONE
        assert (await txn.send("t", [b"y"], version=11))[0] == E.TRANSACTION_ABORTABLE
        assert (await fetch(client, "t")).last_stable_offset == 2

    run_broker(broker_config(tmp_path), scenario)


def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction(tmp_path):
    async def scenario(port):
        client, zombie = await open_transaction(port, [b"zombie"])
        fresh = Txn(client, "tx")
        assert await fresh.init() == E.CONCURRENT_TRANSACTIONS  # the zombie's transaction is aborted first
        assert await fresh.init() == E.NONE
        assert (fresh.pid, fresh.epoch) == (zombie.pid, zombie.epoch + 2)
        assert (await zombie.send("t", [b"late"]))[0] == E.INVALID_PRODUCER_EPOCH
        assert await zombie.end() == E.PRODUCER_FENCED
        assert await zombie.end(version=1) == E.INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED came with v2
        assert await zombie.add("t", 0) == [E.PRODUCER_FENCED]
        data = await fetch(client, "t")
        assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(zombie.pid, 0)]
        assert data.last_stable_offset == data.high_watermark == 2

    run_broker(broker_config(tmp_path), scenario)


async def committed(client, require_stable=True):
    response = await client.call(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id="g", topics=[
        OffsetFetch.OffsetFetchRequestTopics(name="in", partition_indexes=[0])])], require_stable=require_stable), 8)
    p = response.groups[0].topics[0].partitions[0]
    return p.error_code, p.committed_offset


def txn_commit(txn: Txn, offset: int, generation: int = -1):
    return TxnOffsetCommit(transactional_id=txn.id, group_id="g", producer_id=txn.pid, producer_epoch=txn.epoch,
                           generation_id_or_member_epoch=generation, member_id="", topics=[
                               TxnOffsetCommit.TxnOffsetCommitRequestTopic(name="in", partitions=[
                                   TxnOffsetCommit.TxnOffsetCommitRequestPartition(
                                       partition_index=0, committed_offset=offset, committed_metadata="")])])


def test_offsets_committed_in_a_transaction_count_once_it_commits(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("in"), 7)
        txn = Txn(client, "tx")
        await txn.init()
        # Without AddOffsetsToTxn the offsets' partition is not in the transaction.
        response = await client.call(txn_commit(txn, 5), 3)
        assert response.topics[0].partitions[0].error_code == E.INVALID_TXN_STATE
        response = await client.call(AddOffsets(transactional_id="tx", producer_id=txn.pid,
                                                producer_epoch=txn.epoch, group_id="g"), 3)
        assert response.error_code == E.NONE
        response = await client.call(txn_commit(txn, 5), 3)
        assert response.topics[0].partitions[0].error_code == E.NONE
        assert await committed(client) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert await committed(client, require_stable=False) == (E.NONE, -1)
        assert await txn.end(commit=True) == E.NONE
        assert await committed(client) == (E.NONE, 5)

        await client.call(AddOffsets(transactional_id="tx", producer_id=txn.pid, producer_epoch=txn.epoch,
                                     group_id="g"), 3)
        await client.call(txn_commit(txn, 9), 3)
        assert await txn.end(commit=False) == E.NONE
        assert await committed(client) == (E.NONE, 5)  # the aborted commit never counts

    run_broker(broker_config(tmp_path), scenario)


def test_offsets_written_after_a_marker_ended_their_verified_transaction_are_refused(tmp_path):
    """The offsets of a TxnOffsetCommit are written with the verification guard its transaction's
    verification on the offsets partition returned (Kafka's scheduleTransactionalWriteOperation): a
    marker written between the two (here an abort at the same epoch, transaction version 1) voids
    it, and the write fails with INVALID_TXN_STATE rather than leave records of no open transaction
    in __consumer_offsets."""
    from samsa.server.coordinators.runtime import append_records

    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("in"), 7)
        txn = Txn(client, "tx")
        await txn.init()
        services = broker.services
        services.groups.ensure_offsets_topic()
        partition = services.groups.partition_for("g")
        record = [(b"key", b"value")]

        async def verified() -> int:
            response = await client.call(AddOffsets(transactional_id="tx", producer_id=txn.pid,
                                                    producer_epoch=txn.epoch, group_id="g"), 3)
            assert response.error_code == E.NONE
            error, guard = await services.transactions.verify_offsets_partition("tx", txn.pid, txn.epoch,
                                                                                partition, 3)
            assert error == E.NONE and guard is not None
            return guard

        guard = await verified()
        assert await txn.end(commit=False) == E.NONE  # its marker lands on the offsets partition
        error, _ = await append_records(services.replica_manager, "__consumer_offsets", partition, record,
                                        producer=(txn.pid, txn.epoch), verification_guard=guard)
        assert error == E.INVALID_TXN_STATE
        guard = await verified()  # the next transaction
        error, _ = await append_records(services.replica_manager, "__consumer_offsets", partition, record,
                                        producer=(txn.pid, txn.epoch), verification_guard=guard)
        assert error == E.NONE

    run_with_broker(broker_config(tmp_path), scenario)


def test_transactional_offsets_are_reloaded_with_their_markers(tmp_path):
    config = broker_config(tmp_path)

    async def before(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("in"), 7)
        txn = Txn(client, "tx")
        await txn.init()
        for offset, commit in ((3, True), (6, False), (8, None)):
            await client.call(AddOffsets(transactional_id="tx", producer_id=txn.pid, producer_epoch=txn.epoch,
                                         group_id="g"), 3)
            await client.call(txn_commit(txn, offset), 3)
            if commit is not None:
                assert await txn.end(commit=commit) == E.NONE

    async def after(port):
        client = await Client.connect(port)
        assert await committed(client) == (E.UNSTABLE_OFFSET_COMMIT, -1)  # the third is still open
        assert await committed(client, require_stable=False) == (E.NONE, 3)

    run_broker(config, before)
    run_broker(config, after)


def test_add_partitions_v4_batches_transactions_and_verifies(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t", 2), 7)
        txn = Txn(client, "tx")
        await txn.init()
        await txn.add("t", 0)
        Transaction = AddPartitions.AddPartitionsToTxnTransaction
        Topic = AddPartitions.AddPartitionsToTxnTopic
        response = await client.call(AddPartitions(transactions=[
            Transaction(transactional_id="tx", producer_id=txn.pid, producer_epoch=txn.epoch, verify_only=True,
                        topics=[Topic(name="t", partitions=[0, 1])]),
            Transaction(transactional_id="other", producer_id=txn.pid, producer_epoch=txn.epoch, verify_only=True,
                        topics=[Topic(name="t", partitions=[0])])]), 5)
        results = {r.transactional_id: {p.partition_index: p.partition_error_code
                                        for t in r.topic_results for p in t.results_by_partition}
                   for r in response.results_by_transaction}
        assert response.error_code == E.NONE
        assert results == {"tx": {0: E.NONE, 1: E.TRANSACTION_ABORTABLE}, "other": {0: E.INVALID_PRODUCER_ID_MAPPING}}
        response = await client.call(AddPartitions(transactions=[
            Transaction(transactional_id="tx", producer_id=txn.pid, producer_epoch=txn.epoch, verify_only=False,
                        topics=[Topic(name="t", partitions=[1]), Topic(name="missing", partitions=[0])])]), 4)
        errors = {(t.name, p.partition_index): p.partition_error_code
                  for t in response.results_by_transaction[0].topic_results for p in t.results_by_partition}
        assert errors == {("t", 1): E.OPERATION_NOT_ATTEMPTED, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}

    run_broker(broker_config(tmp_path), scenario)


def test_write_txn_markers_closes_a_transaction_on_the_partition(tmp_path):
    async def scenario(port):
        client, txn = await open_transaction(port, [b"v"])
        Marker = WriteTxnMarkers.WritableTxnMarker
        response = await client.call(WriteTxnMarkers(markers=[Marker(
            producer_id=txn.pid, producer_epoch=txn.epoch, transaction_result=False, coordinator_epoch=0,
            topics=[WriteTxnMarkers.WritableTxnMarkerTopic(name="t", partition_indexes=[0]),
                    WriteTxnMarkers.WritableTxnMarkerTopic(name="nope", partition_indexes=[3])])]), 1)
        errors = [(t.name, p.error_code) for t in response.markers[0].topics for p in t.partitions]
        assert errors == [("t", E.NONE), ("nope", E.UNKNOWN_TOPIC_OR_PARTITION)]
        data = await fetch(client, "t")
        assert data.last_stable_offset == 2 and len(data.aborted_transactions) == 1

    run_broker(broker_config(tmp_path), scenario)


def test_describe_transactions_list_transactions_and_describe_producers(tmp_path):
    async def scenario(port):
        client, txn = await open_transaction(port, [b"v"])
        idle = Txn(client, "idle")
        await idle.init()
        described = await client.call(DescribeTransactions(transactional_ids=["tx", "nope"]), 0)
        tx, nope = described.transaction_states
        assert (tx.error_code, tx.transaction_state, tx.producer_id, tx.transaction_timeout_ms) == (
            E.NONE, "Ongoing", txn.pid, 60_000)
        assert [(t.topic, t.partitions) for t in tx.topics] == [("t", [0])]
        assert nope.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        listed = await client.call(ListTransactions(state_filters=["Ongoing", "Nonsense"], producer_id_filters=[]), 1)
        assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [("tx", "Ongoing")]
        assert listed.unknown_state_filters == ["Nonsense"]
        listed = await client.call(ListTransactions(state_filters=[], producer_id_filters=[idle.pid]), 0)
        assert [s.transactional_id for s in listed.transaction_states] == ["idle"]
        # v1: only transactions running longer than the duration.
        listed = await client.call(ListTransactions(state_filters=["Ongoing"], producer_id_filters=[],
                                                    duration_filter=3_600_000), 1)
        assert listed.transaction_states == []
        await trio.sleep(0.01)
        listed = await client.call(ListTransactions(state_filters=["Ongoing"], producer_id_filters=[],
                                                    duration_filter=0), 1)
        assert [s.transactional_id for s in listed.transaction_states] == ["tx"]
        producers = await client.call(DescribeProducers(topics=[DescribeProducers.TopicRequest(
            name="t", partition_indexes=[0, 7])]), 0)
        known, unknown = producers.topics[0].partitions
        assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
                for p in known.active_producers] == [(txn.pid, txn.epoch, 0, 0)]
        assert unknown.error_code == E.UNKNOWN_TOPIC_OR_PARTITION

    run_broker(broker_config(tmp_path), scenario)


def test_a_transaction_open_past_its_timeout_is_aborted(tmp_path):
    async def scenario(port):
        client, txn = await open_transaction(port, [b"v"], timeout_ms=200)

        async def aborted():
            return (await fetch(client, "t")).last_stable_offset == 2
        await wait_until(aborted)
        assert await txn.end() == E.PRODUCER_FENCED
        too_long = await client.call(InitProducerId(transactional_id="other", transaction_timeout_ms=900_001), 4)
        assert too_long.error_code == E.INVALID_TRANSACTION_TIMEOUT

    run_broker(broker_config(tmp_path, transaction_abort_timed_out_transaction_cleanup_interval_ms=50), scenario)


def test_a_commit_interrupted_after_its_decision_is_completed_at_restart(tmp_path):
    config = broker_config(tmp_path)
    started: dict = {}

    async def before_crash(port):
        client, txn = await open_transaction(port, [b"v1", b"v2"])
        started.update(pid=txn.pid, epoch=txn.epoch)

    run_broker(config, before_crash)
    # The broker died right after writing PrepareCommit, before any marker: write that record.
    partitions = sorted((tmp_path / "data").glob(f"{TRANSACTION_STATE_TOPIC}-*"))
    key = encode_key("tx")
    for directory in partitions:
        log = Log.open(directory, LogConfig(), clock_ms=lambda: int(time.time() * 1000))
        last = None
        for segment in log.segments:
            for _header, record in records.iter_records(segment.log.read_bytes()):
                if record.key == key:
                    last = read_record(key, record.value).value
        if last is not None:
            prepare = dataclasses.replace(last, txn_state=TransactionState.PREPARE_COMMIT)
            batch = records.build_batch([records.Record(0, 0, key, encode_value(prepare), [])],
                                        base_timestamp=int(time.time() * 1000))
            log.append_as_leader(bytearray(batch), origin=AppendOrigin.COORDINATOR)
        log.close()

    async def after_restart(port):
        client = await Client.connect(port)
        data = await fetch(client, "t")
        assert (data.last_stable_offset, values(data)) == (3, [(0, b"v1"), (1, b"v2")])
        described = await client.call(DescribeTransactions(transactional_ids=["tx"]), 0)
        assert described.transaction_states[0].transaction_state == "CompleteCommit"
        txn = Txn(client, "tx")
        assert await txn.init() == E.NONE and (txn.pid, txn.epoch) == (started["pid"], started["epoch"] + 1)

    run_broker(config, after_restart)


def test_the_transaction_state_topic_is_created_as_the_coordinator_needs_it(tmp_path):
    Metadata = request_class(ApiKey.METADATA)

    async def scenario(port):
        client = await Client.connect(port)
        response = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC)],
                                              allow_auto_topic_creation=True), 9)
        topic = response.topics[0]
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (E.NONE, True, 50)

    config = broker_config(tmp_path, transaction_state_log_num_partitions=50)
    run_broker(config, scenario)
    metadata = (tmp_path / "data" / "__samsa_metadata.json").read_text()
    assert '"cleanup.policy": "compact"' in metadata and '"compression.type": "uncompressed"' in metadata


def test_every_version_of_the_transaction_apis_is_answered(tmp_path):
    def versions(api_key):
        served = load_handlers()[api_key]  # what ApiVersions advertises, not every version the codec knows
        return range(served.min_version, served.max_version + 1)

    async def scenario(port):
        client, txn = await open_transaction(port, [b"v"])
        for version in versions(ApiKey.INIT_PRODUCER_ID):
            other = Txn(client, f"other-{version}")
            assert await other.init(version) == E.NONE
        for version in versions(ApiKey.ADD_PARTITIONS_TO_TXN):
            if version < 4:
                assert await txn.add("t", 0, version=version) == [E.NONE]
            else:
                response = await client.call(AddPartitions(transactions=[AddPartitions.AddPartitionsToTxnTransaction(
                    transactional_id="tx", producer_id=txn.pid, producer_epoch=txn.epoch, verify_only=True,
                    topics=[AddPartitions.AddPartitionsToTxnTopic(name="t", partitions=[0])])]), version)
                assert response.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code \
                    == E.NONE
        for version in versions(ApiKey.ADD_OFFSETS_TO_TXN):
            response = await client.call(AddOffsets(transactional_id="tx", producer_id=txn.pid,
                                                    producer_epoch=txn.epoch, group_id="g"), version)
            assert response.error_code == E.NONE
        for version in versions(ApiKey.TXN_OFFSET_COMMIT):
            response = await client.call(txn_commit(txn, version), version)
            # No topic "in": v6 names topics by id, which the zero id is not.
            assert response.topics[0].partitions[0].error_code == (E.UNKNOWN_TOPIC_ID if version >= 6
                                                                   else E.UNKNOWN_TOPIC_OR_PARTITION)
        for version in versions(ApiKey.END_TXN):
            # A retry of a commit that succeeded; v5 (transaction version 2) would name the epoch
            # before a bump, so on the epoch of this version 0 commit it is a commit of nothing.
            assert await txn.end(version=version) == (E.INVALID_TXN_STATE if version >= 5 else E.NONE)
        for version in versions(ApiKey.WRITE_TXN_MARKERS):
            response = await client.call(WriteTxnMarkers(markers=[WriteTxnMarkers.WritableTxnMarker(
                producer_id=txn.pid, producer_epoch=txn.epoch, transaction_result=True, coordinator_epoch=0,
                topics=[WriteTxnMarkers.WritableTxnMarkerTopic(name="t", partition_indexes=[0])])]), version)
            assert response.markers[0].topics[0].partitions[0].error_code == E.NONE
        for version in versions(ApiKey.LIST_TRANSACTIONS):
            response = await client.call(ListTransactions(state_filters=[], producer_id_filters=[]), version)
            assert "tx" in [s.transactional_id for s in response.transaction_states]
        assert (await client.call(DescribeTransactions(transactional_ids=["tx"]), 0)).transaction_states[0].error_code \
            == E.NONE

    run_broker(broker_config(tmp_path), scenario)


def test_marker_channel_sends_markers_to_each_partitions_leader(tmp_path):
    """A cluster's coordinator hands the markers of partitions it does not lead to
    server/coordinators/txn_marker_channel.py: WriteTxnMarkers to the leader the metadata names (the broker
    here plays broker 0); no live leader or no answer is a retriable error, a topic gone from the
    metadata completes its marker."""
    config = broker_config(tmp_path)

    async def scenario(port):
        client, txn = await open_transaction(port, [b"v"])
        closed = trio.socket.socket()
        await closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        nodes = {0: BrokerInfo(0, "127.0.0.1", port), 7: BrokerInfo(7, "127.0.0.1", closed.getsockname()[1])}
        cluster = SimpleNamespace(
            broker_id=1,
            partition_states={"t": {0: ZkPartitionState(0, 3, (0,), (0,)), 1: ZkPartitionState(-1, 3, (), (0,)),
                                    2: ZkPartitionState(5, 3, (5,), (5,)), 3: ZkPartitionState(7, 3, (7,), (7,))},
                              "mine": {0: ZkPartitionState(1, 3, (1,), (1,))}},
            alive_node=lambda node_id, listener: nodes.get(node_id) if listener == config.inter_broker_listener_name
            else None)
        channel = TxnMarkerChannel(cluster, config)
        assert not channel.led_elsewhere(("mine", 0)) and channel.led_elsewhere(("t", 0))
        assert channel.led_elsewhere(("gone", 0))  # the channel answers for it
        try:
            errors = await channel.write(txn.pid, txn.epoch, False, 0, [("t", 0), ("t", 1), ("t", 2), ("t", 3),
                                                                        ("gone", 0)])
        finally:
            await channel.aclose()
            closed.close()
        assert errors == {("t", 0): E.NONE, ("t", 1): E.NOT_LEADER_OR_FOLLOWER, ("t", 2): E.NOT_LEADER_OR_FOLLOWER,
                          ("t", 3): E.NETWORK_EXCEPTION, ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        data = await fetch(client, "t")
        assert data.last_stable_offset == 2 and len(data.aborted_transactions) == 1

    run_broker(config, scenario)
