"""Issue 30's failover scenarios: Samsa brokers in KRaft broker mode under Apache Kafka 4.4's
controllers, killed with kill -9 under load (the KRaft counterpart of test_cluster_failover.py and
test_cluster_coordinators.py, with the same History checker: compat-tests/history.py).

- Three Samsa brokers under one Kafka controller: a topic with replication factor 3 and
  min.insync.replicas=2; an idempotent acks=all producer writes while the leader of partition 0 is
  killed ten times in a row: every acknowledged record read back exactly once and in order, clients
  resume within 10 s, the restarted broker rejoins every ISR.
- The same cluster: consumer groups (classic and the consumer protocol) and a transactional
  consume-transform-produce go on, exactly once, through the kill of the broker leading
  `__consumer_offsets` and `__transaction_state` (their coordinator), a transaction open.
- Mixed: two Kafka 4.4 brokers and two Samsa brokers under a quorum of three Kafka controllers:
  each kind leads partitions the other follows, and leadership moves both ways (a kill, then a
  preferred election back); a Kafka broker's and a Samsa broker's kill -9 lose nothing acknowledged;
  the coordinators move from a Samsa broker to a Kafka broker and back, each loading what the other
  wrote, exactly once; the active controller killed mid-run is a pause for the clients, nothing more.

The controllers fence a broker whose heartbeats stopped after broker.session.timeout.ms, 3 s here
(Kafka's default is 9 s): the new leader is elected then, or when the restarted broker registers
again (a new incarnation: the controller takes it out of every ISR at once). Each cluster is
module-scoped: JVM starts are the slow part (the module takes about 4 minutes on 2 busy cores).
"""

from __future__ import annotations

import os
import time

import pytest
from compat_util import confluent_admin, wait_for
from history import History
from history_clients import Restart, assert_nothing_lost, start_writing
from kafka_oracle import KafkaController, KafkaKraftBroker, OracleUnavailable
from kraft_nodes import (CONTROLLER_FEATURES, KraftSamsaBroker, active_controller, controller_quorum,
                         start_together)
from server_process import ServerProcess
from transactional_transform import Transform, read_committed

from samsa.client.blocking import BlockingConnection
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.slow
T = 30
RESUME_WITHIN_S = 10.0
ElectLeadersRequest = request_class(ApiKey.ELECT_LEADERS)
KILLS = int(os.environ.get("SAMSA_FAILOVER_KILLS", "10"))
PARTITIONS = 3
# The controllers' session: 3 s without a heartbeat fences a broker (its heartbeats come every 500 ms).
CONTROLLER_SETTINGS = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}
SAMSA_IDS = (2, 3, 4)
# Every broker maps group ids and transactional ids to the same partition, one of each.
INTERNAL_TOPICS = {"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 3,
                   "transaction.state.log.num.partitions": 1, "transaction.state.log.replication.factor": 3,
                   "transaction.state.log.min.isr": 2}


def partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """{partition: (leader, replicas, ISR)} as the brokers at `bootstrap` serve it."""
    found = confluent_admin(bootstrap).list_topics(topic, timeout=10).topics[topic]
    if found.error is not None:
        raise AssertionError(f"{topic}: {found.error}")
    return {p.id: (p.leader, p.replicas, sorted(p.isrs)) for p in found.partitions.values()}


def new_leader(bootstrap: str, topic: str, old: int) -> int | None:
    """The leader of `topic`-0 as the brokers at `bootstrap` serve it, unless it is still `old` or none."""
    leader = partitions(bootstrap, topic)[0][0]
    return None if leader in (old, -1) else leader


