"""Share groups in a ZooKeeper cluster (issue 28's "Cluster:" check): three Samsa brokers, a topic
with replication factor 3 share-consumed by three of librdkafka's share consumers (confluent-kafka's
ShareConsumer, explicit acknowledgement: most records accepted, some released) while an idempotent
acks=all producer writes; the leader of a share-consumed partition is killed with kill -9 under
load, then the leader of the `__share_group_state` partition holding that share partition's state,
then the first partition's leader again, each restarted. Then:

* no record acknowledged to the producer is lost: each was delivered, and each is accepted (the
  acknowledgement confirmed) or delivered `share.delivery.count.limit` times and archived, or its
  acceptance's answer went with a dead leader; and the share-partition start offset of every
  partition is past its last record at the end (each acknowledged or archived, nothing left);
* none is delivered more often than the limit (3, the group's config, set with
  IncrementalAlterConfigs on one broker over the brokers' default of 5: every broker applies it),
  counting the deliveries the consumers got, and the delivery counts they were told never pass it
  and rise with every delivery, whichever broker led the partition.

One ZooKeeper and three brokers for the module (one of them the controller). Kafka 3.9 cannot be in this cluster: it has no share groups.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from compat_util import confluent_admin, log_batches, wait_for
from conftest import BrokerPool
from history import History
from history_clients import Restart, Writer
from server_process import HOST
from wire_client import WireClient, metadata_controller

from samsa.coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC, SharePartitionKey, coordinator_key
from samsa.coordinator.share_coordinator_records import read_record as read_share_record
from samsa.wire import zk_data
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

kazoo_client = pytest.importorskip("kazoo.client")
confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+)", allow_module_level=True)

Metadata = request_class(ApiKey.METADATA)
FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
DescribeOffsets = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
DescribeConfigs = request_class(ApiKey.DESCRIBE_CONFIGS)
Read = request_class(ApiKey.READ_SHARE_GROUP_STATE)
GROUP_RESOURCE = 32

CHROOT = "/kafka/share-failover"
IDS = (1, 2, 3)
TOPIC = "share-failover"
GROUP = "share-failover-group"
PARTITIONS = 3
LIMIT = 3  # the group's share.delivery.count.limit; the brokers' default is 5
CONSUMERS = 3
RELEASE_ONE_IN = 6  # the consumers release about one record in so many (redeliveries, some archived)
T = 30
GROUP_COORDINATOR, SHARE_COORDINATOR = 0, 2
TERMINAL = (2, 4)  # ACKNOWLEDGED, ARCHIVED
BROKER = {
    "zookeeper.session.timeout.ms": 3000, "controlled.shutdown.max.retries": 1,
    "offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 3,
    "share.coordinator.state.topic.num.partitions": 3, "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
    "group.share.min.record.lock.duration.ms": 1000,
}
GROUP_CONFIGS = {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": str(LIMIT),
                 "share.record.lock.duration.ms": "5000"}


class Cluster:
    """ZooKeeper and three Samsa brokers, started together."""

    def __init__(self, factory) -> None:
        zk = factory.zookeeper({"tickTime": 500})  # sessions of 3 s: a killed leader goes 3 s after
        self.connect = zk.connect + CHROOT
        self.brokers = {i: factory({**BROKER, "zookeeper.connect": self.connect, "broker.id": i}, start=False)
                        for i in IDS}
        with ThreadPoolExecutor(len(IDS)) as starting:
            for started in [starting.submit(b.start, T) for b in self.brokers.values()]:
                started.result()
        for b in self.brokers.values():
            wait_for(lambda port=b.port: metadata_controller(port) >= 0, T, interval=0.1, what="the controller known")
        self.zk = kazoo_client.KazooClient(hosts=self.connect)
        self.zk.start(timeout=T)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def alive_port(self) -> int:
        return next(b.port for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None)

    def leader(self, topic: str, partition: int) -> int:
        data = self.zk.get(zk_data.partition_state_path(topic, partition))[0]
        return zk_data.decode_partition_state(data).leader

    def topic_id(self, name: str):
        """The topic's id as every broker's metadata has it, or None while one does not know the
        topic yet (the controller's UpdateMetadata reaches the brokers after ZooKeeper has the ISR)."""
        found = set()
        for b in self.brokers.values():
            with WireClient(HOST, b.port) as client:
                topic = client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name=name)],
                                             allow_auto_topic_creation=False), 12).topics[0]
            if topic.error_code != ErrorCode.NONE or topic.topic_id.int == 0:
                return None
            found.add(topic.topic_id)
        return found.pop() if len(found) == 1 else None

    def isr(self, topic: str, partition: int) -> set[int]:
        return set(zk_data.decode_partition_state(self.zk.get(zk_data.partition_state_path(topic, partition))[0]).isr)

    def coordinator(self, key_type: int, key: str) -> int:
        def ask():
            with WireClient(HOST, self.alive_port()) as client:
                found = client.call(FindCoordinator(key_type=key_type, coordinator_keys=[key]), 6).coordinators[0]
            return found.error_code == ErrorCode.NONE and found.node_id
        return wait_for(ask, T, what=f"the coordinator of {key}")

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


