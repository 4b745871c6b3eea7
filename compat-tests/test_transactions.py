"""Transactions with real clients: confluent-kafka, kafka-python and kafkajs transactional producers;
commits and aborts as read_committed and read_uncommitted consumers see them; a zombie producer
fenced; consume-transform-produce with its offsets sent to the transaction while the broker is
killed with kill -9 twenty times, every input record in the output exactly once; and an idempotent
producer whose connection is cut mid-request writes no duplicate."""

from __future__ import annotations

import base64
import collections
import random
import shutil
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from compat_util import NODE_DIR, create_topic, node_script
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

T = 30  # seconds a client may take for one operation


def confluent_producer(bootstrap: str, **extra) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 50, "retry.backoff.max.ms": 500}
    conf.update(extra)
    return Producer(conf)


def read_topic(bootstrap: str, topic: str, isolation: str, settle_s: float = 1.0, partitions: int = 1) -> list:
    """Every record a consumer of this isolation level gets from the start, once nothing more
    arrives for `settle_s`: [(partition, offset, key, value)]."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                         "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = []
        deadline = time.monotonic() + T
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            for m in consumer.consume(500, 0.2):
                if m.error():
                    raise AssertionError(f"consume error: {m.error()}")
                got.append((m.partition(), m.offset(), m.key(), m.value()))
                quiet_since = time.monotonic()
            # The quiet window counts only once every partition has answered a fetch (librdkafka
            # caches its high watermark then): on a loaded machine the first fetch may take longer
            # than `settle_s`.
            if not all(consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1] >= 0
                       for p in range(partitions)):
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= settle_s:
                break
        return got
    finally:
        consumer.close()


def values_of(records: list) -> list[bytes]:
    return [value for _, _, _, value in records]


# --- producers of three clients: commit and abort as both kinds of reader see them ------------------

def test_confluent_transactions_commit_and_abort(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    p = confluent_producer(broker.bootstrap, **{"transactional.id": f"{topic_name}-tx"})
    p.init_transactions(T)
    for round_, commit in enumerate([True, False, True]):
        p.begin_transaction()
        for i in range(4):
            p.produce(topic_name, value=f"{'c' if commit else 'a'}{round_}-{i}".encode(), partition=i % 2)
        p.flush(T)  # sent before the abort, so that read_uncommitted readers see what was aborted
        (p.commit_transaction if commit else p.abort_transaction)(T)
    committed = values_of(read_topic(broker.bootstrap, topic_name, "read_committed", partitions=2))
    everything = values_of(read_topic(broker.bootstrap, topic_name, "read_uncommitted", partitions=2))
    assert sorted(committed) == sorted(f"c{r}-{i}".encode() for r in (0, 2) for i in range(4))
    assert sorted(everything) == sorted(committed + [f"a1-{i}".encode() for i in range(4)])


def test_kafka_python_transactions_commit_and_abort(broker, topic_name):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    create_topic(broker.bootstrap, topic_name)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic_name}-tx",
                      request_timeout_ms=T * 1000, max_block_ms=T * 1000)
    try:
        p.init_transactions()
        for round_, commit in enumerate([True, False, True]):
            p.begin_transaction()
            for i in range(3):
                p.send(topic_name, value=f"{'c' if commit else 'a'}{round_}-{i}".encode())
            p.flush()
            (p.commit_transaction if commit else p.abort_transaction)()
    finally:
        p.close()

    def kafka_python_read(isolation: str) -> list[bytes]:
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                          isolation_level=isolation, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                          consumer_timeout_ms=2000)
        try:
            c.assign([KTopicPartition(topic_name, 0)])
            return [r.value for r in c]
        finally:
            c.close()
    committed = [f"c{r}-{i}".encode() for r in (0, 2) for i in range(3)]
    assert kafka_python_read("read_committed") == committed
    assert kafka_python_read("read_uncommitted") == committed[:3] + [f"a1-{i}".encode() for i in range(3)] + committed[3:]
    assert values_of(read_topic(broker.bootstrap, topic_name, "read_committed")) == committed


@pytest.mark.skipif(shutil.which("node") is None or not (Path(NODE_DIR) / "node_modules" / "kafkajs").is_dir(),
                    reason="node or kafkajs missing (compat-tests/install.sh)")
def test_kafkajs_transactions_commit_and_abort(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)

    def messages(prefix: str):
        return [{"key": None, "value": base64.b64encode(f"{prefix}-{i}".encode()).decode()} for i in range(3)]
    payload = {"brokers": [broker.bootstrap], "globalTimeoutMs": 85_000, "ops": [{
        "op": "transactions", "transactionalId": f"{topic_name}-tx", "topic": topic_name,
        "transactions": [{"messages": messages("c0"), "commit": True}, {"messages": messages("a1"), "commit": False},
                         {"messages": messages("c2"), "commit": True}]}]}
    result = node_script("kafkajs_ops.js", payload, 90)["results"][0]
    assert result.get("ok") == ["committed", "aborted", "committed"], result
    committed = [f"c{r}-{i}".encode() for r in (0, 2) for i in range(3)]
    assert values_of(read_topic(broker.bootstrap, topic_name, "read_committed")) == committed
    assert sorted(values_of(read_topic(broker.bootstrap, topic_name, "read_uncommitted"))) == sorted(
        committed + [f"a1-{i}".encode() for i in range(3)])


def test_a_zombie_producer_is_fenced(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    zombie = confluent_producer(broker.bootstrap, **{"transactional.id": f"{topic_name}-tx"})
    zombie.init_transactions(T)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie")
    zombie.flush(T)
    successor = confluent_producer(broker.bootstrap, **{"transactional.id": f"{topic_name}-tx"})
    successor.init_transactions(T)  # aborts the zombie's transaction and takes a new epoch
    successor.begin_transaction()
    successor.produce(topic_name, value=b"successor")
    successor.commit_transaction(T)
    with pytest.raises(KafkaException) as fenced:
        zombie.produce(topic_name, value=b"late")
        zombie.commit_transaction(T)
    error = fenced.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    assert values_of(read_topic(broker.bootstrap, topic_name, "read_committed")) == [b"successor"]


# --- consume-transform-produce, exactly once through twenty kill -9 ---------------------------------

# librdkafka 2.10+ re-bootstraps once it has lost every broker (KIP-899), decommissioning the broker
# handle a pending TxnOffsetCommit waits on, which then never leaves send_offsets_to_transaction; a
# single broker killed over and over hits that every few kills. Without re-bootstrap the client
# just reconnects to it.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}
# _TIMED_OUT: on a loaded machine a restarted Kafka may take longer than the request's timeout to
# load its coordinator partitions; librdkafka then gives up on the lookup itself.
COORDINATOR_NOT_READY = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                         KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT}


class ProcessorClock:
    """The time the processor has gone without progress, not counting the time the broker was down
    (a restart in progress included): on a loaded 2-core machine Kafka's five restarts alone took
    from 50 s to over 4 minutes, and the coordinator lookups after each restart as long again; a
    processor that is slow but keeps committing has not failed, one that stops has."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._since = time.monotonic()
        self._downtime = 0.0
        self._down_since: float | None = None

    def broker_down(self) -> None:
        with self._lock:
            self._down_since = time.monotonic()

    def broker_up(self) -> None:
        with self._lock:
            self._downtime += time.monotonic() - self._down_since
            self._down_since = None

    def progressed(self) -> None:
        with self._lock:
            self._since = time.monotonic()
            self._downtime = 0.0
            if self._down_since is not None:
                self._down_since = self._since

    def taken(self) -> float:
        with self._lock:
            now = time.monotonic()
            down = 0 if self._down_since is None else now - self._down_since
            return now - self._since - self._downtime - down

    def out_of_time(self) -> bool:
        return self.taken() > self.limit