class KraftCluster:
    """Kafka controllers and brokers (Samsa's, Kafka's) of one KRaft cluster, by node id."""

    controllers: dict[int, KafkaController]
    brokers: dict[int, ServerProcess]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def survivors(self, *dead: int) -> str:
        return ",".join(b.bootstrap for n, b in self.brokers.items() if n not in dead)

    def wait_all_unfenced(self) -> None:
        """Every broker lists every broker (a Metadata answer names the unfenced ones): a topic
        created now has its preferred leaders (the controller places leaders on unfenced replicas)."""
        for n, broker in self.brokers.items():
            wait_for(lambda b=broker: set(confluent_admin(b.bootstrap).list_topics(timeout=10).brokers)
                     == set(self.brokers), T * 2, interval=0.2, what=f"every broker unfenced, as broker {n} knows them")

    def create_topic(self, name: str, assignments: list[list[int]], configs: dict[str, str] | None = None) -> None:
        """Created by the active controller, then as assigned (wait_as_assigned)."""
        created = wait_for(lambda: active_controller(self.controllers, name, assignments=assignments, configs=configs),
                           T, interval=0.5, what=f"{name} created by the active controller")
        assert created in self.controllers
        self.wait_as_assigned(name, assignments)

    def wait_as_assigned(self, topic: str, assignments: list[list[int]], timeout: float = T) -> None:
        """Every partition led by its preferred replica with every replica in its ISR, as each broker
        serves it."""
        expected = {p: (replicas[0], replicas, sorted(replicas)) for p, replicas in enumerate(assignments)}

        def as_assigned(broker) -> bool:
            found = partitions(broker.bootstrap, topic)
            assert found == expected, found
            return True

        for n, broker in self.brokers.items():
            wait_for(lambda b=broker: as_assigned(b), timeout, interval=0.2,
                     what=f"{topic} as assigned, in broker {n}'s metadata")

    def wait_full_isrs(self, topic: str, timeout: float = T * 2) -> None:
        wait_for(lambda: all(sorted(replicas) == isr for _, replicas, isr in partitions(self.bootstrap, topic).values()),
                 timeout, interval=0.1, what=f"every replica in every ISR of {topic}")

    def stop(self) -> None:
        for server in [*self.brokers.values(), *self.controllers.values()]:
            server.kill()


class SamsaCluster(KraftCluster):
    """One Kafka controller (node 1) and three Samsa brokers (2, 3, 4)."""

    def __init__(self, base_dir) -> None:
        try:
            controller = KafkaController(base_dir / "controller", features=CONTROLLER_FEATURES,
                                         properties=CONTROLLER_SETTINGS)
        except OracleUnavailable as e:
            pytest.skip(str(e))
        self.controllers = {controller.node_id: controller}
        self.brokers = {n: KraftSamsaBroker(base_dir / f"samsa{n}", controller, node_id=n, overrides=INTERNAL_TOPICS)
                        for n in SAMSA_IDS}


def running(cluster):
    """A module fixture's cluster: its controllers started, then its brokers, all unfenced; stopped after."""
    try:
        start_together(cluster.controllers.values())
        start_together(cluster.brokers.values())
        cluster.wait_all_unfenced()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def samsa_cluster(tmp_path_factory):
    yield from running(SamsaCluster(tmp_path_factory.mktemp("kraft-samsa")))


def test_leader_killed_ten_times_loses_no_acknowledged_write(samsa_cluster):
    cluster = samsa_cluster
    topic = "failover"
    cluster.create_topic(topic, [[SAMSA_IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)],
                         {"min.insync.replicas": "2"})
    history, writer, reader = start_writing(cluster.bootstrap, topic, PARTITIONS, T)
    resumed_after = []
    phases = []  # per kill: seconds to the new leader, to the restart, to every ISR whole again
    for _ in range(KILLS):
        victim_id = partitions(cluster.bootstrap, topic)[0][0]
        victim = cluster.brokers[victim_id]
        victim.kill()
        killed_at = time.monotonic()
        restart = Restart(victim)
        survivors = cluster.survivors(victim_id)
        wait_for(lambda s=survivors, v=victim_id: partitions(s, topic)[0][0] not in (v, -1), T, interval=0.1,
                 what=f"a new leader of {topic}-0 after broker {victim_id}'s kill")
        elected_at = time.monotonic()
        acked_at = wait_for(lambda since=killed_at: history.last_ack_after(0, since), T, interval=0.1,
                            what="a write acknowledged by the new leader")
        resumed_after.append(round(acked_at - killed_at, 1))
        restart.done()
        restarted_at = time.monotonic()
        cluster.wait_full_isrs(topic)
        phases.append(tuple(round(t - killed_at, 1) for t in (elected_at, restarted_at, time.monotonic())))
    print(f"resumed after {resumed_after} s; elected, restarted, rejoined after {phases} s")
    assert max(resumed_after) <= RESUME_WITHIN_S, (resumed_after, phases)
    writer.finish()
    reader.finish()
    assert_nothing_lost(history, cluster.bootstrap, topic, PARTITIONS, f"resumed after {resumed_after} s")


