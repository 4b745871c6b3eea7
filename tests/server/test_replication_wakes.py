"""What wakes what waits on a replicated partition (Kafka's DelayedFetch and DelayedProduce keys):
a follower's fetch by an append, a consumer's fetch or an acks=all produce by the high watermark,
both by a change of role; and how an acks=all produce looks at its partitions (once before it
parks, again at each wake). Deterministic: the partition alone, its log on disk, no sockets."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from loopback import one_batch

from samsa.server.handlers.produce import await_replication, replication_settled
from samsa.server.metadata.cache import TopicInfo
from samsa.server.replication.replica_manager import Partition, PartitionState
from samsa.storage.log_config import LogConfig
from samsa.storage.log_manager import LogManager
from samsa.wire.errors import ErrorCode

LEADER, FOLLOWERS = 0, (1, 2)
NOW_MS = 1_000_000


def leader_of_three(tmp_path, min_insync_replicas: int = 2, isr: tuple[int, ...] = (LEADER, *FOLLOWERS)) -> Partition:
    """This broker leads partition 0 of a topic with replicas 0, 1, 2, by default all in the ISR,
    and min.insync.replicas 2."""
    logs = LogManager([tmp_path], LogConfig(min_insync_replicas=min_insync_replicas), lambda: NOW_MS)
    logs.startup()
    topic = TopicInfo("replicated", uuid.uuid4(), 1, replication_factor=3)
    logs.create_log(topic.name, 0)
    partition = Partition(topic, 0, logs, LEADER)
    partition.high_watermark_follows_log_end = False
    partition.clock_ms = lambda: NOW_MS
    partition.make_leader(PartitionState(topic.name, 0, LEADER, 1, isr, 1, (LEADER, *FOLLOWERS)), NOW_MS)
    return partition


def parked(partition: Partition) -> tuple[trio.Event, trio.Event]:
    """(a follower's fetch, a consumer's fetch or an acks=all produce), parked on the partition."""
    follower, reader = trio.Event(), trio.Event()
    partition.park(follower, on_log_end=True)
    partition.park(reader)
    return follower, reader


def test_an_append_wakes_the_followers_fetches_not_what_waits_for_the_high_watermark(tmp_path):
    partition = leader_of_three(tmp_path)
    follower, reader = parked(partition)
    partition.append(bytearray(one_batch([b"a", b"b"])))
    assert follower.is_set()
    assert not reader.is_set()  # nothing new below the high watermark: a consumer would read nothing
    assert partition.log.high_watermark == 0


def test_an_acks_all_produce_completes_on_the_fetch_that_brings_the_last_isr_member(tmp_path):
    partition = leader_of_three(tmp_path)
    info = partition.append(bytearray(one_batch([b"a", b"b"])))
    required = info.last_offset + 1
    for replica in FOLLOWERS:  # each follower's fetch from 0 finds the records (and says it has none)
        partition.follower_fetched(replica, 0, NOW_MS)
    assert partition.replication_done(required, 1) is None

    follower, reader = parked(partition)
    partition.follower_fetched(FOLLOWERS[0], required, NOW_MS)  # one follower has them: the ISR not yet
    assert partition.replication_done(required, 1) is None
    assert not reader.is_set() and not follower.is_set()

    partition.follower_fetched(FOLLOWERS[1], required, NOW_MS)  # the last one: the high watermark moves
    assert partition.log.high_watermark == required
    assert reader.is_set()  # the produce looks again, at once, and is done
    assert partition.replication_done(required, 1) == ErrorCode.NONE
    assert not follower.is_set()  # the other follower takes the high watermark from its next fetch
    partition.unpark(follower, on_log_end=True)
    assert not partition.has_parked_fetches


def test_a_change_of_role_wakes_everything_parked(tmp_path):
    partition = leader_of_three(tmp_path)
    follower, reader = parked(partition)
    partition.make_follower(PartitionState("replicated", 0, FOLLOWERS[0], 2, (LEADER, *FOLLOWERS), 2,
                                           (LEADER, *FOLLOWERS)))
    assert follower.is_set() and reader.is_set()
    assert partition.replication_done(1, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_acks_all_produce_whose_log_dir_failed_is_told_its_records_may_be_written(tmp_path):
    """The records may be on the followers, one of which will lead: REQUEST_TIMED_OUT (possibly
    written), as Kafka answers when the produce's timeout runs out, not KAFKA_STORAGE_ERROR, which
    tells an idempotent producer to write them again under a new epoch (a CI run's duplicate)."""
    partition = leader_of_three(tmp_path)
    info = partition.append(bytearray(one_batch([b"a"])))
    for replica in FOLLOWERS:  # both fetch the record before the dir fails
        partition.follower_fetched(replica, 0, NOW_MS)
    _, reader = parked(partition)
    partition.log.mark_offline()
    partition.wake()  # ReplicaManager.handle_log_dir_failure
    assert reader.is_set()
    assert partition.replication_done(info.last_offset + 1, 1) == ErrorCode.REQUEST_TIMED_OUT


def test_an_unreplicated_partition_wakes_everything_on_an_append(tmp_path):
    logs = LogManager([tmp_path], LogConfig(), lambda: NOW_MS)
    logs.startup()
    topic = TopicInfo("single", uuid.uuid4(), 1)
    logs.create_log(topic.name, 0)
    partition = Partition(topic, 0, logs)  # the single broker: the high watermark follows the log end
    follower, reader = parked(partition)
    partition.append(bytearray(one_batch([b"a"])))
    assert follower.is_set() and reader.is_set()
    assert partition.log.high_watermark == 1


def test_a_produce_looks_at_its_partitions_once_before_it_parks_and_again_at_each_wake(tmp_path):
    # Kafka's DelayedProduce: tryComplete when the produce is made, then at each wake of its keys.
    partition = leader_of_three(tmp_path)
    response = SimpleNamespace(error_code=ErrorCode.NONE)
    required = partition.append(bytearray(one_batch([b"a"]))).last_offset + 1
    waiting = [(partition, required, 1, response)]
    assert replication_settled(waiting) == waiting  # the followers have nothing yet: it parks

    async def produce_then_followers() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(await_replication, waiting, trio.current_time() + 30)
            await wait_all_tasks_blocked()
            assert partition.has_parked_fetches  # parked, on the first look's answer
            partition.follower_fetched(FOLLOWERS[0], required, NOW_MS)  # no wake: the ISR is not there yet
            await wait_all_tasks_blocked()
            assert waiting
            partition.follower_fetched(FOLLOWERS[1], required, NOW_MS)  # the high watermark moves: done

    trio.run(produce_then_followers)
    assert waiting == [] and response.error_code == ErrorCode.NONE
    assert not partition.has_parked_fetches


def test_a_produce_the_isr_never_completes_times_out(tmp_path):
    partition = leader_of_three(tmp_path)
    response = SimpleNamespace(error_code=ErrorCode.NONE)
    required = partition.append(bytearray(one_batch([b"a"]))).last_offset + 1
    waiting = [(partition, required, 1, response)]

    async def wait_a_second():
        await await_replication(waiting, trio.current_time() + 1)

    trio.run(wait_a_second, clock=MockClock(autojump_threshold=0))
    assert response.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert not partition.has_parked_fetches


def test_what_the_isr_already_has_is_settled_without_a_wait(tmp_path):
    partition = leader_of_three(tmp_path, min_insync_replicas=1, isr=(LEADER,))
    response = SimpleNamespace(error_code=ErrorCode.NONE)
    required = partition.append(bytearray(one_batch([b"a"]))).last_offset + 1  # an ISR of the leader alone
    assert replication_settled([(partition, required, 1, response)]) == []
    assert response.error_code == ErrorCode.NONE
