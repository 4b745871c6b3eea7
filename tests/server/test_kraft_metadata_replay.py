"""The metadata log Kafka 4.4's controller wrote (tests/storage/data/kraft_metadata_44: topics,
configs, ACLs, a quota, a SCRAM credential, partitions added, a topic deleted, a controlled
shutdown's partition changes, and the controller's snapshot at offset 24; recorded by
compat-tests/record_kraft_metadata.py) replayed deterministically as the KRaft broker replays it:
fetched batches through the quorum observer (server/kraft/quorum.py) onto its metadata log on disk,
committed by the high watermark, published into the metadata cache (and through the broker's
metadata publisher into the replicas it hosts and its authorizer); then the broker restarted on what
it wrote, and started from Kafka's snapshot."""

from __future__ import annotations

import uuid
from pathlib import Path

from samsa.server.config.kafka_config import KafkaConfig
from samsa.server.kraft.metadata_cache import KraftMetadataCache
from samsa.server.kraft.quorum import QuorumObserver
from samsa.storage.cluster_metadata import CLUSTER_METADATA_DIR
from samsa.storage.metadata_log import MetadataLog, MetadataLogConfig, SnapshotId
from samsa.wire.errors import ErrorCode
from samsa.wire.records import iter_batch_headers

RECORDED = Path(__file__).parents[1] / "storage" / "data" / "kraft_metadata_44"
LOG = (RECORDED / "00000000000000000000.log").read_bytes()
KAFKA_SNAPSHOT = (RECORDED / "00000000000000000024-0000000001.checkpoint").read_bytes()
BATCHES = [(pos, h) for pos, h in iter_batch_headers(LOG)]


def observer(tmp_path, cache: KraftMetadataCache, **overrides) -> QuorumObserver:
    config = KafkaConfig({"process.roles": "broker", "node.id": "2", "controller.listener.names": "CONTROLLER",
                          "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
                          "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": str(tmp_path), **overrides})
    quorum = QuorumObserver(config, "cluster", 2, uuid.uuid4(), lambda replay, offset: cache.publish(replay.image, offset),
                            tmp_path)
    quorum.load(tmp_path)
    return quorum


def fetch(quorum: QuorumObserver, first: int, last: int, high_watermark: int | None = None) -> None:
    """The batches first..last (indexes) as one Fetch answer, with that high watermark (default: their end)."""
    start, end = BATCHES[first][0], BATCHES[last][0] + BATCHES[last][1].size
    quorum._append(LOG[start:end])
    quorum._commit(BATCHES[last][1].next_offset if high_watermark is None else high_watermark)


def offset_batch(offset: int) -> int:
    """The index of the batch holding `offset`."""
    return next(i for i, (_, h) in enumerate(BATCHES) if h.base_offset <= offset < h.next_offset)


def test_the_recorded_log_step_by_step_into_the_metadata_cache(tmp_path):
    cache = KraftMetadataCache(2, "cluster")
    quorum = observer(tmp_path, cache)
    # Registrations and the topics' creation.
    fetch(quorum, 0, offset_batch(23))
    assert sorted(cache.topics) == ["doomed", "orders"] and cache.features["metadata.version"] == 33
    assert sorted(b.node_id for b in cache.alive_nodes("PLAINTEXT")) == [2, 3]
    assert cache.topics["orders"].configs == {"retention.ms": "3600000"}
    assert [cache.partition_states["orders"][p].leader for p in range(3)] == [2, 3, 2]
    # Configs, ACLs, the quota and the SCRAM credential: fetched but not committed yet.
    fetch(quorum, offset_batch(24), offset_batch(30), high_watermark=24)
    assert cache.offset == 23 and cache.acls == [] and cache.broker_configs == {}
    quorum._commit(31)
    assert cache.offset == 30
    assert cache.topics["orders"].configs == {"cleanup.policy": "compact"}
    assert cache.broker_configs == {"": {"log.retention.bytes": "1073741824"}}
    assert sorted((a["name"], a["pattern_type"], a["principal"], a["operation"]) for a in cache.acls) == [
        ("billing-", "PREFIXED", "User:bob", "ALL"), ("orders", "LITERAL", "User:alice", "READ")]
    assert list(cache.scram_credentials) == ["alice"]
    assert dict(cache.client_quotas) != {}
    # Partitions added, a topic deleted, an ACL and the quota removed, broker 3's controlled shutdown.
    fetch(quorum, offset_batch(31), offset_batch(40))
    assert sorted(cache.topics) == ["orders"] and cache.topics["orders"].num_partitions == 4
    assert [(a["name"], a["principal"]) for a in cache.acls] == [("orders", "User:alice")]
    assert dict(cache.client_quotas) == {}
    assert [b.node_id for b in cache.alive_nodes("PLAINTEXT")] == [2]
    states = cache.partition_states["orders"]
    assert [(states[p].leader, states[p].isr) for p in range(4)] == [(2, (2,))] * 4
    # Broker 2's own controlled shutdown: no leader left.
    fetch(quorum, offset_batch(41), len(BATCHES) - 1)
    assert cache.offset == 46 and cache.alive_nodes("PLAINTEXT") == []
    assert [p.error_code for p in cache.partition_metadata("orders", "PLAINTEXT")] == [
        ErrorCode.LEADER_NOT_AVAILABLE] * 4
    quorum.metadata_log.close()
    assert (tmp_path / CLUSTER_METADATA_DIR / "00000000000000000000.log").read_bytes() == LOG


