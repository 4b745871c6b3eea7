"""AlterReplicaLogDirs (key 34) on a broker with two log.dirs: a replica moves to the other
directory while it is produced to, DescribeLogDirs shows its future replica meanwhile, errors
as Kafka answers them, a move left unfinished by a restart resumes."""

from __future__ import annotations

import uuid

import trio
from cluster_member import as_cluster_member
from loopback import Client, broker_config, create_topic_request, one_batch, produce_request, run_with_broker

from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

AlterReplicaLogDirs = request_class(ApiKey.ALTER_REPLICA_LOG_DIRS)
DescribeLogDirs = request_class(ApiKey.DESCRIBE_LOG_DIRS)
Fetch = request_class(ApiKey.FETCH)


def two_dir_config(tmp_path, **overrides):
    return broker_config(tmp_path, log_dirs=f"{tmp_path / 'a'},{tmp_path / 'b'}", **overrides)


def alter(path, topic: str, *partitions: int):
    return AlterReplicaLogDirs(dirs=[AlterReplicaLogDirs.AlterReplicaLogDir(path=str(path), topics=[
        AlterReplicaLogDirs.AlterReplicaLogDirTopic(name=topic, partitions=list(partitions))])])


def codes(response) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


async def describe(client) -> dict[str, list[tuple[str, int, bool, int]]]:
    response = await client.call(DescribeLogDirs(topics=None), 4)
    return {r.log_dir: sorted((t.name, p.partition_index, p.is_future_key, p.offset_lag)
                              for t in r.topics for p in t.partitions) for r in response.results}


async def fetch_all(client, topic: str) -> list[bytes]:
    values: list[bytes] = []
    offset = 0
    while True:
        response = await client.call(Fetch(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[Fetch.FetchTopic(topic=topic, partitions=[
                Fetch.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])]), 12)
        data = bytes(response.responses[0].partitions[0].records or b"")
        if not data:
            return values
        position = 0
        while position < len(data):
            header, batch = records.decode_batch(data[position:])
            values += [r.value for r in batch]
            position += header.size
            offset = header.base_offset + header.last_offset_delta + 1


def test_a_replica_moves_to_the_other_log_dir_while_it_is_produced_to(tmp_path):
    # A small copy chunk: the move takes many rounds, produce interleaving with them.
    config = two_dir_config(tmp_path, replica_fetch_max_bytes=300)
    a, b = tmp_path / "a", tmp_path / "b"

    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("moving"), 7)
        movers = broker.services.replica_manager.log_dir_movers
        log_dir = broker.services.replica_manager.get("moving", 0).log.dir.parent
        target = b if log_dir == a else a
        produced = []

        async def produce(count):
            for _ in range(count):
                value = b"v%d" % len(produced)
                response = await client.call(produce_request("moving", one_batch([value])), 9)
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
                produced.append(value)

        await produce(30)
        answer = await client.call(alter(target, "moving", 0), 2)
        assert codes(answer) == {("moving", 0): ErrorCode.NONE}
        assert movers.is_moving("moving", 0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, 30)
            while movers.completed == 0:
                await movers.wait_changed()
        await produce(5)
        assert await fetch_all(client, "moving") == produced
        dirs = await describe(client)
        assert dirs[str(target)] == [("moving", 0, False, 0)] and dirs[str(log_dir)] == []
        assert (target / "moving-0").is_dir() and not (log_dir / "moving-0").exists()
        assert [p.name for p in log_dir.iterdir() if p.name.endswith("-delete")] != []
        # Asked again: nothing to move.
        assert codes(await client.call(alter(target, "moving", 0), 1)) == {("moving", 0): ErrorCode.NONE}
        assert not movers.is_moving("moving", 0)

    run_with_broker(config, scenario)