class Processor:
    """confluent-kafka consume-transform-produce: each transaction carries a few output records
    and the input offsets they came from (send_offsets_to_transaction). Whatever fails, the
    transaction is aborted (or the producer replaced, when the error is fatal) and the input
    read again from the offsets last committed."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, clock: ProcessorClock) -> None:
        self.bootstrap, self.source, self.sink, self.group = bootstrap, source, sink, group
        self.clock = clock
        self.partition = TopicPartition(source, 0)
        self.events: collections.deque[list] = collections.deque(maxlen=40)  # [at, event, count]: the failure shows them
        self._events_lock = threading.Lock()
        self._started = time.monotonic()
        self._renewed_at = 0.0  # the clock's time without progress when the consumer was last replaced
        self.consumer = self._new_consumer()
        self.rewind()
        self.producer = self._new_producer()
        self.recoveries = 0

    def note(self, event: str) -> None:
        """Records an event (from either thread); a run of the same event is one entry, counted."""
        now = time.monotonic() - self._started
        with self._events_lock:
            if self.events and self.events[-1][1] == event:
                self.events[-1][0] = now
                self.events[-1][2] += 1
            else:
                self.events.append([now, event, 1])

    def history(self) -> str:
        with self._events_lock:
            return "\n".join(f"{at:7.1f} s {event}" + (f" (x{count})" if count > 1 else "")
                             for at, event, count in self.events)

    def _new_consumer(self) -> Consumer:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                             "fetch.wait.max.ms": 50, "reconnect.backoff.ms": 50,
                             "reconnect.backoff.max.ms": 500, "enable.partition.eof": False, **NO_REBOOTSTRAP})
        return consumer

    def _new_producer(self) -> Producer:
        producer = confluent_producer(self.bootstrap, **{"transactional.id": f"{self.group}-tx",
                                                         "transaction.timeout.ms": 10_000, **NO_REBOOTSTRAP})
        self.note("init_transactions")
        producer.init_transactions(T)
        self.note("producer ready")
        return producer

    def rewind(self) -> None:
        """Back to the offset last committed. Right after a restart Kafka's coordinator answers
        NOT_COORDINATOR while it loads __consumer_offsets: retriable, but librdkafka raises it and
        keeps the answer, so a new consumer asks again (as test_groups_basic's `committed` does).
        A new consumer also gets out of the state in which librdkafka 2.16's consumer stayed after
        a restart of Kafka, querying for a coordinator with "no broker available" while the broker
        was up: each lookup is given 5 s, and another consumer asks after a timeout. The kills go
        on meanwhile, and a Kafka killed again soon after its restart reloads its coordinators each
        time: in CI 60 s, then 3 minutes of lookups, ran out with the broker's restarts in them, so
        the lookups go on within the processor's own time, the broker's downtime not counted."""
        while True:
            try:
                committed = self.consumer.committed([self.partition], 5)[0].offset
                break
            except KafkaException as e:
                self.note(f"committed: {e.args[0]}")
                if e.args[0].code() not in COORDINATOR_NOT_READY or self.clock.out_of_time():
                    raise
            self.consumer.close()
            time.sleep(0.5)
            self.consumer = self._new_consumer()
        self.note(f"rewound to {committed}")
        # The position is always given: the consumer never fetches from the offset librdkafka looks
        # up itself for a partition assigned without one.
        self.consumer.assign([TopicPartition(self.source, 0, committed if committed >= 0 else 0)])

    def step(self, max_records: int = 4) -> int:
        """One transaction of up to max_records; the number of records it committed."""
        messages = []
        for m in self.consumer.consume(max_records, 0.2):
            if m.error():
                self.note(f"consume: {m.error()}")
            else:
                messages.append(m)
        if not messages:
            self.note("consumed nothing")
            self.renew_consumer_if_stalled()
            return 0
        self.note(f"consumed {messages[0].offset()}..{messages[-1].offset()}")
        try:
            self.producer.begin_transaction()
            for m in messages:
                self.producer.produce(self.sink, key=m.key(), value=b"%d:%s" % (m.offset(), m.value()))
            position = [TopicPartition(self.source, 0, messages[-1].offset() + 1)]
            self.producer.send_offsets_to_transaction(position, self.consumer.consumer_group_metadata(), T)
            self.producer.commit_transaction(T)
            self.note("committed")
            self.clock.progressed()
            self._renewed_at = 0.0
            return len(messages)
        except KafkaException as e:
            self.note(f"transaction failed: {e.args[0]}")
            self.recover(e.args[0])
            return 0

    def renew_consumer_if_stalled(self, after_s: float = 10.0) -> None:
        """A consumer that has returned nothing for after_s of the processor's time is replaced.
        In CI the processor once went 120 s of its own time without committing a transaction (the
        group had no committed offset), the kills most likely over: a consumer that returns
        nothing fits, as do transactions that fail each time; the events the failure now shows
        tell them apart."""
        if self.clock.taken() - self._renewed_at < after_s:
            return
        self.note(f"nothing committed for {after_s:.0f} s, no record now: a new consumer")
        self._renewed_at = self.clock.taken()
        self.consumer.close()
        self.consumer = self._new_consumer()
        self.rewind()

    def recover(self, error: KafkaError) -> None:
        self.recoveries += 1
        try:
            if error.fatal():
                raise KafkaException(error)
            self.producer.abort_transaction(T)
        except KafkaException as e:
            self.note(f"abort failed: {e.args[0]}")
            self.producer = self._new_producer()  # fences whatever the old one left open
        self.rewind()

    def committed_offset(self) -> int:
        """The group's committed offset, or -1 (after a rewind, with a new consumer) when the
        lookup failed: the consumer may be the stuck one `rewind` describes."""
        try:
            return self.consumer.committed([self.partition], 5)[0].offset
        except KafkaException as e:
            if e.args[0].code() not in COORDINATOR_NOT_READY:
                raise
            self.rewind()
            return -1

    def close(self) -> None:
        self.consumer.close()


# A restarted Kafka registers only once its previous incarnation's session has expired (otherwise
# DUPLICATE_BROKER_REGISTRATION, retried every 2 s): with the default 9 s session that wait was most
# of each 13 s restart.
KAFKA_QUICK_REREGISTRATION = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}


# The processor's time without progress (ProcessorClock) is bounded; the broker's restarts are not:
# Kafka's five took over 4 minutes on a loaded 2-core machine, and CI's 240 s watchdog once killed
# Kafka midway.
@pytest.mark.watchdog_s(600)
@pytest.mark.slow
def test_consume_transform_produce_is_exactly_once_through_twenty_kill_9(broker_factory, broker_kind, topic_name):
    broker = broker_factory(overrides={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
                                       **(KAFKA_QUICK_REREGISTRATION if broker_kind == "kafka" else {})})
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, sink)
    feeder = confluent_producer(broker.bootstrap, **{"enable.idempotence": True})
    total = 600
    for i in range(total):
        feeder.produce(source, key=b"k%d" % (i % 7), value=b"v%d" % i)
    assert feeder.flush(T) == 0

    kills_done = threading.Event()
    failures: list[BaseException] = []
    kills = 20 if broker.kind == "samsa" else 5  # Kafka restarts in 5-15 s: 20 would take minutes
    clock = ProcessorClock(60 if broker.kind == "samsa" else 120)

    def kill_broker_twenty_times():
        rnd = random.Random(5)
        try:
            for _ in range(kills):
                time.sleep(rnd.uniform(0.3, 1.5))
                clock.broker_down()
                processor.note("broker killed")
                try:
                    broker.kill()
                    broker.start()
                finally:
                    clock.broker_up()
                    processor.note("broker restarted")
        except BaseException as e:  # reported by the main thread
            failures.append(e)
        finally:
            kills_done.set()

    processor = Processor(broker.bootstrap, source, sink, f"{topic_name}-ctp", clock)
    killer = threading.Thread(target=kill_broker_twenty_times, daemon=True)
    killer.start()
    try:
        # Keep transactions going while the broker dies, paced so that the kills land in them.
        while not kills_done.is_set() or processor.committed_offset() < total:
            assert not failures, failures
            assert not clock.out_of_time(), (f"no progress in {clock.limit} s of the processor's time: "
                                             f"{processor.committed_offset()} of {total} processed; "
                                             "its last events:\n" + processor.history())
            if processor.step():
                if not kills_done.is_set():
                    time.sleep(0.2)
        killer.join(T)
        assert not failures, failures
    finally:
        processor.close()

    output = read_topic(broker.bootstrap, sink, "read_committed", settle_s=2.0)
    sources = [int(value.split(b":", 1)[0]) for value in values_of(output)]
    assert len(sources) == total and sorted(sources) == list(range(total)), (
        f"{len(sources)} output records for {total} inputs; duplicated: "
        f"{sorted({s for s in sources if sources.count(s) > 1})[:10]}, missing: "
        f"{sorted(set(range(total)) - set(sources))[:10]}")
    assert all(value == b"%d:v%d" % (s, s) for s, value in zip(sources, values_of(output)))
    assert broker.starts == kills + 1


# --- an idempotent producer's retry after its connection is cut mid-request ---------------------------

class CuttingProxy:
    """A TCP proxy in front of the broker (which advertises the proxy's port): it relays both
    ways, and when armed, passes the next Produce request to the broker and cuts the connection
    without relaying anything more, so the client retries a batch the broker has already written."""

    def __init__(self) -> None:
        self.target_port = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                if self.listener.fileno() < 0:
                    return
                continue
            muted = threading.Event()  # set once the connection is being cut: no response gets through
            threading.Thread(target=self._requests, args=(client, upstream, muted), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, muted), daemon=True).start()

    @staticmethod
    def _read_exactly(sock: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def _requests(self, client: socket.socket, upstream: socket.socket, muted: threading.Event) -> None:
        try:
            while True:
                size = self._read_exactly(client, 4)
                frame = self._read_exactly(client, struct.unpack(">i", size)[0])
                cut = struct.unpack_from(">h", frame)[0] == 0 and self.armed.is_set()  # a Produce
                if cut:
                    self.armed.clear()
                    muted.set()
                upstream.sendall(size + frame)
                if cut:
                    time.sleep(0.5)  # the broker appends; its response is dropped
                    self.cuts += 1
                    raise ConnectionError
        except OSError:  # ConnectionError included
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    @staticmethod
    def _responses(upstream: socket.socket, client: socket.socket, muted: threading.Event) -> None:
        try:
            while chunk := upstream.recv(1 << 16):
                if muted.is_set():
                    return
                client.sendall(chunk)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_an_idempotent_producer_cut_off_mid_request_writes_no_duplicate(broker_factory, topic_name, client):
    proxy = CuttingProxy()
    broker = broker_factory(overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.target_port = broker.port
    try:
        create_topic(broker.bootstrap, topic_name)
        batches = 6
        if client == "confluent-kafka":
            p = confluent_producer(f"127.0.0.1:{proxy.port}", **{"enable.idempotence": True, "linger.ms": 0})
            send = lambda value: p.produce(topic_name, value=value)  # noqa: E731
            flush = lambda: p.flush(T)  # noqa: E731
        else:
            from kafka import KafkaProducer
            p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", enable_idempotence=True, acks="all",
                              linger_ms=0, request_timeout_ms=T * 1000, max_block_ms=T * 1000,
                              reconnect_backoff_ms=50, retry_backoff_ms=50)
            send = lambda value: p.send(topic_name, value=value)  # noqa: E731
            flush = p.flush
        for i in range(batches):
            if i % 2:
                proxy.armed.set()
            send(b"record-%d" % i)
            flush()
        if client == "kafka-python":
            p.close()
        assert proxy.cuts == batches // 2
        assert values_of(read_topic(broker.bootstrap, topic_name, "read_uncommitted")) == [
            b"record-%d" % i for i in range(batches)]
    finally:
        proxy.close()
