"""CoordinatorPartitions (server/coordinators/runtime.py): which partitions of a coordinator topic a
broker of a cluster coordinates, loaded on election and dropped on resignation, as Kafka 3.9's
onElection/onResignation with loadingPartitions and epochForPartitionId; and how the group and
transaction services load one partition."""

from __future__ import annotations

import logging

import trio
import trio.testing

from samsa.server.config.kafka_config import KafkaConfig
from samsa.server.coordinators.group_service import GroupService
from samsa.server.coordinators.runtime import CoordinatorPartitions
from samsa.server.coordinators.txn_service import TxnService
from samsa.server.metadata.image import MetadataImage
from samsa.server.zookeeper.metadata_cache import ZkMetadataCache
from samsa.wire.errors import ErrorCode


class Shard:
    def __init__(self, name: object) -> None:
        self.name = name
        self.unloaded = False


def partitions(loads: dict[int, trio.Event], installed: list, unloaded: list) -> CoordinatorPartitions[Shard]:
    def load(partition: int, epoch: int):
        trio.from_thread.run(loads[partition].wait)  # the test decides when the log is read
        return Shard((partition, epoch)), f"loaded {partition}@{epoch}"

    async def loaded(shard: Shard, actions) -> None:
        installed.append((shard.name, actions))

    return CoordinatorPartitions("__t", Shard, load, loaded, unloaded.append)


def test_election_loads_in_the_background_and_resignation_unloads():
    async def main():
        loads = {0: trio.Event(), 1: trio.Event()}
        installed, unloaded = [], []
        p = partitions(loads, installed, unloaded)
        async with trio.open_nursery() as nursery:
            p.nursery = nursery
            assert p.get(0).name == ErrorCode.NOT_COORDINATOR
            p.on_leadership_change([(0, 3), (1, 0)], [])
            await trio.testing.wait_all_tasks_blocked()
            assert p.get(0).name == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and p.loading == {0, 1}
            loads[0].set()
            while 0 not in p.owned:
                await trio.sleep(0.01)
            assert p.get(0).name == (0, 3) and p.epoch(0) == 3
            assert installed == [((0, 3), "loaded 0@3")]
            # Elected again at a newer epoch while still led here: kept, under the new epoch.
            p.on_election(0, 4)
            assert p.get(0).name == (0, 3) and p.epoch(0) == 4
            # A resignation at an older epoch than the partition's is ignored; at its epoch it unloads.
            p.on_resignation(0, 3)
            assert 0 in p.owned
            p.on_leadership_change([], [(0, 4)])
            assert p.get(0).name == ErrorCode.NOT_COORDINATOR and [s.name for s in unloaded] == [(0, 3)]
            # Resigned while loading: what the load read is dropped.
            p.on_resignation(1, 1)
            loads[1].set()
            await trio.sleep(0.1)
            assert 1 not in p.owned and p.get(1).name == ErrorCode.NOT_COORDINATOR and len(installed) == 1
            nursery.cancel_scope.cancel()

    trio.run(main)


class NoLogs:
    """A ReplicaManager that holds no partition: the controller made this broker leader of a
    partition whose log is not here (a race with its deletion, say)."""

    def get(self, topic: str, index: int):
        return None


def test_a_partition_led_without_a_log_loads_empty_as_kafka_loads_it(tmp_path, caplog):
    # Kafka's doLoadGroupsAndOffsets and loadTransactionMetadata warn "found no log" and own the
    # partition with nothing in it; it must not fail (and answer NOT_COORDINATOR until the next election).
    metadata = MetadataImage(tmp_path / "metadata.json", "cluster")
    cluster = ZkMetadataCache(1, metadata)
    config = KafkaConfig({})
    groups = GroupService(config, metadata, NoLogs(), trio.CapacityLimiter(1), lambda: 0, lambda: "member",
                          cluster=cluster)
    transactions = TxnService(config, metadata, NoLogs(), trio.CapacityLimiter(1), lambda: 1, lambda *_: None,
                              lambda: 0, cluster=cluster)
    with caplog.at_level(logging.WARNING):
        group_coordinator, _ = groups._load_partition(3, 5)
        txn_coordinator, _ = transactions._load_partition(4, 6)
    assert group_coordinator.active and not group_coordinator.groups
    assert txn_coordinator.coordinator_epoch == 6
    assert "load offsets and group metadata from __consumer_offsets-3, but found no log" in caplog.text
    assert "load transaction metadata from __transaction_state-4, but found no log" in caplog.text
