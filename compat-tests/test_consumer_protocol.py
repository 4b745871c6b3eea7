"""KIP-848 with librdkafka: confluent-kafka consumers with group.protocol=consumer.

Three members share a 12-partition topic; members leave and join. While the group is stable every
message is consumed exactly once; at no moment do two members own the same partition (each member
logs when its rebalance callbacks give and take partitions, on one clock); committed offsets and the
group survive a broker restart; a member killed with SIGKILL loses its partitions when its session
times out. The broker hands out a 500 ms heartbeat interval so that rebalances
take seconds, not the default 5 s heartbeats, and a 6 s session timeout. The module's tests share
one broker.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest
from compat_util import confluent_admin, create_topic, wait_for
from group_processes import committed_offsets

PARTITIONS = 12
TIMEOUT = 60.0
SESSION_MS = 6000
GROUP_SETTINGS = {
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.session.timeout.ms": SESSION_MS,
    "group.consumer.session.timeout.ms": SESSION_MS,
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker(module_broker_factory):
    """One broker for the module's tests (each has a topic and a group of its own)."""
    return module_broker_factory(overrides=GROUP_SETTINGS)


class Member(threading.Thread):
    """A consumer polling in its own thread; what it owned and consumed goes to a shared journal."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, journal: Journal) -> None:
        super().__init__(name=name, daemon=True)
        from confluent_kafka import Consumer

        self.journal = journal
        self.topic = topic
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100,
            "client.id": name,
        })
        self.stopping = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        c = self.consumer
        c.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        try:
            while not self.stopping.is_set():
                m = c.poll(0.1)
                if m is None:
                    continue
                if m.error():
                    self.errors.append(str(m.error()))
                    continue
                self.journal.consumed(self.name, m.partition(), m.offset(), m.value().decode())
                c.commit(message=m, asynchronous=False)
        except Exception as e:  # noqa: BLE001 - shown by the test
            self.errors.append(repr(e))
        finally:
            c.close()  # leaves the group (member epoch -1); the revoke callback runs first

    def _assigned(self, consumer, partitions) -> None:
        self.journal.owns(self.name, {p.partition for p in partitions})

    def _revoked(self, consumer, partitions) -> None:
        self.journal.releases(self.name, {p.partition for p in partitions})

    def leave(self) -> None:
        self.stopping.set()
        self.join(TIMEOUT)
        assert not self.is_alive(), f"{self.name} did not close"


class Journal:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.overlaps: list[str] = []
        self.messages: list[tuple[str, int, int, str]] = []

    def owns(self, member: str, partitions: set[int]) -> None:
        with self.lock:
            for p in partitions:
                if p in self.owner and self.owner[p] != member:
                    self.overlaps.append(f"{member} got {p} while {self.owner[p]} still owned it")
                self.owner[p] = member

    def releases(self, member: str, partitions: set[int]) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p) == member:
                    del self.owner[p]

    def consumed(self, member: str, partition: int, offset: int, value: str) -> None:
        with self.lock:
            self.messages.append((member, partition, offset, value))

    def owned_by(self) -> dict[str, set[int]]:
        with self.lock:
            result: dict[str, set[int]] = {}
            for p, member in self.owner.items():
                result.setdefault(member, set()).add(p)
            return result


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % PARTITIONS)
    assert p.flush(15) == 0


def wait_stable(bootstrap: str, group: str, journal: Journal, members: list[Member]) -> None:
    """The group is Stable with exactly these members, and their callbacks cover every partition."""
    from confluent_kafka import ConsumerGroupState

    admin = confluent_admin(bootstrap)
    names = {m.name for m in members}

    def stable():
        described = admin.describe_consumer_groups([group], request_timeout=5)[group].result(5)
        if described.state != ConsumerGroupState.STABLE or {m.client_id for m in described.members} != names:
            return False
        owned = journal.owned_by()
        return set(owned) == names and sorted(p for ps in owned.values() for p in ps) == list(range(PARTITIONS))

    wait_for(stable, TIMEOUT, interval=0.2, what=f"group {group} stable with {sorted(names)}")


def consume_batch(bootstrap: str, topic: str, journal: Journal, batch: str, count: int) -> None:
    """Produce `count` messages while the group is stable: each is consumed exactly once."""
    values = [f"{batch}-{i}" for i in range(count)]
    before = len(journal.messages)
    produce(bootstrap, topic, values)
    wait_for(lambda: len(journal.messages) - before >= count, TIMEOUT, what=f"batch {batch} consumed")
    time.sleep(0.5)  # a duplicate would arrive now
    got = [v for _, _, _, v in journal.messages[before:]]
    assert sorted(got) == sorted(values), "not every message exactly once"


def test_members_join_and_leave_without_sharing_partitions_and_offsets_survive_a_restart(broker, topic_name):
    bootstrap, group = broker.bootstrap, f"{topic_name}-group"
    create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    journal = Journal()
    members = [Member(f"m{i}", bootstrap, topic_name, group, journal) for i in range(3)]
    try:
        for m in members:
            m.start()
        wait_stable(bootstrap, group, journal, members)
        assert sorted(len(ps) for ps in journal.owned_by().values()) == [4, 4, 4]
        consume_batch(bootstrap, topic_name, journal, "three", 120)

        members.pop(0).leave()
        wait_stable(bootstrap, group, journal, members)
        assert sorted(len(ps) for ps in journal.owned_by().values()) == [6, 6]
        consume_batch(bootstrap, topic_name, journal, "two", 120)

        newcomer = Member("m3", bootstrap, topic_name, group, journal)
        members.append(newcomer)
        newcomer.start()
        wait_stable(bootstrap, group, journal, members)
        assert sorted(len(ps) for ps in journal.owned_by().values()) == [4, 4, 4]
        consume_batch(bootstrap, topic_name, journal, "rejoined", 120)
    finally:
        for m in members:
            m.leave()
    assert not journal.overlaps, journal.overlaps
    assert not any(m.errors for m in members), [m.errors for m in members]

    # Every message was committed as it was consumed: after a restart the group starts after them.
    broker.restart()
    # Right after a restart Kafka answers OffsetFetch with NOT_COORDINATOR while it reads
    # __consumer_offsets (Samsa reads it before it says "started"): ask again until it answers.
    # Asked by a consumer: librdkafka 2.16's AdminClient (list_consumer_group_offsets) crashes on
    # that answer (rd_kafka_handle_OffsetFetch hands it to a consumer group it does not have).
    committed = wait_for(lambda: committed_offsets(bootstrap, topic_name, group, PARTITIONS), TIMEOUT,
                         interval=0.5, what="the committed offsets after the restart")
    assert sum(committed.values()) == 360
    journal = Journal()
    last = Member("after-restart", bootstrap, topic_name, group, journal)
    last.start()
    try:
        wait_stable(bootstrap, group, journal, [last])
        consume_batch(bootstrap, topic_name, journal, "after", 24)
    finally:
        last.leave()
    assert not last.errors, last.errors


# A member in a process of its own, to be killed: it consumes (without committing) until SIGKILL.
CRASHING_MEMBER = """
import sys
from confluent_kafka import Consumer
bootstrap, topic, group = sys.argv[1:]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": "doomed"})
c.subscribe([topic])
while True:
    c.poll(0.1)