RECORDS = 90


class GroupMember:
    """One member of a consumer group (`protocol`: classic or consumer) reading `topic`, committing
    each batch synchronously before it reads on (retried while the coordinator moves), so that it
    reads each record once unless the group lost its offsets or its assignment."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str) -> None:
        settings = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                    "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        if protocol == "classic":
            settings.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        self.consumer = confluent_kafka.Consumer(settings)
        self.consumer.subscribe([topic])
        self.values: list[bytes] = []
        self.commit_errors: list[str] = []

    def step(self) -> None:
        batch = [m for m in self.consumer.consume(10, timeout=0.2) if m.error() is None]
        if not batch:
            return
        self.values.extend(m.value() for m in batch)
        deadline = time.monotonic() + T * 2
        while True:
            try:
                self.consumer.commit(asynchronous=False)
                return
            except confluent_kafka.KafkaException as e:
                self.commit_errors.append(str(e.args[0]))
                assert time.monotonic() < deadline, f"no commit for {T * 2} s: {self.commit_errors[-5:]}"

    def committed(self, topic: str) -> int:
        (tp,) = self.consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=T)
        return tp.offset


def test_groups_and_transactions_survive_their_coordinators_kill(samsa_cluster):
    """Consume-transform-produce in transactions, a classic group and a consumer-protocol group,
    while the broker leading `__consumer_offsets` and `__transaction_state` (the coordinator of
    the groups and the transactional id) is killed with kill -9 and started again."""
    coordinator, follower, other = SAMSA_IDS
    exactly_once_through_coordinator_kills(samsa_cluster, [[coordinator, follower, other]],
                                           source=[[follower, other, coordinator]],
                                           sink=[[follower, coordinator, other], [other, follower, coordinator]],
                                           kills=1)


def exactly_once_through_coordinator_kills(cluster: KraftCluster, internal: list[list[int]], source: list[list[int]],
                                           sink: list[list[int]], kills: int) -> None:
    """`__consumer_offsets` and `__transaction_state` created with the replicas `internal` (one
    partition: every group and transactional id maps to it), a source topic of one partition and a
    sink of two; a transform, a classic group and a consumer-protocol group run while their
    coordinator (the leader of both internal partitions) is killed `kills` times, each time with a
    transaction open, and started again; each record processed exactly once."""
    cluster.create_topic("__consumer_offsets", internal, {"cleanup.policy": "compact", "compression.type": "producer"})
    cluster.create_topic("__transaction_state", internal, {
        "cleanup.policy": "compact", "compression.type": "uncompressed", "min.insync.replicas": "2",
        "unclean.leader.election.enable": "false"})
    source_topic, sink_topic = "ctp-in", "ctp-out"
    cluster.create_topic(source_topic, source)
    cluster.create_topic(sink_topic, sink)
    feeder = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                       "acks": "all"})
    for i in range(RECORDS):
        feeder.produce(source_topic, key=b"%d" % i, value=b"v%d" % i)
    assert feeder.flush(T) == 0

    transform = Transform(cluster.bootstrap, source_topic, sink_topic, "ctp", "ctp-txn",
                          partition_of=lambda m: int(m.key()) % 2)
    members = {protocol: GroupMember(cluster.bootstrap, source_topic, f"group-{protocol}", protocol)
               for protocol in ("classic", "consumer")}
    killed: list[tuple[int, int]] = []  # (victim, its successor)
    restarts: list[Restart] = []

    def kill_coordinator() -> None:  # kill -9, a transaction open: the coordinators move
        victim = partitions(cluster.bootstrap, "__transaction_state")[0][0]
        cluster.brokers[victim].kill()
        restarts.append(Restart(cluster.brokers[victim]))
        killed.append((victim, -1))

    done, deadline = 0, time.monotonic() + 60 + 60 * kills
    while done < RECORDS or any(len(m.values) < RECORDS for m in members.values()):
        assert time.monotonic() < deadline, (done, {p: len(m.values) for p, m in members.items()}, killed)
        # At each kill's share of the way, once the groups have come as far, the transform's next
        # transaction is open when the coordinator dies.
        due = RECORDS * (len(killed) + 1) // (kills + 1) if len(killed) < kills else RECORDS
        kill_now = done >= due and all(len(m.values) >= due for m in members.values()) and len(killed) < kills
        if done < due or kill_now:
            batch = transform.step(timeout=0.2, before_commit=kill_coordinator if kill_now else None)
            if batch is not None:
                done = batch[-1].offset() + 1
        if killed and killed[-1][1] == -1:
            victim = killed[-1][0]
            survivors = cluster.survivors(victim)
            successors = {wait_for(lambda t=topic, s=survivors, v=victim: new_leader(s, t, v), T, interval=0.1,
                                   what=f"a new leader of {topic}-0") for topic in ("__consumer_offsets",
                                                                                   "__transaction_state")}
            killed[-1] = (victim, min(successors))
            restarts[-1].done()
            for topic in ("__consumer_offsets", "__transaction_state"):
                cluster.wait_full_isrs(topic)
        for member in members.values():
            member.step()
    assert len(killed) == kills, killed

    # Exactly once: each input record once in the output, in order within its partition.
    seen = read_committed(cluster.bootstrap, sink_topic, 2, RECORDS)
    assert seen == {p: [b"out-v%d" % i for i in range(RECORDS) if i % 2 == p] for p in (0, 1)}
    for protocol, member in members.items():
        assert member.values == [b"v%d" % i for i in range(RECORDS)], protocol
        assert member.committed(source_topic) == RECORDS, protocol
        member.consumer.close()
    transform.close()
    check = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ctp",
                                      "enable.auto.commit": False})
    (committed,) = check.committed([confluent_kafka.TopicPartition(source_topic, 0)], timeout=T)
    check.close()
    assert committed.offset == RECORDS
    print(f"coordinators killed, and their successors: {killed}; transactions: {transform.committed} committed, "
          f"{transform.aborted} aborted, {transform.producers} producers; commit errors: "
          f"{ {p: len(m.commit_errors) for p, m in members.items()} }")

CONTROLLER_IDS = (11, 12, 13)
KAFKA_IDS = (5, 6)
MIXED_SAMSA_IDS = (2, 3)
# Each kind leads partitions the other follows: Samsa 2 leads 0 (Kafka 5 first in line after it),
# Kafka 5 leads 1 (Samsa 2 next), Samsa 3 leads 2, Kafka 6 leads 3.
MIXED_ASSIGNMENT = [[2, 5, 3], [5, 2, 6], [3, 6, 2], [6, 3, 5]]


class MixedCluster(KraftCluster):
    """Three Kafka controllers (a static quorum), two Kafka brokers and two Samsa brokers."""

    def __init__(self, base_dir) -> None:
        self.controllers, voters = controller_quorum(base_dir, CONTROLLER_IDS, CONTROLLER_SETTINGS)
        any_controller = self.controllers[CONTROLLER_IDS[0]]
        self.brokers = {n: KafkaKraftBroker(base_dir / f"kafka{n}", n, voters, any_controller.cluster_id,
                                            properties={"broker.heartbeat.interval.ms": 500, **INTERNAL_TOPICS})
                        for n in KAFKA_IDS}
        self.brokers.update({n: KraftSamsaBroker(base_dir / f"samsa{n}", any_controller, node_id=n, voters=voters,
                                                 overrides=INTERNAL_TOPICS) for n in MIXED_SAMSA_IDS})

    def elect_preferred_leaders(self, topic: str) -> None:
        """A preferred leader election of every partition, at the active controller (Kafka's Admin
        with bootstrap.controllers does the same; through a broker, librdkafka sends it to the
        broker Metadata names as the controller, a Samsa broker as often as not, which does not
        forward ElectLeaders yet)."""
        codes = wait_for(lambda: elect_preferred_leaders(self.controllers, topic, len(MIXED_ASSIGNMENT)), T,
                         interval=0.5, what="the active controller's answer to ElectLeaders")
        assert all(code in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED) for code in codes.values()), codes


def elect_preferred_leaders(controllers: dict[int, KafkaController], topic: str, count: int) -> dict[int, int] | None:
    """ElectLeaders (preferred) of partitions 0..count-1 at each controller in turn: the active
    one's error code by partition (None: none took it)."""
    for controller in controllers.values():
        if not controller.is_running():
            continue
        with BlockingConnection.connect(controller.host, controller.port) as connection:
            response = connection.call(ElectLeadersRequest(election_type=0, timeout_ms=30000, topic_partitions=[
                ElectLeadersRequest.TopicPartitions(topic=topic, partitions=list(range(count)))]), 2)
        if response.error_code == ErrorCode.NOT_CONTROLLER:
            continue
        assert response.error_code == ErrorCode.NONE, response
        return {p.partition_id: p.error_code for r in response.replica_election_results for p in r.partition_result}
    return None