class Consumption:
    """What the share consumers were given and what their acknowledgements were answered, by record
    value (unique: the writer's)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: Counter = Counter()
        self.counts: dict[bytes, list[int]] = {}  # the delivery counts told, in order
        self.accepted: Counter = Counter()  # ACCEPT confirmed by the broker
        self.unconfirmed: set[bytes] = set()  # ACCEPT sent, answered with an error (or not at all)
        self.partition_of: dict[bytes, int] = {}
        self.trail: dict[bytes, list[tuple]] = {}  # (time, consumer, offset, delivery count, acknowledgement)
        # (partition, offset) -> the highest delivery count __share_group_state ever recorded for it
        self.persisted_counts: dict[tuple[int, int], int] = {}
        self.errors: Counter = Counter()
        self.last_delivery = time.monotonic()


class ShareConsumerThread(threading.Thread):
    """A share consumer with explicit acknowledgement: each poll's records accepted (or released,
    one in RELEASE_ONE_IN) and committed with commit_sync, the answer noted per partition."""

    def __init__(self, bootstrap: str, seen: Consumption, index: int) -> None:
        super().__init__(daemon=True, name=f"share-consumer-{index}")
        self.seen = seen
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.consumer = confluent_kafka.ShareConsumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "share.acknowledgement.mode": "explicit",
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.fast.interval.ms": 100})
        self.consumer.subscribe([TOPIC])

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.poll_once()
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.failure = e

    def poll_once(self) -> None:
        seen = self.seen
        try:
            messages = self.consumer.poll(0.5)
        except confluent_kafka.KafkaException as e:
            with seen.lock:
                seen.errors[str(e.args[0].code() if e.args else e)] += 1
            return
        accepts: dict[int, list[bytes]] = {}
        for m in messages:
            if m.error() is not None:
                with seen.lock:
                    seen.errors[m.error().name()] += 1
                continue
            value = m.value()
            with seen.lock:
                seen.deliveries[value] += 1
                seen.counts.setdefault(value, []).append(m.delivery_count())
                seen.partition_of[value] = m.partition()
                seen.trail.setdefault(value, []).append((round(time.time(), 2), self.name, m.offset(), m.delivery_count()))
                seen.last_delivery = time.monotonic()
            release = hash((value, m.delivery_count())) % RELEASE_ONE_IN == 0
            try:
                self.consumer.acknowledge(m, confluent_kafka.AcknowledgeType.RELEASE if release
                                          else confluent_kafka.AcknowledgeType.ACCEPT)
            except confluent_kafka.IllegalStateException as e:
                # librdkafka keeps one set of acquired records per partition, replaced by the
                # next ShareFetch response of that partition that a poll takes (two brokers'
                # responses around a leader change): it refuses the first one's records, with
                # an IllegalStateException, not a KafkaException. Left unacknowledged, they go
                # back to the broker when their lock runs out and are delivered again.
                with seen.lock:
                    seen.errors[f"acknowledge refused: {e}"] += 1
                    seen.trail[value][-1] += ("refused",)
                continue
            seen.trail[value][-1] += ("release",) if release else ("accept",)
            if not release:
                accepts.setdefault(m.partition(), []).append(value)
        if not accepts and not messages:
            return
        try:
            results = self.consumer.commit_sync(T)
        except confluent_kafka.KafkaException:
            results = None
        with seen.lock:
            for partition, values in accepts.items():
                outcome = None if results is None else next(
                    (r for tp, r in results.items() if tp.partition == partition), "missing")
                if results is not None and outcome is None:
                    seen.accepted.update(values)
                else:
                    seen.unconfirmed.update(values)
            for m in messages:
                if m.error() is None:
                    outcome = None if results is None else next(
                        (r for tp, r in results.items() if tp.partition == m.partition()), "missing")
                    seen.trail[m.value()][-1] += (str(outcome),)

    def finish(self) -> None:
        self.stopping.set()
        self.join(T * 2)
        assert not self.is_alive(), f"{self.name} did not stop"
        self.consumer.close()
        if self.failure is not None:
            raise self.failure


def set_group_configs(bootstrap: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = confluent_admin(bootstrap)
    resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(T)


def group_configs_in_force(port: int) -> dict[str, str]:
    """The group's configs a broker applies (DescribeConfigs of the GROUP resource: its overrides)."""
    request = DescribeConfigs(resources=[DescribeConfigs.DescribeConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=GROUP, configuration_keys=None)], include_synonyms=False,
        include_documentation=False)
    with WireClient(HOST, port) as client:
        result = client.call(request, 4).results[0]
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c.value for c in result.configs if not c.is_default and c.config_source == 8}


