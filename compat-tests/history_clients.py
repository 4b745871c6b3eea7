"""The clients that fill a History (history.py) against brokers a test kills: an idempotent
acks=all writer (librdkafka), a reader, reading a partition's whole log back, and restarting a
killed broker the way a service manager would. Shared by the failover and crash-loop tests."""

from __future__ import annotations

import threading
import time

import confluent_kafka
from compat_util import wait_for
from history import History
from server_process import BrokerStartError

T = 30

# Why a restarted broker may exit at once, to be started again (as a service manager would): its
# killed predecessor's ZooKeeper session has not expired yet (the id is taken), or a client
# reconnecting to its port (in the ephemeral range) holds it a moment (a TCP self-connection).
TRANSIENT_START_FAILURES = ("node already exists", "Address already in use")


class Writer(threading.Thread):
    """An idempotent acks=all producer writing value after value, round robin over the partitions.
    `pause()` stops sending and waits until every record sent is answered; `resume()` goes on.
    `prefix` sets its values apart from another writer's to the same partitions."""

    def __init__(self, bootstrap: str, topic: str, history: History, partitions: int, prefix: bytes = b"",
                 padding: int = 0, rate: float | None = None, **config) -> None:
        """`padding`: bytes added to each value (to fill a disk sooner); `rate`: at most so many
        values a second (None: as fast as the producer takes them)."""
        super().__init__(daemon=True)
        self.rate = rate
        self.topic = topic
        self.prefix = prefix
        self.padding = b"." * padding
        self.history = history
        self.partitions = partitions
        self.stopping = threading.Event()
        self.running = threading.Event()
        self.running.set()
        self.idle = threading.Event()
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 120000, "retry.backoff.ms": 50, "retry.backoff.max.ms": 500,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.fast.interval.ms": 100, **config})

    def run(self) -> None:
        sequence = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            if not self.running.is_set():
                self.producer.flush(T * 4)
                self.idle.set()
                self.running.wait(0.1)
                continue
            if self.rate is not None and sequence >= (time.monotonic() - started) * self.rate:
                self.producer.poll(0.01)  # ahead of the rate: serve delivery reports meanwhile
                continue
            partition = sequence % self.partitions
            value = b"%s%d-%d" % (self.prefix, partition, sequence) + self.padding
            self.history.record_sent(partition, value)
            self.producer.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
            sequence += 1
            self.producer.poll(0.004)
        self.producer.flush(T * 4)

    def _delivered(self, err, message) -> None:
        if err is None:
            self.history.record_ack(message.partition(), message.offset(), message.value())
        else:
            self.history.record_failure(message.partition(), message.value(), str(err))

    def pause(self, timeout: float = T * 4) -> None:
        self.idle.clear()
        self.running.clear()
        assert self.idle.wait(timeout), "the producer did not flush"

    def resume(self) -> None:
        self.running.set()

    def finish(self) -> None:
        self.stopping.set()
        self.running.set()
        self.join(T * 5)
        assert not self.is_alive(), "the producer did not flush"


class Reader(threading.Thread):
    """A consumer reading every partition from its start while the brokers fail."""

    def __init__(self, bootstrap: str, topic: str, history: History, partitions: int) -> None:
        super().__init__(daemon=True)
        self.history = history
        self.stopping = threading.Event()
        self.consumer = consumer(bootstrap, topic, partitions)

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                for tp, messages in self.consumer.poll(timeout_ms=200, max_records=1000).items():
                    for message in messages:
                        self.history.record_read(tp.partition, message.offset, message.value)
        finally:
            self.consumer.close()

    def finish(self) -> None:
        self.stopping.set()
        self.join(T)


def start_writing(bootstrap: str, topic: str, partitions: int, timeout: float) -> tuple[History, Writer, Reader]:
    """A Writer and a Reader of `topic` recording into one History, started; returned once every
    partition has more than 20 acknowledged writes (within `timeout` seconds)."""
    history = History()
    writer = Writer(bootstrap, topic, history, partitions)
    reader = Reader(bootstrap, topic, history, partitions)
    writer.start()
    reader.start()
    wait_for(lambda: all(history.acked_count(p) > 20 for p in range(partitions)), timeout, what="the first writes")
    return history, writer, reader


def consumer(bootstrap: str, topic: str, partitions: int):
    """kafka-python without a group: librdkafka's consumer needs a group.id, and its coordinator
    lookup would have the controller create __consumer_offsets on the brokers a test kills."""
    from kafka import KafkaConsumer, TopicPartition

    reader = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                           auto_offset_reset="earliest", fetch_max_wait_ms=100, reconnect_backoff_max_ms=500,
                           request_timeout_ms=T * 1000)
    assigned = [TopicPartition(topic, p) for p in range(partitions)]
    reader.assign(assigned)
    reader.seek_to_beginning(*assigned)
    return reader


def read_whole_log(bootstrap: str, topic: str, partitions: int,
                   timeout: float = T) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition from its start to its high watermark."""
    reader = consumer(bootstrap, topic, partitions)
    try:
        ends = {tp.partition: end for tp, end in reader.end_offsets(list(reader.assignment())).items()}
        log: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(log[p][-1][0] + 1 < ends[p] if log[p] else ends[p] > 0 for p in range(partitions)):
            assert time.monotonic() < deadline, f"reading back: have {[len(v) for v in log.values()]} of {ends}"
            for tp, messages in reader.poll(timeout_ms=500, max_records=5000).items():
                log[tp.partition].extend((m.offset, m.value) for m in messages)
        return log
    finally:
        reader.close()


def assert_nothing_lost(history: History, bootstrap: str, topic: str, partitions: int, note: str) -> None:
    """Every acknowledged record read back exactly once and in order, no write failed."""
    anomalies = history.check(read_whole_log(bootstrap, topic, partitions))
    counts = history.counts()
    assert not anomalies, f"{anomalies.summary()} ({counts}, {note})"
    assert counts["acked"] > 0 and counts["failed"] == 0, (counts, history.failed[:5])


class Restart(threading.Thread):
    """Start a killed broker again, in the background from the moment of the kill: its process
    starts (Python's imports take a while on a busy machine) while the controller waits for the
    old session to expire."""

    def __init__(self, broker) -> None:
        super().__init__(daemon=True)
        self.broker = broker
        # A JVM (Kafka's broker) may take longer to start than Samsa on a busy machine.
        self.timeout = max(T, broker.start_timeout)
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self.broker.start(timeout=self.timeout)
                return
            except BrokerStartError as e:
                if not any(why in str(e)[-600:] for why in TRANSIENT_START_FAILURES) or time.monotonic() > deadline:
                    self.error = e
                    return
                time.sleep(0.2)
            except BaseException as e:  # noqa: BLE001 - reported by done()
                self.error = e
                return

    def done(self) -> None:
        self.join(self.timeout * 2)
        assert not self.is_alive(), "the broker did not start again"
        if self.error is not None:
            raise self.error
