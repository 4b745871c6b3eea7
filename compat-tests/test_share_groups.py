"""Share groups (KIP-932, issue 28) through real clients, the same checks on Samsa and on Kafka 4.4:

* Kafka's Java KafkaShareConsumer (java/ShareClient.java, one JVM for the basics): implicit
  acknowledgement, explicit ACCEPT / RELEASE / REJECT, RELEASE up to share.delivery.count.limit
  (then archived), three consumers of one group on one partition (disjoint deliveries whose union
  is every record), share.isolation.level=read_committed over an aborted transaction;
* Java consumers holding acquired records: one frozen with SIGSTOP (they come again once their
  acquisition locks expire), then one killed with kill -9 (Kafka releases them when its connection
  closes): each time delivered again with the delivery count raised; the last delivery attempt one
  record at a time, then archived at the limit;
* confluent-kafka's ShareConsumer (librdkafka's share consumer): implicit and explicit
  acknowledgement;
* the broker restarted mid-stream under a confluent-kafka share consumer: what was acknowledged
  before is never delivered again, what was in flight comes again, nothing is lost;
* Kafka's kafka-share-groups.sh: test_share_groups_tool.py.

Where a check must show that nothing else comes, the consumer reads until a record produced after
everything else (a sentinel, "end"): a share partition hands out its available records lowest
offset first, so whatever was still to come would have come before it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from test_java_client import java_client  # noqa: F401 (a fixture: compiles compat-tests/java/)

# Kafka's broker defaults but for the least lock duration a group may set (Kafka's default 15 s;
# librdkafka's CI sets 1 s too), so that the lock-expiry check waits seconds, not half a minute.
BROKER = {"group.share.min.record.lock.duration.ms": "1000"}
RUN_TIMEOUT = 240
SENTINEL = "end"


@pytest.fixture(scope="module")
def share_broker(broker_kind, module_broker_factory):
    return module_broker_factory(overrides=BROKER)


@pytest.fixture(scope="module")
def share_client(java_client) -> list[str]:  # noqa: F811
    return [*java_client[:-1], "ShareClient"]


def prefix() -> str:
    return f"share-{uuid.uuid4().hex[:8]}"


def lines(stdout: str, run_prefix: str) -> dict[str, list[dict]]:
    """ShareClient's JSON lines by check name."""
    checks: dict[str, list[dict]] = {}
    for line in stdout.replace(run_prefix, "P").splitlines():
        d = json.loads(line)
        checks.setdefault(d.pop("check"), []).append(d)
    return checks


def values(name: str, n: int, count: int = 1) -> list[str]:
    return [f"{name}-{i}:{count}" for i in range(n)]


# -- Kafka's Java client: one JVM for the basics ---------------------------------------------------