def persisted_delivery_counts(cluster: Cluster, topic_id) -> dict[tuple[int, int], int]:
    """The highest delivery count `__share_group_state` ever recorded for each (partition, offset)
    of the topic, read from every broker's copy of that log. Samsa persists a delivery count when
    it acquires a record (so that a failover never delivers past the limit): a delivery whose
    response went with a killed leader still counts, and such a record may be archived at the limit
    after fewer deliveries than the consumers saw."""
    counts: dict[tuple[int, int], int] = {}
    for broker in cluster.brokers.values():
        for directory in broker.data_dir.glob(f"{SHARE_GROUP_STATE_TOPIC}-*"):
            for _, batch_records in log_batches(broker.data_dir, directory.name):
                for record in batch_records:
                    read = read_share_record(bytes(record.key), None if record.value is None else bytes(record.value))
                    if read.value is None or read.key.group_id != GROUP or read.key.topic_id != topic_id:
                        continue
                    for batch in read.value.state_batches:
                        for offset in range(batch.first_offset, batch.last_offset + 1):
                            key = (read.key.partition, offset)
                            counts[key] = max(counts.get(key, 0), batch.delivery_count)
    return counts


def persisted_states(cluster: Cluster, topic_id) -> dict:
    """Each share partition's state in __share_group_state (ReadShareGroupState at its leader's epoch)."""
    found = {}
    for p in range(PARTITIONS):
        node = cluster.coordinator(SHARE_COORDINATOR, coordinator_key(SharePartitionKey(GROUP, topic_id, p)))
        epoch = zk_data.decode_partition_state(cluster.zk.get(zk_data.partition_state_path(TOPIC, p))[0]).leader_epoch
        request = Read(group_id=GROUP, topics=[Read.ReadStateData(topic_id=topic_id, partitions=[
            Read.PartitionData(partition=p, leader_epoch=epoch)])])
        with WireClient(HOST, cluster.brokers[node].port) as client:
            r = client.call(request, 0).results[0].partitions[0]
        assert r.error_code == ErrorCode.NONE, ErrorCode(r.error_code).name
        found[p] = (r.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                     for b in r.state_batches])
    return found


def share_start_offsets(cluster: Cluster) -> dict[int, int]:
    """Each partition's share-partition start offset (DescribeShareGroupOffsets at the group coordinator)."""
    node = cluster.coordinator(GROUP_COORDINATOR, GROUP)
    request = DescribeOffsets(groups=[DescribeOffsets.DescribeShareGroupOffsetsRequestGroup(
        group_id=GROUP, topics=[DescribeOffsets.DescribeShareGroupOffsetsRequestTopic(
            topic_name=TOPIC, partitions=list(range(PARTITIONS)))])])
    with WireClient(HOST, cluster.brokers[node].port) as client:
        group = client.call(request, 1).groups[0]
    assert group.error_code == ErrorCode.NONE, group.error_message
    return {p.partition_index: p.start_offset for t in group.topics for p in t.partitions if p.error_code == 0}