def test_errors_and_a_preferred_dir_for_a_partition_not_created_yet(tmp_path):
    config = two_dir_config(tmp_path)
    b = tmp_path / "b"

    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("known"), 7)
        assert codes(await client.call(alter(tmp_path / "c", "known", 0), 2)) == {
            ("known", 0): ErrorCode.LOG_DIR_NOT_FOUND}
        assert codes(await client.call(alter(b, "nowhere", 0), 2)) == {
            ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # Both partitions of "later" are meant for the dir that would not get the first.
        log_dir = broker.services.replica_manager.get("known", 0).log.dir.parent
        assert codes(await client.call(alter(log_dir, "later", 0, 1), 2)) == {
            ("later", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("later", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        await client.call(create_topic_request("later", partitions=2), 7)
        for index in (0, 1):
            assert broker.services.replica_manager.get("later", index).log.dir.parent == log_dir
        # An offline destination: KAFKA_STORAGE_ERROR, and no future log.
        other = tmp_path / ("a" if log_dir == b else "b")
        broker.services.log_manager.failure_channel.maybe_add_offline_log_dir(other, "failed for the test")
        assert codes(await client.call(alter(other, "known", 0), 2)) == {("known", 0): ErrorCode.KAFKA_STORAGE_ERROR}
        assert broker.services.log_manager.get_future_log("known", 0) is None

    run_with_broker(config, scenario)


def test_describe_log_dirs_shows_the_future_replica_and_a_restart_resumes_the_move(tmp_path):
    config = two_dir_config(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    where = {}

    async def leave_a_future_log(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("resumed"), 7)
        for i in range(5):
            await client.call(produce_request("resumed", one_batch([b"%d" % i])), 9)
        logs = broker.services.log_manager
        where["from"] = logs.get_log("resumed", 0).dir.parent
        where["to"] = b if where["from"] == a else a
        # A future log as a move interrupted by a shutdown leaves it (no mover started).
        logs.create_future_log("resumed", 0, where["to"])
        dirs = await describe(client)
        assert dirs[str(where["from"])] == [("resumed", 0, False, 0)]
        assert dirs[str(where["to"])] == [("resumed", 0, True, 5)]

    async def resume(broker):
        assert list(where["to"].glob("resumed-0.*-future"))
        # The future log of a topic this broker no longer has goes (a single broker's metadata is whole).
        assert not list(b.glob("ghost-0.*-future")) and broker.services.log_manager.get_future_log("ghost", 0) is None
        movers = broker.services.replica_manager.log_dir_movers
        while movers.completed == 0:
            await movers.wait_changed()
        client = await Client.connect(broker.endpoints[0].port)
        assert await fetch_all(client, "resumed") == [b"%d" % i for i in range(5)]
        assert (await describe(client))[str(where["to"])] == [("resumed", 0, False, 0)]

    run_with_broker(config, leave_a_future_log)
    (b / f"ghost-0.{uuid.uuid4().hex}-future").mkdir()
    run_with_broker(config, resume)


# -- in a ZooKeeper cluster (a broker made a member by hand, as test_leader_and_isr.py does) --------

LeaderAndIsr = request_class(ApiKey.LEADER_AND_ISR)
StopReplica = request_class(ApiKey.STOP_REPLICA)
TOPIC_ID = uuid.UUID("0b9a2e46-73a5-4b43-8d26-1f6f3c1e2a77")


class FakeZooKeeper:
    async def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        return {}

    async def close(self) -> None:
        pass


def leader_and_isr(leader_epoch: int):
    state = LeaderAndIsr.LeaderAndIsrPartitionState(
        topic_name="t", partition_index=0, controller_epoch=1, leader=0, leader_epoch=leader_epoch, isr=[0],
        partition_epoch=0, replicas=[0], is_new=True)
    return LeaderAndIsr(controller_id=7, controller_epoch=1, broker_epoch=-1, type_=0, topic_states=[
        LeaderAndIsr.LeaderAndIsrTopicState(topic_name="t", topic_id=TOPIC_ID, partition_states=[state])])


def stop_replica(leader_epoch: int, delete: bool):
    return StopReplica(controller_id=7, controller_epoch=1, broker_epoch=-1, topic_states=[
        StopReplica.StopReplicaTopicState(topic_name="t", partition_states=[StopReplica.StopReplicaPartitionState(
            partition_index=0, leader_epoch=leader_epoch, delete_partition=delete)])])


def test_in_a_cluster_leader_and_isr_resumes_a_move_and_stop_replica_ends_one(tmp_path):
    """As Kafka 3.9's ZooKeeper-mode broker: StopReplica stops the move (the future log stays
    unless the partition is deleted), the next LeaderAndIsr resumes it."""
    async def scenario(broker):
        as_cluster_member(broker, FakeZooKeeper(), 1)
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(leader_and_isr(1), 7)
        for i in range(3):
            await client.call(produce_request("t", one_batch([b"%d" % i])), 9)
        replicas, logs = broker.services.replica_manager, broker.services.log_manager
        movers = replicas.log_dir_movers
        source = replicas.get("t", 0).log.dir.parent
        target = tmp_path / ("b" if source == tmp_path / "a" else "a")
        # A future log found at startup: not moved until the controller says the partition is here.
        logs.create_future_log("t", 0, target, TOPIC_ID)
        await client.call(stop_replica(1, delete=False), 3)
        assert not movers.is_moving("t", 0) and logs.get_future_log("t", 0) is not None
        await client.call(leader_and_isr(2), 7)
        while movers.completed == 0:
            await movers.wait_changed()
        assert replicas.get("t", 0).log.dir == target / "t-0"
        assert [r.value for r in await fetch_records(client)] == [b"0", b"1", b"2"]
        # Back to the first dir, then the partition is deleted: its future log goes with it.
        assert codes(await client.call(alter(source, "t", 0), 2)) == {("t", 0): ErrorCode.NONE}
        await client.call(stop_replica(-2, delete=True), 3)
        assert logs.get_future_log("t", 0) is None and not movers.is_moving("t", 0)
        assert not list(source.glob("t-0.*-future"))

    run_with_broker(two_dir_config(tmp_path), scenario)


async def fetch_records(client):
    response = await client.call(Fetch(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[Fetch.FetchTopic(topic="t", partitions=[
            Fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), 12)
    data = bytes(response.responses[0].partitions[0].records)
    out, position = [], 0
    while position < len(data):
        header, batch = records.decode_batch(data[position:])
        out += batch
        position += header.size
    return out


IncrementalAlterConfigs = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
BROKER, SET, DELETE = 4, 0, 1


async def set_throttle(client, value: int | None) -> None:
    op, text = (DELETE, None) if value is None else (SET, str(value))
    request = IncrementalAlterConfigs(resources=[IncrementalAlterConfigs.AlterConfigsResource(
        resource_type=BROKER, resource_name="", configs=[IncrementalAlterConfigs.AlterableConfig(
            name="replica.alter.log.dirs.io.max.bytes.per.second", config_operation=op, value=text)])])
    (response,) = (await client.call(request, 1)).responses
    assert response.error_code == ErrorCode.NONE, response.error_message


def test_a_move_takes_the_time_its_throttle_allows(tmp_path):
    """replica.alter.log.dirs.io.max.bytes.per.second, set as a dynamic broker config: a move of
    N bytes at B bytes per second cannot end sooner than (N - one chunk) / B after it began (the
    first second's B bytes at once, then B a second), however slow the machine."""
    bound, chunk = 8_000, 2_000
    config = two_dir_config(tmp_path, replica_fetch_max_bytes=chunk, replica_fetch_backoff_ms=20)
    a, b = tmp_path / "a", tmp_path / "b"

    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("slow"), 7)
        replicas = broker.services.replica_manager
        movers = replicas.log_dir_movers
        for i in range(20):
            response = await client.call(produce_request("slow", one_batch([b"%04d" % i + b"x" * 1000])), 9)
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        size = replicas.get("slow", 0).log.size
        assert size > 20_000
        await set_throttle(client, bound)
        target = b if replicas.get("slow", 0).log.dir.parent == a else a
        began = trio.current_time()
        assert codes(await client.call(alter(target, "slow", 0), 2)) == {("slow", 0): ErrorCode.NONE}
        while movers.completed == 0:
            await movers.wait_changed()
        took = trio.current_time() - began
        assert took >= (size - chunk) / bound, took
        assert movers.throttled > 0
        assert replicas.get("slow", 0).log.dir.parent == target
        await set_throttle(client, None)  # back to Long.MAX_VALUE: the next move is not held back
        throttled = movers.throttled
        assert codes(await client.call(alter(a if target == b else b, "slow", 0), 2)) == {("slow", 0): ErrorCode.NONE}
        while movers.completed == 1:
            await movers.wait_changed()
        assert movers.throttled == throttled

    run_with_broker(config, scenario)
