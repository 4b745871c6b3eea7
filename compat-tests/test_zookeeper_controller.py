"""A Samsa broker as the controller of a ZooKeeper cluster (Kafka 3.9's KafkaController): three
Samsa brokers and no Kafka elect one of them through /controller, it gives an RF 3 topic its
leaders, and a leader killed with kill -9 (then the controller itself) is replaced within seconds
while acks=all goes on; in a mixed cluster Kafka 3.9 follows a Samsa controller's LeaderAndIsr and
its ControlledShutdown moves leadership back to Samsa. One ZooKeeper for the module (one chroot
per test). In process, the controller's shell meets a late session-expiry event and a lost
connection to ZooKeeper, and still acts as controller."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
import trio
from compat_util import wait_for
from server_process import HOST
from test_zookeeper_cluster import partition_state, produce_all, zk_reader
from wire_client import WireClient, metadata_controller

from samsa.server.config.kafka_config import KafkaConfig
from samsa.server.zookeeper.membership import ZkMembership
from samsa.server.zookeeper.zk_client import KafkaZkClient
from samsa.server.zookeeper.controller import ZkController, _Request
from samsa.wire import zk_data
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

pytest.importorskip("kazoo.client")

CreateTopics = request_class(ApiKey.CREATE_TOPICS)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)
DeleteTopics = request_class(ApiKey.DELETE_TOPICS)
ElectLeaders = request_class(ApiKey.ELECT_LEADERS)
AlterPartitionReassignments = request_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
ListPartitionReassignments = request_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)
T = 30
FAILOVER_S = 15  # session timeout 6 s, then the controller's election


@pytest.fixture(scope="module")
def module_zookeeper(tmp_path_factory):
    from conftest import BrokerPool
    pool = BrokerPool(tmp_path_factory, "zookeeper")
    try:
        yield pool.zookeeper()
    finally:
        pool.close()


def samsa_settings(connect: str, broker_id: int) -> dict[str, object]:
    return {"zookeeper.connect": connect, "broker.id": broker_id, "zookeeper.session.timeout.ms": 6000}


def controller_id(client) -> int | None:
    if not client.exists(zk_data.CONTROLLER):
        return None
    return zk_data.decode_controller(client.get(zk_data.CONTROLLER)[0]).broker_id


def create_topic(port: int, topic: str, assignment: list[list[int]]) -> None:
    with WireClient(HOST, port) as wire:
        new = CreateTopics.CreatableTopic(
            name=topic, num_partitions=-1, replication_factor=-1,
            assignments=[CreateTopics.CreatableReplicaAssignment(partition_index=p, broker_ids=r)
                         for p, r in enumerate(assignment)])
        (answer,) = wire.call(CreateTopics(topics=[new], timeout_ms=T * 1000), 7).topics
    assert answer.error_code == ErrorCode.NONE, answer


def test_three_samsa_brokers_fail_over(module_zookeeper, kafka39_factory, topic_name):
    connect = module_zookeeper.connect + "/samsa-only"
    brokers = {i: kafka39_factory(samsa_settings(connect, i)) for i in (1, 2, 3)}
    with zk_reader(connect) as client:
        first_controller = wait_for(lambda: controller_id(client), T, what="a controller")
        assert zk_data.decode_controller_epoch(client.get(zk_data.CONTROLLER_EPOCH)[0]) >= 1
        for b in brokers.values():
            wait_for(lambda b=b: metadata_controller(b.port) == first_controller, T, what="Metadata's controller id")
        create_topic(brokers[1].port, topic_name, [[1, 2, 3]])
        state = wait_for(lambda: client.exists(zk_data.partition_state_path(topic_name, 0))
                         and partition_state(client, topic_name), T, what="the partition state")
        assert (state.leader, state.isr) == (1, (1, 2, 3))
        assert produce_all(brokers[1].port, topic_name, [b"a", b"b"]) == (ErrorCode.NONE, 0)

        # Another topic grown and deleted: the controller creates the new partition's state and
        # leader, then deletes every replica (StopReplica) and the znodes.
        other = topic_name + "-x"
        create_topic(brokers[2].port, other, [[2, 3]])
        with WireClient(HOST, brokers[3].port) as wire:
            (grown,) = wire.call(CreatePartitions(topics=[CreatePartitions.CreatePartitionsTopic(
                name=other, count=2, assignments=[CreatePartitions.CreatePartitionsAssignment(broker_ids=[3, 1])])],
                timeout_ms=T * 1000), 3).results
            assert grown.error_code == ErrorCode.NONE
            assert zk_data.decode_partition_state(client.get(zk_data.partition_state_path(other, 1))[0]).leader == 3
            (deleted,) = wire.call(DeleteTopics(topic_names=[other], timeout_ms=T * 1000), 5).responses
            assert deleted.error_code == ErrorCode.NONE
        wait_for(lambda: not client.exists(zk_data.topic_path(other)) and not client.exists(
            zk_data.delete_topic_path(other)), T, what="the deletion to complete")
        assert not any((b.data_dir / f"{other}-{p}").exists() for b in brokers.values() for p in (0, 1))

        # The leader killed: a new leader from the ISR within seconds, acks=all goes on through it.
        # (Broker 1 may be the controller too: then a new controller elects the new leader.)
        killed = time.monotonic()
        brokers[1].kill()
        state = wait_for(lambda: partition_state(client, topic_name).leader in (2, 3)
                         and partition_state(client, topic_name), FAILOVER_S, what="a new leader")
        assert state.leader_epoch == 1 and 1 not in state.isr
        new_leader = brokers[state.leader]
        wait_for(lambda: produce_all(new_leader.port, topic_name, [b"c"]) == (ErrorCode.NONE, 2), T,
                 what="acks=all through the new leader")
        assert time.monotonic() - killed < FAILOVER_S + 5

        # The controller killed (if broker 1 was not it, it is one of the live two now).
        controller = wait_for(lambda: controller_id(client) in (2, 3) and controller_id(client), T, what="a controller")
        brokers[controller].kill()
        survivor = brokers[5 - controller]
        wait_for(lambda: controller_id(client) == 5 - controller, FAILOVER_S, what="the survivor as controller")
        state = wait_for(lambda: partition_state(client, topic_name).leader == 5 - controller
                         and partition_state(client, topic_name), FAILOVER_S, what="the survivor leading")
        wait_for(lambda: produce_all(survivor.port, topic_name, [b"d"])[0] == ErrorCode.NONE, T,
                 what="acks=all through the survivor")
        wait_for(lambda: metadata_controller(survivor.port) == 5 - controller, T, what="Metadata's new controller")

        # Broker 1 back: it catches up, the leader takes it into the ISR (AlterPartition to the
        # controller), and ElectLeaders makes it, the preferred replica, the leader again.
        brokers[1].start()
        wait_for(lambda: 1 in partition_state(client, topic_name).isr, T, what="broker 1 back in the ISR")
        request = ElectLeaders(election_type=0, timeout_ms=T * 1000, topic_partitions=[
            ElectLeaders.TopicPartitions(topic=topic_name, partitions=[0])])
        with WireClient(HOST, brokers[1].port) as wire:
            assert wire.call(request, 2).replica_election_results[0].partition_result[0].error_code == \
                ErrorCode.NOT_CONTROLLER
        with WireClient(HOST, survivor.port) as wire:
            (result,) = wire.call(request, 2).replica_election_results
        assert (result.topic, result.partition_result[0].error_code) == (topic_name, ErrorCode.NONE)
        assert partition_state(client, topic_name).leader == 1
        wait_for(lambda: produce_all(brokers[1].port, topic_name, [b"e"])[0] == ErrorCode.NONE, T,
                 what="acks=all through broker 1 again")

        # A reassignment moves a partition from the survivor to broker 1: broker 1 copies it,
        # joins the ISR, leads, and the survivor's replica is deleted.
        moved = topic_name + "-m"
        create_topic(survivor.port, moved, [[5 - controller]])
        assert produce_all(survivor.port, moved, [b"m1", b"m2"]) == (ErrorCode.NONE, 0)
        with WireClient(HOST, survivor.port) as wire:
            (answer,) = wire.call(AlterPartitionReassignments(topics=[AlterPartitionReassignments.ReassignableTopic(
                name=moved, partitions=[AlterPartitionReassignments.ReassignablePartition(
                    partition_index=0, replicas=[1])])]), 0).responses
            assert answer.partitions[0].error_code == ErrorCode.NONE
            wait_for(lambda: partition_state(client, moved).leader == 1, T, what="the moved partition led by 1")
            # NONE: an answer of the controller (NOT_CONTROLLER also comes without topics).
            wait_for(lambda: (listed := wire.call(ListPartitionReassignments(topics=None), 0)).error_code
                     == ErrorCode.NONE and not listed.topics, T, what="the reassignment to complete")
        assert zk_data.decode_topic(client.get(zk_data.topic_path(moved))[0]).partitions[0].replicas == (1,)
        wait_for(lambda: not (survivor.data_dir / f"{moved}-0").exists(), T, what="the old replica deleted")
        assert produce_all(brokers[1].port, moved, [b"m3"]) == (ErrorCode.NONE, 2)


def test_kafka_follows_a_samsa_controller(module_zookeeper, kafka39_factory, topic_name):
    connect = module_zookeeper.connect + "/mixed"
    samsa = kafka39_factory(samsa_settings(connect, 1))
    with zk_reader(connect) as client:
        wait_for(lambda: controller_id(client) == 1, T, what="Samsa as controller")
        kafka = kafka39_factory.kafka39(connect, overrides={"broker.id": 0})
        wait_for(lambda: metadata_controller(kafka.port) == 1, T, what="Kafka to learn of the Samsa controller")
        create_topic(samsa.port, topic_name, [[0, 1]])
        state = wait_for(lambda: client.exists(zk_data.partition_state_path(topic_name, 0))
                         and partition_state(client, topic_name), T, what="the partition state")
        assert (state.leader, state.isr) == (0, (0, 1))
        # Kafka leads by the Samsa controller's LeaderAndIsr; Samsa follows it.
        wait_for(lambda: produce_all(kafka.port, topic_name, [b"k1", b"k2"]) == (ErrorCode.NONE, 0), T,
                 what="acks=all through Kafka")
        # Kafka stops: its ControlledShutdown to the Samsa controller moves the leadership to Samsa.
        kafka.stop()
        assert "Controlled shutdown request returned successfully" in kafka.output()
        state = wait_for(lambda: partition_state(client, topic_name).leader == 1
                         and partition_state(client, topic_name), T, what="Samsa leading")
        assert state.isr == (1,)
        assert produce_all(samsa.port, topic_name, [b"s"]) == (ErrorCode.NONE, 2)
        assert controller_id(client) == 1


# --- the controller's shell in process, against the real ZooKeeper ----------------------------------

async def handled(controller: ZkController) -> None:
    """Every event queued before this one has been handled (the queue is first in, first out)."""
    marker = _Request("auto_rebalance", (), trio.Event())
    controller._events_send.send_nowait(marker)
    await marker.done.wait()


@contextlib.asynccontextmanager
async def controller_in_process(connect: str):
    """Broker 1's ZkController on a ZooKeeper client of its own, in this trio run, elected."""
    client = KafkaZkClient(connect, 6000, T * 1000)
    await client.start()  # the chroot created
    try:
        await client.create_top_level_paths()
        controller = ZkController(ZkMembership(client, 1, "cluster"),
                                  KafkaConfig({"zookeeper.connect": connect, "broker.id": "1"}))
        async with trio.open_nursery() as nursery:
            await nursery.start(controller.run)
            await handled(controller)
            assert controller.is_active
            yield controller
            nursery.cancel_scope.cancel()
    finally:
        await client.close()