@pytest.fixture(scope="module")
def failover(tmp_path_factory):
    """The cluster, what was produced and what the share consumers saw, after the kills."""
    from confluent_kafka.admin import NewTopic, OffsetSpec

    pool = BrokerPool(tmp_path_factory, "share-failover")
    cluster = Cluster(pool)
    consumers: list[ShareConsumerThread] = []
    writer: Writer | None = None
    try:
        admin = confluent_admin(cluster.bootstrap)
        assignment = [[IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)]
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, replica_assignment=assignment,
                                      config={"min.insync.replicas": "2"})], operation_timeout=T)[TOPIC].result(T)
        wait_for(lambda: all(cluster.isr(TOPIC, p) == set(IDS) for p in range(PARTITIONS)), T,
                 what="the topic's replicas in sync")
        topic_id = wait_for(lambda: cluster.topic_id(TOPIC), T, what="the topic's id known to the brokers")
        set_group_configs(cluster.brokers[IDS[0]].bootstrap, GROUP_CONFIGS)  # one broker: the others learn it

        seen = Consumption()
        history = History()
        writer = Writer(cluster.bootstrap, TOPIC, history, PARTITIONS, rate=150)
        consumers = [ShareConsumerThread(cluster.bootstrap, seen, i) for i in range(CONSUMERS)]
        for c in consumers:
            c.start()
        writer.start()
        wait_for(lambda: len(seen.accepted) > 200, T * 2, what="the first records accepted")

        # partition 0's leader; the share coordinator of its share partition; partition 0's leader again
        state_key = coordinator_key(SharePartitionKey(GROUP, topic_id, 0))
        victims = [lambda: cluster.leader(TOPIC, 0), lambda: cluster.coordinator(SHARE_COORDINATOR, state_key),
                   lambda: cluster.leader(TOPIC, 0)]
        kills = []
        for victim_of in victims:
            victim = victim_of()
            accepted_before = len(seen.accepted)
            cluster.brokers[victim].kill()
            killed_at = time.monotonic()
            restart = Restart(cluster.brokers[victim])
            # Consumption goes on through the other brokers: records of partition 0 accepted again.
            wait_for(lambda n=accepted_before: len(seen.accepted) > n + 100, T * 2,
                     what=f"records accepted after broker {victim}'s kill")
            resumed = round(time.monotonic() - killed_at, 1)
            restart.done()
            wait_for(lambda: all(cluster.isr(TOPIC, p) == set(IDS) for p in range(PARTITIONS)), T * 2,
                     what="every replica back in sync")
            kills.append((victim, resumed))
        writer.finish()
        writer = None
        produced = {value for _, _, value, _ in history.acked}

        latest = {confluent_kafka.TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)}
        end_offsets = {tp.partition: info.offset for tp, info in
                       ((tp, f.result(T)) for tp, f in admin.list_offsets(latest).items())}

        # Drain: until every record is acknowledged or archived as the share coordinator keeps it
        # (those from the share-partition start offset on, in terminal state batches), which records
        # redelivered once their acquisition locks ran out (acceptances that failed with a dead
        # leader) may take a few lock durations to reach.
        stopped: list[tuple[str, BaseException | None]] = []

        def settled() -> bool:
            # A consumer that stopped still holds its partitions (librdkafka heartbeats on in the
            # background): nothing else would consume them.
            stopped[:] = [(c.name, c.failure) for c in consumers if not c.is_alive()]
            if stopped:
                return True
            persisted = persisted_states(cluster, topic_id)
            left = {p: [o for o in range(start, end_offsets[p])
                        if not any(first <= o <= last and state in TERMINAL for first, last, state, _ in batches)]
                    for p, (start, batches) in persisted.items()}
            if not any(left.values()):
                return True
            with seen.lock:
                at = {(seen.partition_of[v], trail[0][2]): v for v, trail in seen.trail.items()}
                sample = {p: [(o, seen.trail.get(at.get((p, o)))) for o in offsets[:3]] for p, offsets in left.items()}
            raise AssertionError(f"not acknowledged nor archived: {sample}; errors {dict(seen.errors)}; "
                                 f"persisted {persisted}")
        try:
            wait_for(settled, T * 3, interval=0.5, what="every record acknowledged or archived")
        finally:
            print(f"kills (broker, resumed after s): {kills}")
        assert not stopped, f"share consumers stopped during the run: {stopped}"
        for c in consumers:
            c.finish()
        consumers = []
        start_offsets = share_start_offsets(cluster)
        persisted = persisted_states(cluster, topic_id)
        seen.persisted_counts = persisted_delivery_counts(cluster, topic_id)
        print(f"kills (broker, resumed after s): {kills}; produced {len(produced)}; deliveries "
              f"{sum(seen.deliveries.values())}; max delivery count {max(max(c) for c in seen.counts.values())}; "
              f"archived at the limit {sum(1 for c in seen.counts.values() if max(c) == LIMIT)}; "
              f"unconfirmed accepts {len(seen.unconfirmed)}; consumer errors {dict(seen.errors)}")
        yield cluster, produced, seen, (start_offsets, persisted), end_offsets
    finally:
        if writer is not None:
            writer.stopping.set()
        for c in consumers:
            c.stopping.set()
        for c in consumers:
            c.join(T)
        cluster.close()
        pool.close()