def test_a_restarted_broker_loads_its_copy_and_publishes_at_the_first_high_watermark(tmp_path):
    first = KraftMetadataCache(2, "cluster")
    quorum = observer(tmp_path, first)
    fetch(quorum, 0, len(BATCHES) - 1, high_watermark=31)  # the rest fetched, not committed
    quorum.metadata_log.close()

    cache = KraftMetadataCache(2, "cluster")
    restarted = observer(tmp_path, cache)
    assert (restarted.fetch_offset, restarted.last_fetched_epoch) == (47, 1)  # fetches on from its log end
    assert cache.offset == -1  # nothing published before the leader says what is committed
    restarted._commit(47)
    assert cache.offset == 46 and sorted(cache.topics) == ["orders"]
    restarted.metadata_log.close()


def test_a_diverging_epoch_truncates_the_copy_on_disk(tmp_path):
    cache = KraftMetadataCache(2, "cluster")
    quorum = observer(tmp_path, cache)
    fetch(quorum, 0, len(BATCHES) - 1, high_watermark=31)
    quorum._truncate(BATCHES[offset_batch(35)][1].base_offset, 1)
    cut = BATCHES[offset_batch(35)][1].base_offset
    assert quorum.fetch_offset == cut and quorum.metadata_log.end_offset == cut
    # Never below what is committed.
    quorum._truncate(5, 1)
    assert quorum.metadata_log.end_offset >= 31
    quorum.metadata_log.close()
    assert MetadataLog.in_log_dir(tmp_path, MetadataLogConfig(), lambda: 0).end_offset == quorum.fetch_offset


def test_the_broker_snapshots_its_image_and_restarts_from_the_snapshot(tmp_path):
    cache = KraftMetadataCache(2, "cluster")
    # A snapshot after every 1000 bytes of committed records.
    quorum = observer(tmp_path, cache, **{"metadata.log.max.record.bytes.between.snapshots": "1000"})
    fetch(quorum, 0, offset_batch(30))
    assert quorum._bytes_since_snapshot >= 1000
    snapshot = quorum.write_snapshot("test")
    assert snapshot == SnapshotId(31, 1) and quorum.metadata_log.snapshots[-1] == snapshot
    fetch(quorum, offset_batch(31), len(BATCHES) - 1)
    quorum.metadata_log.close()

    restarted_cache = KraftMetadataCache(2, "cluster")
    restarted = observer(tmp_path, restarted_cache)
    assert restarted.applied_offset == 30 and [b.base_offset for b in restarted._pending][0] == 31
    restarted._commit(47)
    assert restarted_cache.offset == 46
    assert comparable(restarted_cache) == comparable(cache)
    restarted.metadata_log.close()


def test_a_broker_starting_from_kafkas_snapshot(tmp_path):
    """As after FetchSnapshot: Kafka's snapshot stored, the log after it fetched."""
    directory = tmp_path / CLUSTER_METADATA_DIR
    directory.mkdir()
    (directory / "00000000000000000024-0000000001.checkpoint").write_bytes(KAFKA_SNAPSHOT)
    cache = KraftMetadataCache(2, "cluster")
    quorum = observer(tmp_path, cache)
    assert (quorum.fetch_offset, quorum.applied_offset, quorum.metadata_log.start_offset) == (24, 23, 24)
    whole = KraftMetadataCache(2, "cluster")
    fetch(observer(tmp_path / "whole", whole), 0, len(BATCHES) - 1)
    fetch(quorum, offset_batch(24), len(BATCHES) - 1)
    assert comparable(cache) == comparable(whole)