class ZooKeeperLink:
    """A TCP relay to ZooKeeper whose connections can be cut: its client finds the connection lost
    and connects again through the relay, within its session."""

    def __init__(self, port: int) -> None:
        self.port_to = port
        self.listener = socket.create_server((HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection((HOST, self.port_to))
            except OSError:
                return
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(a, b), daemon=True).start()

    @staticmethod
    def _relay(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.sockets = []

    def close(self) -> None:
        self.listener.close()
        self.cut()


def test_a_session_expiry_seen_after_winning_again_leaves_an_acting_controller(module_zookeeper, topic_name):
    """The order a mixed-load soak met (b7b07d2): a ZooKeeper error made the controller resign and
    win /controller again in its new session, and only then was the old session's expiry handled.
    That event must not leave /controller held by a broker that acts as no controller (then no
    broker can be elected): the controller gives the znode up and wins it again, a new epoch."""
    connect = f"{module_zookeeper.connect}/{topic_name}"

    async def scenario() -> None:
        async with controller_in_process(connect) as controller:
            with zk_reader(connect) as zk:
                assert controller_id(zk) == 1
                epoch = zk_data.decode_controller_epoch(zk.get(zk_data.CONTROLLER_EPOCH)[0])
                controller._events_send.send_nowait(("session", None))  # the late expiry
                await handled(controller)
                assert controller.is_active and controller_id(zk) == 1
                assert zk_data.decode_controller_epoch(zk.get(zk_data.CONTROLLER_EPOCH)[0]) == epoch + 1

    trio.run(scenario)


def test_a_controller_whose_zookeeper_connection_dropped_still_sees_brokers_register(module_zookeeper, topic_name):
    """kazoo drops every watch when its connection is lost, even when the session lives on (no
    SetWatches, unlike ZooKeeper's Java client): a controller that did not read its paths again
    once reconnected never saw a restarted broker register (a mixed-load soak, its cluster left
    without that broker in any ISR). Here the controller's connection is cut with its session kept,
    then a broker registers: the controller takes it among its live brokers."""
    link = ZooKeeperLink(module_zookeeper.port)
    connect = f"{HOST}:{link.port}/{topic_name}"
    registration = zk_data.BrokerRegistration(2, (zk_data.EndPoint("PLAINTEXT", HOST, 1, "PLAINTEXT"),))

    async def scenario() -> None:
        async with controller_in_process(connect) as controller:
            session = controller._membership.client.session_id
            link.cut()
            with zk_reader(f"{module_zookeeper.connect}/{topic_name}") as zk:  # not through the link
                zk.create(zk_data.broker_path(2), zk_data.encode_broker(registration), ephemeral=True)
                with trio.fail_after(T):
                    while 2 not in controller.controller.ctx.live_brokers:
                        await trio.sleep(0.05)
            assert controller._membership.client.session_id == session, "the session expired: not the case tested"

    try:
        trio.run(scenario)
    finally:
        link.close()