@pytest.fixture(scope="module")
def basics(share_broker, share_client) -> dict[str, dict]:
    p = prefix()
    done = subprocess.run([*share_client, "basics", share_broker.bootstrap, p], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    assert done.returncode == 0, f"ShareClient basics exited {done.returncode}:\n{done.stderr[-6000:]}"
    return {check: found[0] for check, found in lines(done.stdout, p).items()}


def test_java_implicit_acknowledgement(basics):
    c = basics["implicit"]
    assert c["first"] == values("v", 20)
    # Closed after commitSync: the group's next consumer gets only what came after.
    assert c["after_close"] == [f"{SENTINEL}:1"]
    assert c["acquisition_lock_timeout_ms"] == 30000  # group.share.record.lock.duration.ms


def test_java_explicit_accept_release_reject(basics):
    c = basics["explicit"]
    # v-i: i % 3 == 0 accepted; 1 released, delivered again with delivery count 2 (then accepted);
    # 2 rejected (archived: never delivered again).
    expected = []
    for i in range(12):
        action = ["accept", "release", "reject"][i % 3]
        expected.append(f"v-{i}:1:{action}")
        if action == "release":
            expected.append(f"v-{i}:2:accept")
    assert c["events"] == sorted(expected)
    assert c["until_sentinel"] == [f"{SENTINEL}:1"]


def test_java_release_to_the_delivery_count_limit(basics):
    c = basics["release_to_limit"]
    # share.delivery.count.limit 2: delivered twice, released twice, then archived.
    assert c["events"] == sorted(values("v", 3, 1) + values("v", 3, 2))
    assert c["until_sentinel"] == [f"{SENTINEL}:1"]


def test_java_several_consumers_one_partition(basics):
    consumers = basics["several_consumers"]["consumers"]
    deliveries = [d for got in consumers for d in got]
    seen = [d.rsplit(":", 1)[0] for d in deliveries]
    assert sorted(seen) == sorted(f"v-{i}" for i in range(300)), "every record exactly once"
    assert {d.rsplit(":", 1)[1] for d in deliveries} == {"1"}, "no redelivery without a failure"
    # All three had the partition (ShareGroupDescribe said so before the records came): the records
    # were shared, not handed to one.
    assert sum(1 for got in consumers if got) >= 2, [len(got) for got in consumers]


def test_java_read_committed(basics):
    seen = basics["read_committed"]["seen"]
    committed = values("committed-a", 5) + values("committed-b", 5)
    assert seen["read_committed"] == committed + [f"{SENTINEL}:1"]
    assert seen["read_uncommitted"] == (values("committed-a", 5) + values("aborted", 5) + values("committed-b", 5)
                                        + [f"{SENTINEL}:1"])


# -- a consumer killed with kill -9 while it holds records -----------------------------------------

def share_topic(bootstrap: str, topic: str, group: str, group_configs: dict[str, str] | None = None) -> None:
    """A topic of one partition, and a group that starts at its beginning (share.auto.offset.reset
    is latest by default) with the group configs given, set with IncrementalAlterConfigs on the
    GROUP config resource (type 32)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until its futures are done
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    configs = {"share.auto.offset.reset": "earliest", **(group_configs or {})}
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)


def produce(bootstrap: str, topic: str, vals: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in vals:
        p.produce(topic, value=v.encode(), partition=0)
    assert p.flush(30) == 0


LOCK_MS = 8000  # share.record.lock.duration.ms of the group: well over a JVM's start here
LIMIT = 3  # share.delivery.count.limit of the group


def test_java_consumers_frozen_and_killed_holding_records(share_broker, share_client):
    b = share_broker.bootstrap
    topic, group = prefix(), prefix()
    share_topic(b, topic, group, {"share.record.lock.duration.ms": str(LOCK_MS),
                                  "share.delivery.count.limit": str(LIMIT)})
    produce(b, topic, [f"v-{i}" for i in range(10)])
    procs: list[subprocess.Popen] = []

    def hold() -> tuple[subprocess.Popen, dict]:
        """A consumer (a JVM) that has acquired the 10 records and holds them, unacknowledged."""
        proc = subprocess.Popen([*share_client, "hold", b, "P", topic, group, "10"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        line = proc.stdout.readline()
        if not line:
            proc.kill()
            pytest.fail(f"ShareClient hold said nothing:\n{proc.communicate(timeout=30)[1][-4000:]}")
        return proc, json.loads(line)

    def run(*args: str) -> dict:
        done = subprocess.run([*share_client, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, f"ShareClient {args[0]} exited {done.returncode}:\n{done.stderr[-6000:]}"
        ((found,),) = lines(done.stdout, "P").values()
        return found

    def kill(proc: subprocess.Popen) -> None:
        proc.kill()
        proc.communicate(timeout=30)

    try:
        p1, first = hold()
        assert first["records"] == values("v", 10, 1)
        assert first["acquisition_lock_timeout_ms"] == LOCK_MS
        # Frozen (SIGSTOP), its connection open and its member in the group (share.session.timeout.ms
        # is 45 s): its records come again once their acquisition locks expire, with their delivery
        # count raised.
        p1.send_signal(signal.SIGSTOP)
        p2, second = hold()
        assert second["records"] == values("v", 10, 2)
        assert second["acquired_at_ms"] - first["acquired_at_ms"] >= LOCK_MS - 250, "held until the locks expired"
        # kill -9: its connection closes, and Kafka releases what the member held there and then
        # (the share session's connection listener), not when the locks expire.
        kill(p2)
        last = run("release-each", b, "P", topic, group, "10")
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill(proc)
    assert last["first_at_ms"] - second["acquired_at_ms"] < LOCK_MS, "released when its connection closed"
    # The third delivery is the last (share.delivery.count.limit 3): Kafka hands such a record out
    # alone (SharePartition's throttling of redeliveries), one record a poll.
    assert last["polls"] == [[f"v-{i}:3"] for i in range(10)]
    # Released at the limit, the records are archived: the last consumer reads five new records and
    # goes on for longer than a lock: none of the ten comes again.
    drained = run("drain", b, "P", topic, group, "5", str(int(time.time() * 1000) + LOCK_MS))
    assert drained["records"] == values("new", 5, 1)


# -- confluent-kafka's ShareConsumer ---------------------------------------------------------------

def share_consumer(bootstrap: str, group: str, topic: str, mode: str = "implicit") -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": mode})
    c.subscribe([topic])
    return c


def poll_until(c: ShareConsumer, done, ack=None, timeout: float = 60.0) -> list[str]:
    """Poll until done(deliveries so far); ack(message) gives the AcknowledgeType in explicit mode.
    Every delivery as "value:deliveryCount"."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not done(seen):
        assert time.monotonic() < deadline, f"after {timeout} s: {seen}"
        for m in c.poll(0.2):
            assert m.error() is None, m.error()
            seen.append(f"{m.value().decode()}:{m.delivery_count()}")
            if ack is not None:
                c.acknowledge(m, ack(m))
    return seen


def saw_sentinel(seen: list[str]) -> bool:
    return any(d.startswith(f"{SENTINEL}:") for d in seen)


def test_confluent_implicit_acknowledgement(share_broker):
    b = share_broker.bootstrap
    topic, group = prefix(), prefix()
    share_topic(b, topic, group)
    produce(b, topic, [f"v-{i}" for i in range(20)])
    c = share_consumer(b, group, topic)
    try:
        assert poll_until(c, lambda seen: len(seen) >= 20) == values("v", 20)
        c.commit_sync()
    finally:
        c.close()
    produce(b, topic, [SENTINEL])
    c = share_consumer(b, group, topic)
    try:
        assert poll_until(c, saw_sentinel) == [f"{SENTINEL}:1"]
        c.commit_sync()
    finally:
        c.close()


def test_confluent_explicit_accept_release_reject(share_broker):
    b = share_broker.bootstrap
    topic, group = prefix(), prefix()
    share_topic(b, topic, group)
    produce(b, topic, [f"v-{i}" for i in range(12)])
    events: list[str] = []

    def rule(m) -> AcknowledgeType:
        i, count = int(m.value().decode()[2:]), m.delivery_count()
        ack = AcknowledgeType.ACCEPT if count > 1 else [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                                         AcknowledgeType.REJECT][i % 3]
        events.append(f"v-{i}:{count}:{ack.name.lower()}")
        return ack

    c = share_consumer(b, group, topic, "explicit")
    try:
        poll_until(c, lambda seen: len(seen) >= 16, rule)  # 12 first deliveries, 4 released again
        c.commit_sync()
        produce(b, topic, [SENTINEL])
        tail = poll_until(c, saw_sentinel, lambda m: AcknowledgeType.ACCEPT)
        c.commit_sync()
    finally:
        c.close()
    expected = []
    for i in range(12):
        action = ["accept", "release", "reject"][i % 3]
        expected.append(f"v-{i}:1:{action}")
        if action == "release":
            expected.append(f"v-{i}:2:accept")
    assert sorted(events) == sorted(expected)
    assert tail == [f"{SENTINEL}:1"]


# -- a broker restart mid-stream (last: it restarts the module's broker) ---------------------------

def test_broker_restart_mid_stream(share_broker):
    b = share_broker.bootstrap
    topic, group = prefix(), prefix()
    share_topic(b, topic, group)
    produce(b, topic, [f"a-{i}" for i in range(100)])
    c = share_consumer(b, group, topic)
    try:
        before = poll_until(c, lambda seen: len(seen) >= 100)
        c.commit_sync()  # every a-i acknowledged (ACCEPT), and the share partition's state written
        produce(b, topic, [f"b-{i}" for i in range(100)])
        in_flight = poll_until(c, lambda seen: len(seen) > 0)  # acquired, not yet acknowledged
        share_broker.restart()
        after = poll_until(c, lambda seen: {f"b-{i}" for i in range(100)} <= {d.rsplit(":", 1)[0] for d in seen},
                           timeout=120)
        c.commit_sync()
        produce(b, topic, [SENTINEL])
        tail = poll_until(c, saw_sentinel)
        c.commit_sync()
    finally:
        c.close()
    assert before == values("a", 100)
    delivered = [d.rsplit(":", 1)[0] for d in in_flight + after]
    assert not [d for d in delivered if d.startswith("a-")], "acknowledged before the restart, delivered again"
    again = {v for v in delivered if delivered.count(v) > 1}
    assert again <= {d.rsplit(":", 1)[0] for d in in_flight}, "only what was in flight comes twice"
    assert sorted(set(delivered)) == sorted(f"b-{i}" for i in range(100)), "nothing lost"
    assert tail == [f"{SENTINEL}:1"]