@pytest.fixture(scope="module")
def mixed_cluster(tmp_path_factory):
    yield from running(MixedCluster(tmp_path_factory.mktemp("kraft-mixed")))


def kill_leader_and_wait(cluster: MixedCluster, topic: str, partition: int, history: History,
                         successor: int) -> float:
    """kill -9 of `partition`'s leader, `successor` leading it next; the broker started again and
    back in every ISR. Returns the seconds from the kill to the first write acknowledged after it."""
    victim_id = partitions(cluster.bootstrap, topic)[partition][0]
    victim = cluster.brokers[victim_id]
    victim.kill()
    killed_at = time.monotonic()
    restart = Restart(victim)
    survivors = cluster.survivors(victim_id)
    wait_for(lambda: partitions(survivors, topic)[partition][0] == successor, T, interval=0.1,
             what=f"broker {successor} leading {topic}-{partition} after broker {victim_id}'s kill")
    acked_at = wait_for(lambda: history.last_ack_after(partition, killed_at), T, interval=0.1,
                        what=f"a write to {topic}-{partition} acknowledged by broker {successor}")
    restart.done()
    cluster.wait_full_isrs(topic)
    return round(acked_at - killed_at, 1)


def test_mixed_leadership_moves_both_ways_and_kills_lose_nothing(mixed_cluster):
    """Samsa and Kafka brokers lead partitions the other follows; the leader of a Kafka-led
    partition killed, a Samsa broker takes over; elected back; the leader of a Samsa-led partition
    killed, a Kafka broker takes over; elected back. An idempotent acks=all producer writes
    throughout: nothing acknowledged is lost."""
    cluster = mixed_cluster
    topic = "mixed"
    cluster.create_topic(topic, MIXED_ASSIGNMENT, {"min.insync.replicas": "2"})
    count = len(MIXED_ASSIGNMENT)
    history, writer, reader = start_writing(cluster.bootstrap, topic, count, T)
    resumed_after = []
    # Kafka 5 killed: Samsa 2 leads partition 1; elected back: Kafka 5 takes it from Samsa 2.
    resumed_after.append(kill_leader_and_wait(cluster, topic, 1, history, successor=2))
    cluster.elect_preferred_leaders(topic)
    cluster.wait_as_assigned(topic, MIXED_ASSIGNMENT)
    # Samsa 2 killed: Kafka 5 leads partition 0; elected back: Samsa 2 takes it from Kafka 5.
    resumed_after.append(kill_leader_and_wait(cluster, topic, 0, history, successor=5))
    cluster.elect_preferred_leaders(topic)
    cluster.wait_as_assigned(topic, MIXED_ASSIGNMENT)
    wait_for(lambda: all(history.last_ack_after(p, time.monotonic() - 1) for p in range(count)), T, interval=0.1,
             what="writes acknowledged by the preferred leaders again")
    print(f"resumed after {resumed_after} s")
    writer.finish()
    reader.finish()
    assert max(resumed_after) <= RESUME_WITHIN_S, resumed_after
    assert_nothing_lost(history, cluster.bootstrap, topic, count, f"resumed after {resumed_after} s")