def test_no_record_is_delivered_more_often_than_the_limit_allows(failover):
    _, _, seen, _, _ = failover
    over = {v: n for v, n in seen.deliveries.items() if n > LIMIT}
    assert not over, over
    for value, counts in seen.counts.items():
        # Rising with every delivery (a fetch answered by a leader that died may leave a gap).
        assert all(a < b for a, b in zip(counts, counts[1:])) and counts[-1] <= LIMIT, (value, counts)
    assert Counter(seen.deliveries.values())[LIMIT] > 0, "no record reached the limit"


def test_no_record_is_lost(failover):
    _, produced, seen, start_offsets, end_offsets = failover
    assert not produced - set(seen.deliveries), sorted(produced - set(seen.deliveries))[:20]
    assert max(seen.accepted.values()) == 1, {v: n for v, n in seen.accepted.items() if n > 1}
    # Accepted, or delivered the limit's number of times (archived), or its acceptance unanswered;
    # or the limit reached by a delivery the share state counted but no consumer saw (its
    # response lost with a killed leader: persisted_delivery_counts).
    left = sorted(v for v in produced if not seen.accepted[v] and v not in seen.unconfirmed
                  and max(seen.counts[v]) < LIMIT
                  and seen.persisted_counts.get((seen.partition_of[v], seen.trail[v][0][2]), 0) < LIMIT)
    # Each with what the consumers saw of it: (time, consumer, offset, delivery count, ack, outcome).
    assert not left, {v: seen.trail.get(v) for v in left[:20]}
    # And the brokers agree: the share-partition start offsets are where the share coordinator's
    # state says, and every record from there on is acknowledged or archived (the drain waited
    # for it), up to the end of the log.
    start_offsets, persisted = start_offsets
    assert start_offsets == {p: start for p, (start, _) in persisted.items()}
    assert all(max((last + 1 for _, last, _, _ in batches), default=start) == end_offsets[p]
               or start == end_offsets[p] for p, (start, batches) in persisted.items()), (persisted, end_offsets)


def test_every_broker_applies_the_group_configs(failover):
    """Kept in ZooKeeper (/config/groups/<id>): the brokers killed and started again read them at
    startup, and a change made through one broker reaches the others."""
    cluster = failover[0]
    for broker in cluster.brokers.values():
        assert group_configs_in_force(broker.port) == GROUP_CONFIGS
    changed = {"share.record.lock.duration.ms": "7000"}
    set_group_configs(cluster.brokers[IDS[-1]].bootstrap, changed)
    for broker in cluster.brokers.values():
        wait_for(lambda port=broker.port: group_configs_in_force(port) == {**GROUP_CONFIGS, **changed}, T,
                 what=f"the change in force on {broker.bootstrap}")
