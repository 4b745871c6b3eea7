"""A transactional consume-transform-produce (confluent-kafka) that goes on through broker faults,
and reading its output back: shared by test_cluster_coordinators.py (through the kill of its
coordinators) and test_mixed_load.py (through faults at random moments).

Each step consumes a batch (read_committed), begins a transaction, produces each record's
transform, sends the consumer's positions to the transaction and commits it, following
librdkafka's rules: a retriable error, call again; one requiring an abort, abort and start again
from the offsets last committed with a transaction; a fatal one, a new producer (which fences the
old one).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

T = 30


class Transform:
    """`partition_of(message)`: the sink partition of a record's transform (default: the source's)."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, transactional_id: str,
                 transaction_timeout_ms: int = 10000, call_timeout: float = 60,
                 partition_of: Callable | None = None) -> None:
        from confluent_kafka import Consumer

        self.bootstrap, self.sink, self.transactional_id = bootstrap, sink, transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.call_timeout = call_timeout
        self.partition_of = partition_of or (lambda m: m.partition())
        self.committed = 0  # transactions
        self.aborted = 0
        self.producers = 0  # started: more than one after a fatal error
        self.stuck = 0  # calls that never returned (unless_stuck)
        self.abandoned: list = []  # producers stuck in a call past its timeout, never to be destroyed
        self.processed: dict[int, int] = {}  # source partition -> next offset, as committed with a transaction
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        self.producer = self._new_producer()
        self.consumer.subscribe([source])

    def _new_producer(self):
        from confluent_kafka import Producer

        # librdkafka times messages out after at most transaction.timeout.ms, which may be shorter
        # than a failover: the abort path is taken too.
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
                             "transaction.timeout.ms": self.transaction_timeout_ms, "acks": "all"})
        producer.init_transactions(T)
        self.producers += 1
        return producer

    def step(self, max_records: int = 10, timeout: float = 1, before_commit: Callable[[], None] | None = None
             ) -> list | None:
        """One batch in one transaction: the batch once committed, None when there was nothing to
        read or the transaction was aborted. `before_commit`: called with the transaction open, its
        records and offsets sent, before it is committed (a test's fault in the middle of one)."""
        batch = [m for m in self.consumer.consume(max_records, timeout=timeout) if m.error() is None]
        if not batch:
            return None
        producer = self.producer
        producer.begin_transaction()
        for m in batch:
            producer.produce(self.sink, key=m.key(), value=b"out-" + m.value(), partition=self.partition_of(m))
        positions = self.consumer.position(self.consumer.assignment())
        abort_counted = False
        try:
            sent = self._retried(lambda: producer.send_offsets_to_transaction(
                positions, self.consumer.consumer_group_metadata(), T))
            if sent and before_commit is not None:
                before_commit()
            if sent and self._retried(lambda: producer.commit_transaction(T)):
                self.committed += 1
                self.processed.update((tp.partition, tp.offset) for tp in positions if tp.offset >= 0)
                return batch
            self.aborted += 1
            abort_counted = True
            if not self._retried(lambda: producer.abort_transaction(T)):
                # A fatal error. librdkafka 2.x counts an AddPartitionsToTxn that failed (the
                # coordinator moving) as maybe registered and sends EndTxn for a transaction the
                # coordinator never saw start: INVALID_TXN_STATE (docs/cluster.md). A transaction
                # that outlived transaction.timeout.ms (a fault in its way) was aborted by the
                # coordinator, which bumped the producer's epoch: the next call is fenced. What
                # an application does with a fatal error: a new producer, which fences the old one.
                self.producer = self._new_producer()
        except Stuck as e:
            print(f"transaction call stuck ({e}): a new producer, which fences it")
            self.stuck += 1
            self.aborted += not abort_counted
            self.abandoned.append(producer)
            self.producer = self._new_producer()
        self._rewind()
        return None

    def _retried(self, call) -> bool:
        """True once `call` succeeded, False when the transaction must be aborted or the producer
        failed fatally."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self.call_timeout
        errors: Counter[str] = Counter()
        while True:
            assert time.monotonic() < deadline, f"a transaction call kept failing for {self.call_timeout} s: {errors}"
            try:
                unless_stuck(call, T + 5)
                return True
            except KafkaException as e:
                error = e.args[0]
                errors[str(error)] += 1
                print("transaction call failed:", error)  # shown when the test fails
                if error.retriable():
                    continue
                if error.txn_requires_abort() or error.fatal():
                    return False
                raise

    def _rewind(self) -> None:
        """After an aborted transaction: back to the offsets last committed with one."""
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + self.call_timeout
        while True:
            try:
                committed = self.consumer.committed(self.consumer.assignment(), timeout=T)
                break
            except KafkaException as e:  # the group coordinator moving: no reading on before it answers
                assert time.monotonic() < deadline, f"no committed offsets to rewind to: {e}"
        for tp in committed:
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))

    def close(self) -> None:
        self.consumer.close()


class Stuck(Exception):
    pass


def unless_stuck(call, timeout: float) -> None:
    """`call()` in a thread of its own, raising what it raises; Stuck when it has not returned
    after `timeout` seconds. librdkafka's send_offsets_to_transaction() may block past its own
    timeout, for ever, when the group coordinator it has cached was killed: the client forgets a
    broker missing from a Metadata answer (stops its thread) but keeps it as the coordinator, and
    only another broker's state change makes it look again (librdkafka issues 5456, 5511). The
    thread is left behind, blocked, with its producer."""
    outcome: list = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - raised again below
            outcome.append(e)

    thread = threading.Thread(target=run, name="transaction call", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise Stuck(f"no answer after {timeout:.0f} s")
    if outcome[0] is not None:
        raise outcome[0]


def read_committed(bootstrap: str, topic: str, partitions: int, expected: int,
                   timeout: float = T) -> dict[int, list[bytes]]:
    """Each partition's values as a read_committed consumer sees them from the start: until
    `expected` values came (or `timeout`), then a second more and on until nothing more comes, so
    that one too many shows."""
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "auto.offset.reset": "earliest",
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def read(timeout: float) -> int:
        messages = [m for m in reader.consume(1000, timeout=timeout) if m.error() is None]
        for m in messages:
            seen[m.partition()].append(m.value())
        return len(messages)

    try:
        stop = time.monotonic() + timeout
        while sum(map(len, seen.values())) < expected and time.monotonic() < stop:
            read(1)
        time.sleep(1)  # nothing more after the last one
        while read(0.5):
            pass
        return seen
    finally:
        reader.close()