def comparable(cache: KraftMetadataCache):
    return ({name: (t.topic_id, t.num_partitions, t.configs) for name, t in cache.topics.items()},
            cache.partition_states, dict(cache.broker_configs), sorted(map(sorted, (a.items() for a in cache.acls))),
            dict(cache.scram_credentials), dict(cache.client_quotas), dict(cache.features or {}),
            sorted(b.node_id for b in cache.alive_nodes("PLAINTEXT")), cache.offset)


def test_a_fetched_snapshot_past_the_log_replaces_it(tmp_path):
    """FetchSnapshot's answer (the broker was behind the leader's log start): stored, the log started
    over at its end, fetching on from there."""
    cache = KraftMetadataCache(2, "cluster")
    quorum = observer(tmp_path, cache)
    fetch(quorum, 0, offset_batch(10))
    snapshot = SnapshotId(24, 1)
    quorum._load_snapshot(snapshot, KAFKA_SNAPSHOT)
    quorum._store_snapshot(snapshot, KAFKA_SNAPSHOT)
    assert (quorum.fetch_offset, quorum.last_fetched_epoch, quorum._pending) == (24, 1, [])
    assert (quorum.metadata_log.start_offset, quorum.metadata_log.end_offset) == (24, 24)
    assert quorum.metadata_log.snapshots == [snapshot]
    fetch(quorum, offset_batch(24), len(BATCHES) - 1)
    whole = KraftMetadataCache(2, "cluster")
    fetch(observer(tmp_path / "whole", whole), 0, len(BATCHES) - 1)
    assert comparable(cache) == comparable(whole)


def test_the_recorded_log_through_the_broker_metadata_publisher(tmp_path):
    """What each committed batch changes on broker 2 (server/kraft/publisher.py): the replicas it
    hosts, led or followed as the partition records say; the finalized features; the authorizer's
    ACLs; what the lifecycle is told was applied."""
    from samsa.server.clock import wall_clock_ms
    from samsa.server.features import BrokerFeatures
    from samsa.server.kraft.publisher import BrokerMetadataPublisher
    from samsa.server.metadata.image import MetadataImage
    from samsa.server.replication.replica_manager import ReplicaManager
    from samsa.server.security.authorizer import new_authorizer
    from samsa.server.throttle import BrokerQuotas
    from samsa.storage.log_manager import LogManager

    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    config = KafkaConfig({"process.roles": "broker", "node.id": "2", "controller.listener.names": "CONTROLLER",
                          "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
                          "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": str(log_dir),
                          "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    logs = LogManager([log_dir], config.log_config(), wall_clock_ms)
    replicas = ReplicaManager(logs, MetadataImage.load(log_dir, "cluster"), config)
    cache = KraftMetadataCache(2, "cluster")
    features = BrokerFeatures.kraft_mode()
    authorizer = new_authorizer(config, [])
    assert authorizer is not None
    applied: list[int] = []
    publisher = BrokerMetadataPublisher(2, cache, replicas, features, authorizer, BrokerQuotas(config, cache.client_quotas),
                                        "PLAINTEXT", applied.append)
    quorum = QuorumObserver(config, "cluster", 2, uuid.uuid4(), publisher.publish, tmp_path)
    quorum.load(tmp_path)
    quorum._append(LOG)
    try:
        quorum._commit(24)  # the brokers registered, orders (on 2 and 3) and doomed (on 3) created
        assert applied == [23] and features.finalized["metadata.version"] == 33
        hosted = {key: (p.is_leader, p.leader_id, p.leader_epoch) for key, p in replicas.partitions.items()}
        assert hosted == {("orders", 0): (True, 2, 0), ("orders", 1): (False, 3, 0), ("orders", 2): (True, 2, 0)}
        assert authorizer.acls() == []
        quorum._commit(31)  # configs, ACLs, the quota, SCRAM
        assert sorted((a.name, a.principal) for a in authorizer.acls()) == [("billing-", "User:bob"),
                                                                             ("orders", "User:alice")]
        quorum._commit(47)  # orders-3 added, doomed deleted, an ACL removed, both brokers shut down
        assert applied == [23, 30, 46]
        hosted = {key: (p.is_leader, p.leader_id) for key, p in replicas.partitions.items()}
        assert hosted == {("orders", p): (False, -1) for p in range(4)}  # no leader left
        assert [(a.name, a.principal) for a in authorizer.acls()] == [("orders", "User:alice")]
    finally:
        quorum.metadata_log.close()
        logs.shutdown()
