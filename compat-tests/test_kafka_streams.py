"""A Kafka Streams 4.4 application under exactly_once_v2, on Samsa and on Kafka, on the classic group
protocol and on the streams rebalance protocol (KIP-1071, group.protocol=streams):
streams-app/StreamsApp.java counts the values of its input (a repartition topic and a state store's
changelog: created by the application's admin client on the classic protocol, by the broker's group
coordinator on the streams one) with two instances; one is killed (kill -9) while it runs, more
input comes, it is started again; the committed output (read_committed) must end with the exact
count of every value. On the streams protocol, a static member (group.instance.id) closed and
started again takes its tasks back without a rebalance.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import class_sharing
from compat_util import wait_for
from kafka_oracle import CACHE, JVM_OPTS, OracleUnavailable, class_path, java
from server_process import HOST
from wire_client import WireClient

from samsa.wire.protocol import ApiKey, request_class

APP_DIR = Path(__file__).resolve().parent / "streams-app"
SOURCES = sorted(APP_DIR.glob("*.java"))
LOG4J2 = ("status = warn\nappender.err.type = Console\nappender.err.name = err\nappender.err.target = SYSTEM_ERR\n"
          "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %d %p %m (%c)%n\n"
          "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = err\n")
VALUES = [f"v{i}" for i in range(10)]
TIMEOUT = 180


@pytest.fixture(scope="session")
def streams_app() -> list[str]:
    """The command that runs StreamsApp, compiled into $SAMSA_CACHE/java-build/streams-<hash>."""
    try:
        jars = f"{class_path('kafka4')}:{class_path('streams')}"
        java_bin = java()
    except OracleUnavailable as e:
        pytest.skip(str(e))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in SOURCES)).hexdigest()[:16]
    build = CACHE / "java-build" / f"streams-{digest}"
    if not (build / "StreamsApp.class").is_file():
        tmp = build.with_name(f"{build.name}.tmp-{uuid.uuid4().hex[:6]}")
        tmp.mkdir(parents=True)
        javac = os.environ.get("JAVAC") or str(Path(java_bin).resolve().with_name("javac"))
        done = subprocess.run([javac, "-d", str(tmp), "-cp", jars, *map(str, SOURCES)],
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert done.returncode == 0, f"javac failed:\n{done.stderr}"
        (tmp / "log4j2.properties").write_text(LOG4J2)
        try:
            tmp.rename(build)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return [java_bin, *JVM_OPTS, *class_sharing.options("kafka4"),
            f"-Dlog4j2.configurationFile={build / 'log4j2.properties'}", "-cp", f"{jars}:{build}", "StreamsApp"]


class App:
    """One instance of StreamsApp; its state changes read from its stdout as they come."""

    def __init__(self, command: list[str], args: list[str], log: Path) -> None:
        self.log = log.open("ab")
        self.proc = subprocess.Popen([*command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        self.states: list[str] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("STATE "):
                with self.changed:
                    self.states.append(line.split()[-1])
                    self.changed.notify_all()

    def wait_running(self, timeout: float = TIMEOUT) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: "RUNNING" in self.states or self.proc.poll() is not None, timeout), \
                f"not RUNNING: {self.states}"
        assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.states}"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=str(i), value=VALUES[i % len(VALUES)])
    assert producer.flush(60) == 0


def final_counts(bootstrap: str, topic: str, expected: dict[str, int] | None,
                 timeout: float = TIMEOUT) -> dict[str, int]:
    """The last committed count of each value, read until it is `expected` (None: until a first
    count is committed) or the time is out."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    counts: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while (counts != expected if expected is not None else not counts) and time.monotonic() < deadline:
            for m in consumer.consume(500, 1.0):
                if m.error() is None:
                    counts[m.key().decode()] = int(m.value().decode())
    finally:
        consumer.close()
    return counts


@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_stateful_exactly_once_app_survives_a_killed_instance(broker, streams_app, tmp_path, protocol):
    app_id = f"streams-{protocol}-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app_id}-in", f"{app_id}-out"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(source, 4, 1), NewTopic(sink, 2, 1)]).values():
        future.result(60)
    produce(broker.bootstrap, source, 1000)
    apps: list[App] = []

    def start(name: str) -> App:
        app = App(streams_app, [broker.bootstrap, app_id, str(tmp_path / f"state-{name}"), source, sink, protocol],
                  tmp_path / f"{name}.log")
        apps.append(app)
        return app

    try:
        first, second = start("a"), start("b")
        first.wait_running()
        second.wait_running()
        assert final_counts(broker.bootstrap, sink, None), "no count committed"
        first.kill()  # while it processes: its transaction in flight is aborted, its tasks move
        produce(broker.bootstrap, source, 1000)
        start("a").wait_running()
        expected = {v: 200 for v in VALUES}
        assert final_counts(broker.bootstrap, sink, expected) == expected
    finally:
        for app in apps:
            app.close()


StreamsDescribe = request_class(ApiKey.STREAMS_GROUP_DESCRIBE)


def described(broker, group: str):
    answer = WireClient(HOST, broker.port).call(StreamsDescribe(group_ids=[group]), 0)
    return answer.groups[0]


def tasks_of(member) -> dict[str, list[int]]:
    return {t.subtopology_id: t.partitions for t in member.assignment.active_tasks}


def test_static_member_closed_and_restarted_keeps_its_tasks(broker, streams_app, tmp_path):
    """KafkaStreams.close() of a static member leaves with epoch -2: the group keeps its tasks for
    it; started again (a new member id, the same instance id and state dir) it gets them back at the
    same group epoch, and the counts stay exact."""
    app_id = f"streams-static-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app_id}-in", f"{app_id}-out"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(source, 4, 1), NewTopic(sink, 2, 1)]).values():
        future.result(60)
    produce(broker.bootstrap, source, 1000)
    apps: dict[str, App] = {}

    def start(name: str) -> App:
        app = App(streams_app, [broker.bootstrap, app_id, str(tmp_path / f"state-{name}"), source, sink,
                                "streams", f"instance-{name}"], tmp_path / f"{name}.log")
        apps[name] = app
        return app

    def member(group, name: str):
        return next((m for m in group.members if (m.instance_id or "").startswith(f"instance-{name}")), None)

    def stable_with_tasks():
        group = described(broker, app_id)
        return group.group_state == "Stable" and len(group.members) == 2 and all(tasks_of(m) for m in group.members)

    try:
        start("a").wait_running()
        start("b").wait_running()
        assert final_counts(broker.bootstrap, sink, None), "no count committed"
        wait_for(stable_with_tasks, timeout=TIMEOUT, interval=0.5, what="both instances in a stable group with tasks")
        before = described(broker, app_id)
        tasks_b, old_id = tasks_of(member(before, "b")), member(before, "b").member_id
        apps["b"].close()
        wait_for(lambda: member(described(broker, app_id), "b").member_epoch == -2, timeout=60,
                 interval=0.5, what="instance b to leave with epoch -2")
        start("b").wait_running()
        wait_for(lambda: (m := member(described(broker, app_id), "b")) is not None and m.member_id != old_id
                 and m.member_epoch == before.group_epoch, timeout=TIMEOUT, interval=0.5,
                 what="instance b back at the group's epoch")
        after = described(broker, app_id)
        assert tasks_of(member(after, "b")) == tasks_b, after
        assert after.group_epoch == before.group_epoch, after
        produce(broker.bootstrap, source, 1000)
        expected = {v: 200 for v in VALUES}
        assert final_counts(broker.bootstrap, sink, expected) == expected
    finally:
        for app in apps.values():
            app.close()