def test_mixed_coordinators_move_between_samsa_and_kafka(mixed_cluster):
    """The groups' and the transactional id's coordinator moves from a Samsa broker to a Kafka
    broker (which loads what Samsa wrote to `__consumer_offsets` and `__transaction_state`), then
    back to a Samsa broker (which loads what Kafka wrote), each time killed with a transaction
    open: each record processed exactly once."""
    exactly_once_through_coordinator_kills(mixed_cluster, [[2, 5, 3]], source=[[3, 6, 2]],
                                           sink=[[6, 3, 5], [3, 6, 2]], kills=2)


def test_mixed_active_controller_killed_is_a_pause(mixed_cluster):
    """The active controller killed with kill -9 while the producer writes: the brokers follow the
    new quorum leader (a topic it creates reaches every broker, Samsa's and Kafka's), every broker
    stays registered and unfenced, and nothing acknowledged is lost."""
    cluster = mixed_cluster
    topic = "mixed-controller"
    cluster.create_topic(topic, MIXED_ASSIGNMENT, {"min.insync.replicas": "2"})
    count = len(MIXED_ASSIGNMENT)
    history, writer, reader = start_writing(cluster.bootstrap, topic, count, T)
    active = wait_for(lambda: active_controller(cluster.controllers, f"{topic}-before"), T, interval=0.5,
                      what="the active controller")
    cluster.controllers[active].kill()
    killed_at = time.monotonic()
    successor = wait_for(lambda: active_controller(cluster.controllers, f"{topic}-after"), T * 2,
                         interval=0.5, what="a new active controller")
    elected_after = round(time.monotonic() - killed_at, 1)
    for n, broker in cluster.brokers.items():
        wait_for(lambda b=broker: f"{topic}-after" in confluent_admin(b.bootstrap).list_topics(timeout=10).topics, T,
                 interval=0.2, what=f"{topic}-after, created by controller {successor}, in broker {n}'s metadata")
    acked_after = [round(wait_for(lambda p=p: history.last_ack_after(p, killed_at), T, interval=0.1,
                                  what=f"a write to partition {p} after the controller's kill") - killed_at, 1)
                   for p in range(count)]
    # Still registered and unfenced, every broker, through the next sessions: the ISRs whole.
    time_to_check = time.monotonic() + CONTROLLER_SETTINGS["broker.session.timeout.ms"] / 1000 * 2
    wait_for(lambda: time.monotonic() > time_to_check, T, interval=0.2)
    cluster.wait_as_assigned(topic, MIXED_ASSIGNMENT)
    writer.finish()
    reader.finish()
    print(f"controller {active} killed: controller {successor} active after {elected_after} s; "
          f"writes acknowledged after {acked_after} s")
    assert max(acked_after) <= RESUME_WITHIN_S, acked_after
    assert_nothing_lost(history, cluster.bootstrap, topic, count, f"controller {active} killed")