"""


def test_a_killed_member_is_fenced_by_its_session_timeout(broker, topic_name):
    bootstrap, group = broker.bootstrap, f"{topic_name}-group"
    create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    journal = Journal()
    survivors = [Member(f"m{i}", bootstrap, topic_name, group, journal) for i in range(2)]
    doomed = subprocess.Popen([sys.executable, "-c", CRASHING_MEMBER, bootstrap, topic_name, group])
    try:
        for m in survivors:
            m.start()
        admin = confluent_admin(bootstrap)

        def three_stable():
            described = admin.describe_consumer_groups([group], request_timeout=5)[group].result(5)
            return (described.state.name == "STABLE" and len(described.members) == 3
                    and len(journal.owned_by()) == 2)

        wait_for(three_stable, TIMEOUT, interval=0.2, what="three members, stable")
        orphaned = set(range(PARTITIONS)) - {p for ps in journal.owned_by().values() for p in ps}
        assert len(orphaned) == 4
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        killed_at = time.monotonic()
        wait_stable(bootstrap, group, journal, survivors)
        # Its partitions stay with nobody until its session runs out, then the others take them.
        assert time.monotonic() - killed_at > SESSION_MS / 1000 - 1.5
        consume_batch(bootstrap, topic_name, journal, "after-crash", 60)
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait(10)
        for m in survivors:
            m.leave()
    assert not journal.overlaps, journal.overlaps


def test_describe_and_list_a_consumer_group(broker, topic_name):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    bootstrap, group = broker.bootstrap, f"{topic_name}-group"
    create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    journal = Journal()
    member = Member("solo", bootstrap, topic_name, group, journal)
    member.start()
    try:
        wait_stable(bootstrap, group, journal, [member])
        admin = confluent_admin(bootstrap)
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert (described.type, described.partition_assignor) == (ConsumerGroupType.CONSUMER, "uniform")
        (m,) = described.members
        assert (m.client_id, m.host) == ("solo", "/127.0.0.1")
        assert sorted(tp.partition for tp in m.assignment.topic_partitions) == list(range(PARTITIONS))
        listed = admin.list_consumer_groups(request_timeout=10).result(15)
        ours = [g for g in listed.valid if g.group_id == group]
        assert [(g.type, g.state) for g in ours] == [(ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)]
    finally:
        member.leave()


def test_regex_subscription_picks_up_a_topic_created_later(broker, topic_name):
    """librdkafka sends a regex subscription to the broker (SubscribedTopicRegex, v1), which
    resolves it and rebalances when a matching topic appears."""
    bootstrap, group = broker.bootstrap, f"{topic_name}-group"
    first, later = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(bootstrap, first, partitions=2)
    from confluent_kafka import Consumer, Producer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    c.subscribe([f"^{topic_name}-.*"])
    try:
        p = Producer({"bootstrap.servers": bootstrap})
        p.produce(first, b"one")
        assert p.flush(10) == 0
        seen: list[tuple[str, bytes]] = []

        def got(topic):
            for m in c.consume(10, 0.2):
                assert not m.error(), m.error()
                seen.append((m.topic(), m.value()))
            return any(t == topic for t, _ in seen)

        wait_for(lambda: got(first), TIMEOUT, what=f"a message of {first}")
        create_topic(bootstrap, later, partitions=3)
        p.produce(later, b"two", partition=2)
        assert p.flush(10) == 0
        wait_for(lambda: got(later), TIMEOUT, what=f"a message of {later}")
        assert sorted(tp.topic for tp in c.assignment()) == [first] * 2 + [later] * 3
    finally:
        c.close()
