"""Issue 17's full disk, for real: a tmpfs of 4 MB the test mounts (root only; skipped with the
reason otherwise) is one of the broker's log dirs, and a filler file leaves it little room.
What Samsa does is what Kafka does (LogDirFailureChannel, ReplicaManager.handleLogDirFailure,
LogManager.handleLogDirFailure):
- the Produce whose append meets ENOSPC gets KAFKA_STORAGE_ERROR, and the whole log dir goes
  offline at once, until a restart (Kafka has no way back for a failed dir: what reached its disk
  is unknown): every later Produce, Fetch or ListOffsets of a partition in it gets
  KAFKA_STORAGE_ERROR; DescribeLogDirs names the dir with KAFKA_STORAGE_ERROR and no partitions;
- the partitions of the other log dirs keep being written and read;
- it is logged once ("Stopping serving logs in dir ..."), not per request;
- with every log dir offline the broker halts (exit code 1), as Kafka's does;
- after a restart with the space back, the dir is online again: its logs are recovered (no clean
  shutdown was recorded for it, so a half-written batch is cut) and every acknowledged record is
  read back at its offset; appends continue after them;
- in a three-broker cluster (ZooKeeper mode, Samsa's controller or Kafka 3.9's), the broker whose
  log dir fails tells the controller through /log_dir_event_notification (Kafka's
  propagateLogDirEvent, in Kafka's format: either controller handles it); its replicas in the dir
  answer the controller's LeaderAndIsr with KAFKA_STORAGE_ERROR, so their leaderships move to the
  other brokers and they leave the ISRs, while idempotent acks=all writes go on and lose nothing."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from compat_util import confluent_admin, create_topic, wait_for
from history import History
from history_clients import Reader, Writer, assert_nothing_lost
from server_process import HOST
from test_cluster_failover import CONTROLLERS, Cluster
from wire_client import WireClient, fetch_once, produce_one, values_by_offset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "storage"))
from small_disk import mounted_tmpfs  # noqa: E402

from samsa.client.errors import BrokerUnreachable
from samsa.wire import zk_data
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

DescribeLogDirs = request_class(ApiKey.DESCRIBE_LOG_DIRS)
SMALL_FS = "4m"
VALUE = 64 * 1024
ROOM_LEFT = 600 * 1024  # what the filler leaves: about nine records
T = 30


@pytest.fixture
def small_dir(tmp_path):
    """A 4 MB tmpfs; skipped where mounting is not permitted."""
    with mounted_tmpfs(tmp_path / "small", SMALL_FS) as path:
        yield path


def fill(directory, leave: int = ROOM_LEFT):
    """A file taking all but `leave` bytes of the filesystem."""
    stats = os.statvfs(directory)
    filler = directory / "filler"
    with open(filler, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, stats.f_bavail * stats.f_frsize - leave)
    return filler


def produce(port: int, topic: str, partition: int, value: bytes) -> tuple[int, int]:
    return produce_one(HOST, port, topic, partition, value)


def fetch(port: int, topic: str, partition: int) -> tuple[int, dict[int, bytes | None]]:
    code, data = fetch_once(HOST, port, topic, partition)
    return code, values_by_offset(data)


def describe_log_dirs(port: int) -> dict[str, tuple[int, set[tuple[str, int]]]]:
    """{log dir: (error code, {(topic, partition)})}."""
    with WireClient(HOST, port) as client:
        answer = client.call(DescribeLogDirs(topics=None), 4)
    return {r.log_dir: (r.error_code, {(t.name, p.partition_index) for t in r.topics for p in t.partitions})
            for r in answer.results}


def fill_until_refused(port: int, topic: str, partition: int) -> tuple[int, dict[int, bytes]]:
    """Produce 64 KB records until one is refused: (its error code, {offset: value} acknowledged)."""
    acked = {}
    for sequence in range(64):
        value = b"%06d" % sequence + os.urandom(VALUE - 6)
        code, offset = produce(port, topic, partition, value)
        if code != ErrorCode.NONE:
            return code, acked
        acked[offset] = value
    raise AssertionError(f"{len(acked)} records of 64 KB fitted in what the filler left")


@pytest.mark.samsa_only("the log.dirs of a broker the test starts itself")
def test_a_full_log_dir_goes_offline_and_the_other_keeps_serving(broker_factory, topic_name, small_dir, tmp_path):
    roomy = tmp_path / "roomy"
    broker = broker_factory({"log.dirs": f"{small_dir},{roomy}"})
    create_topic(broker.bootstrap, topic_name, partitions=2)
    placed = describe_log_dirs(broker.port)
    on_small = next(p for (t, p) in placed[str(small_dir)][1] if t == topic_name)
    elsewhere = 1 - on_small
    assert (topic_name, elsewhere) in placed[str(roomy)][1]
    first = {0: b"before the filler"}
    assert produce(broker.port, topic_name, on_small, first[0]) == (ErrorCode.NONE, 0)  # the index pages exist
    filler = fill(small_dir)

    code, acked = fill_until_refused(broker.port, topic_name, on_small)
    acked = {**first, **acked}
    assert code == ErrorCode.KAFKA_STORAGE_ERROR and len(acked) > 1, (code, len(acked))
    # Offline until a restart, whatever is asked of it.
    assert produce(broker.port, topic_name, on_small, b"tiny")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert fetch(broker.port, topic_name, on_small)[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert describe_log_dirs(broker.port)[str(small_dir)] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
    # The other log dir keeps serving.
    assert produce(broker.port, topic_name, elsewhere, b"still fine") == (ErrorCode.NONE, 0)
    assert fetch(broker.port, topic_name, elsewhere) == (ErrorCode.NONE, {0: b"still fine"})
    error, partitions = describe_log_dirs(broker.port)[str(roomy)]
    assert error == ErrorCode.NONE and (topic_name, elsewhere) in partitions
    output = broker.output()
    assert output.count(f"Stopping serving logs in dir {small_dir}") == 1, broker.output_tail()
    errors = [line for line in output.splitlines() if " ERROR " in line and "No space left on device" in line]
    assert len(errors) == 1, broker.output_tail()

    # Space back, a restart: everything acknowledged is there, appends continue after it.
    filler.unlink()
    assert broker.stop() == 0
    broker.start()
    assert describe_log_dirs(broker.port)[str(small_dir)][0] == ErrorCode.NONE
    assert fetch(broker.port, topic_name, on_small) == (ErrorCode.NONE, acked)
    assert produce(broker.port, topic_name, on_small, b"after") == (ErrorCode.NONE, max(acked) + 1)
    assert fetch(broker.port, topic_name, elsewhere) == (ErrorCode.NONE, {0: b"still fine"})


@pytest.mark.samsa_only("the log.dirs of a broker the test starts itself")
def test_the_last_log_dir_failing_halts_the_broker_and_a_restart_recovers_it(broker_factory, topic_name,
                                                                               small_dir):
    broker = broker_factory({"log.dirs": str(small_dir)})
    create_topic(broker.bootstrap, topic_name, partitions=1)
    first = {0: b"before the filler"}
    assert produce(broker.port, topic_name, 0, first[0]) == (ErrorCode.NONE, 0)
    filler = fill(small_dir)
    acked = dict(first)
    try:
        code, more = fill_until_refused(broker.port, topic_name, 0)
        acked.update(more)
        assert code == ErrorCode.KAFKA_STORAGE_ERROR
    except (AssertionError, OSError, BrokerUnreachable) as e:  # Kafka halts from another thread: the answer may not come
        if "fitted" in str(e):
            raise
    wait_for(lambda: not broker.is_running(), T, what="the broker to halt")
    assert broker.stop() == 1  # reaps the exited process: its exit code
    assert "Shutdown broker because all log dirs in" in broker.output()

    filler.unlink()
    started = time.monotonic()
    broker.start()
    code, stored = fetch(broker.port, topic_name, 0)
    assert code == ErrorCode.NONE
    assert {o: stored.get(o) for o in acked} == acked, f"restarted in {time.monotonic() - started:.1f}s"
    assert produce(broker.port, topic_name, 0, b"after")[0] == ErrorCode.NONE


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_a_full_log_dir_in_a_cluster_moves_its_leaderships_and_writes_go_on(kafka39_factory, topic_name, small_dir,
                                                                           tmp_path, controller):
    from confluent_kafka.admin import NewTopic

    cluster = Cluster(kafka39_factory, controller, overrides={1: {"log.dirs": f"{small_dir},{tmp_path / 'roomy'}"}})
    try:
        partitions = 4
        assignment = [[1, 2, 3] if p % 2 else [1, 3, 2] for p in range(partitions)]  # broker 1 leads them all
        admin = confluent_admin(cluster.bootstrap)  # kept: the result's future dies with it
        admin.create_topics(
            [NewTopic(topic_name, partitions, replica_assignment=assignment, config={"min.insync.replicas": "2"})],
            operation_timeout=T)[topic_name].result(timeout=T)
        wait_for(lambda: all(cluster.zk.exists(zk_data.partition_state_path(topic_name, p))
                             and len(cluster.state(topic_name, p).isr) == 3 for p in range(partitions)), T,
                 what="every replica in every ISR")
        port = cluster.samsa[1].port

        def logs_of_topic() -> set[tuple[str, int]]:
            return {tp for _, logs in describe_log_dirs(port).values() for tp in logs if tp[0] == topic_name}
        # The partition states are in ZooKeeper before broker 1 has its LeaderAndIsr: wait for its logs.
        wait_for(lambda: len(logs_of_topic()) == partitions, T, what="broker 1's logs of every partition")
        on_small = sorted(p for t, p in describe_log_dirs(port)[str(small_dir)][1] if t == topic_name)
        assert 0 < len(on_small) < partitions, on_small  # broker 1 spreads its logs over both dirs

        history = History()
        writer = Writer(cluster.bootstrap, topic_name, history, partitions, padding=2048)
        reader = Reader(cluster.bootstrap, topic_name, history, partitions)
        writer.start()
        reader.start()
        wait_for(lambda: all(history.acked_count(p) > 5 for p in range(partitions)), T, what="the first writes")
        fill(small_dir, leave=300 * 1024)
        filled_at = time.monotonic()

        # The dir fails at the first append it cannot take; the controller moves the leaderships
        # of its partitions, bumping their leader epochs, and takes broker 1 out of their ISRs.
        wait_for(lambda: all(cluster.state(topic_name, p).leader in (2, 3) and 1 not in cluster.state(topic_name, p).isr
                             for p in on_small), T, interval=0.1, what="the leaderships moved off the full dir")
        assert all(cluster.state(topic_name, p).leader_epoch > 0 for p in on_small)
        assert all(cluster.state(topic_name, p).leader == 1 for p in range(partitions) if p not in on_small)
        assert describe_log_dirs(port)[str(small_dir)] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
        # The notification was handled, and deleted.
        wait_for(lambda: cluster.zk.get_children(zk_data.LOG_DIR_EVENT_NOTIFICATION) == [], T, interval=0.1,
                 what="the log dir event notification deleted")
        # Writes go on through the new leaders, acks=all with the two replicas left.
        moved_at = time.monotonic()
        for p in on_small:
            wait_for(lambda p=p: history.last_ack_after(p, moved_at), T, interval=0.1,
                     what=f"a write to partition {p} acknowledged by its new leader")
        assert cluster.samsa[1].is_running()
        writer.finish()
        reader.finish()
        assert_nothing_lost(history, cluster.bootstrap, topic_name, partitions,
                            f"leaderships moved {moved_at - filled_at:.1f} s after the filler")
    finally:
        cluster.close()
