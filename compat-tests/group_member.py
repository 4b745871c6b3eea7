"""One consumer group member, run as its own process by test_group_rebalance.py so that a crash
is a real SIGKILL. Usage: ``python group_member.py '<json settings>'``.

Settings: client ("confluent-kafka", "kafka-python" (the 2.3 line, see group_processes.py),
"aiokafka"), bootstrap, topic, group, name, journal (a file path), assignor ("range", "roundrobin",
"cooperative-sticky"), protocol ("classic" or "consumer", confluent-kafka only), session_timeout_ms,
heartbeat_interval_ms, instance_id.

The member writes what it does to its journal, one JSON object a line, each line one write(2) so
that a SIGKILL leaves whole lines behind (rebalance_journal.py reads them):

    {"ev": "assigned", "t": ..., "parts": [...], "gen": generation or null}  at the start of the callback
    {"ev": "consumed", "t": ..., "p": partition, "o": [offsets]}             as soon as poll returned them
    {"ev": "committing", "t": ..., "offsets": {partition: next offset}}      before the commit is sent
    {"ev": "committed", ...} or {"ev": "commit_failed", ..., "error": ...}   after it
    {"ev": "revoked", "t": ..., "parts": [...], "why": "revoke"|"lost"|"close"}  at the end of the callback
    {"ev": "stalled", "t": ...}  SIGUSR2 came: the batch just journaled will never be committed
    {"ev": "retried", "t": ..., "error": ...}  a retriable error the client raised, polled again

It commits synchronously after every batch and, in its revoke callback, whatever it consumed and
has not committed yet, so that the next owner of a partition starts exactly where it stopped. On
SIGTERM it stops consuming, commits, journals "close" for what it owns and closes the consumer
(which leaves the group, except for a librdkafka static member).
"""

from __future__ import annotations

import asyncio
import ctypes
import faulthandler
import json
import logging
import os
import signal
import struct
import sys
import time


class Journal:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, ev: str, **fields) -> None:
        line = json.dumps({"ev": ev, "t": time.time(), **fields}, separators=(",", ":")) + "\n"
        os.write(self.fd, line.encode())


class Offsets:
    """What the member owns, consumed and committed, per partition."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.owned: set[int] = set()
        self.next: dict[int, int] = {}  # partition -> offset after the last one consumed
        self.committed: dict[int, int] = {}

    def assigned(self, parts, gen) -> None:
        self.journal.write("assigned", parts=sorted(parts), gen=gen)
        self.owned |= set(parts)

    def consumed(self, partition: int, offsets: list[int]) -> None:
        self.journal.write("consumed", p=partition, o=offsets)
        self.next[partition] = offsets[-1] + 1

    def pending(self, parts=None) -> dict[int, int]:
        parts = self.owned if parts is None else parts
        return {p: self.next[p] for p in parts if p in self.next and self.next[p] != self.committed.get(p)}

    def start_commit(self, parts=None) -> dict[int, int]:
        """What to commit (journaled before it is sent); empty when all is committed."""
        pending = self.pending(parts)
        if pending:
            self.journal.write("committing", offsets=pending)
        return pending

    def finish_commit(self, pending: dict[int, int], error: BaseException | None) -> None:
        if error is not None:  # retried after the next batch or at revocation
            self.journal.write("commit_failed", offsets=pending, error=repr(error))
            return
        self.committed.update(pending)
        self.journal.write("committed", offsets=pending)

    def commit(self, commit_fn, parts=None) -> None:
        """commit_fn({partition: offset}) commits synchronously or raises."""
        pending = self.start_commit(parts)
        if pending:
            try:
                commit_fn(pending)
            except Exception as e:  # noqa: BLE001 - journaled
                self.finish_commit(pending, e)
            else:
                self.finish_commit(pending, None)

    def released(self, parts, why: str) -> None:
        parts = set(parts) & self.owned
        if parts:
            self.journal.write("revoked", parts=sorted(parts), why=why)
        self.owned -= parts
        for p in parts:
            self.next.pop(p, None)
            self.committed.pop(p, None)


def stop_on_sigterm() -> list[bool]:
    flag = [False]
    signal.signal(signal.SIGTERM, lambda *_: flag.__setitem__(0, True))
    return flag


# SIGUSR2: after the next batch is journaled as consumed, hang instead of committing it, so that
# the test can kill the member with an uncommitted batch (the tail the next owner consumes again).
STALL = [False]
signal.signal(signal.SIGUSR2, lambda *_: STALL.__setitem__(0, True))


def stall_if_asked(journal: Journal) -> None:
    if STALL[0]:
        journal.write("stalled")
        while True:
            time.sleep(60)


def librdkafka_generation(consumer) -> int | None:
    """The generation (or KIP-848 member epoch) from librdkafka's serialized group metadata
    ("CGMDv2:" then the generation as a host-order int32)."""
    data = bytes(consumer.consumer_group_metadata())
    if not data.startswith(b"CGMDv2:"):
        return None
    return struct.unpack_from("=i", data, 7)[0]


def run_confluent(cfg: dict, journal: Journal) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {
        "bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "client.id": cfg["name"],
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
        "reconnect.backoff.max.ms": 1000,
    }
    if cfg.get("protocol") == "consumer":
        conf["group.protocol"] = "consumer"  # session and heartbeat come from the broker
    else:
        conf.update({"partition.assignment.strategy": cfg["assignor"],
                     "session.timeout.ms": cfg["session_timeout_ms"],
                     "heartbeat.interval.ms": cfg["heartbeat_interval_ms"]})
    if cfg.get("instance_id"):
        conf["group.instance.id"] = cfg["instance_id"]
    consumer = Consumer(conf)
    topic = cfg["topic"]
    state = Offsets(journal)

    def commit(offsets: dict[int, int]) -> None:
        result = consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                                 asynchronous=False)
        errors = [tp.error for tp in result or [] if tp.error is not None]
        if errors:
            raise KafkaException(errors[0])

    def on_assign(c, parts):
        state.assigned([tp.partition for tp in parts], librdkafka_generation(c))

    def on_revoke(c, parts):
        ps = {tp.partition for tp in parts}
        state.commit(commit, ps & state.owned)
        state.released(ps, "revoke")

    def on_lost(c, parts):
        state.released({tp.partition for tp in parts}, "lost")

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    stopping = stop_on_sigterm()
    journal.write("started")
    while not stopping[0]:
        batch: dict[int, list[int]] = {}
        for m in consumer.consume(200, 0.2):
            if m.error():
                journal.write("client_error", error=str(m.error()))
                continue
            batch.setdefault(m.partition(), []).append(m.offset())
        for p, offsets in batch.items():
            state.consumed(p, offsets)
        if batch:
            stall_if_asked(journal)
        state.commit(commit)
    state.commit(commit)
    state.released(set(state.owned), "close")
    consumer.close()


def run_kafka_python(cfg: dict, journal: Journal) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    extra = {"group_instance_id": cfg["instance_id"]} if cfg.get("instance_id") else {}
    consumer = KafkaConsumer(
        bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"], client_id=cfg["name"],
        enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
        session_timeout_ms=cfg["session_timeout_ms"], heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
        partition_assignment_strategy=[assignors[cfg["assignor"]]], reconnect_backoff_max_ms=1000, **extra)
    topic = cfg["topic"]
    state = Offsets(journal)

    def commit(offsets: dict[int, int]) -> None:
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            ps = {tp.partition for tp in revoked}
            state.commit(commit, ps & state.owned)
            state.released(ps, "revoke")

        def on_partitions_assigned(self, assigned):
            generation = getattr(consumer._coordinator, "_generation", None)
            state.assigned([tp.partition for tp in assigned], getattr(generation, "generation_id", None))

    consumer.subscribe(topics=[topic], listener=Listener())
    stopping = stop_on_sigterm()
    journal.write("started")
    while not stopping[0]:
        try:
            polled = consumer.poll(timeout_ms=200, max_records=200)
        except KafkaError as e:
            # kafka-python can raise a failed coordinator lookup (the broker restarting) out of poll.
            if not e.retriable:
                raise
            journal.write("retried", error=repr(e))
            time.sleep(0.2)
            continue
        for tp, records in polled.items():
            if records:
                state.consumed(tp.partition, [r.offset for r in records])
                stall_if_asked(journal)
        state.commit(commit)
    state.commit(commit)
    state.released(set(state.owned), "close")
    consumer.close(autocommit=False)


def run_aiokafka(cfg: dict, journal: Journal) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    topic = cfg["topic"]
    state = Offsets(journal)

    async def run() -> None:
        extra = {"group_instance_id": cfg["instance_id"]} if cfg.get("instance_id") else {}
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"], client_id=cfg["name"],
            enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
            session_timeout_ms=cfg["session_timeout_ms"], heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
            partition_assignment_strategy=(assignors[cfg["assignor"]],), **extra)
        async def commit(parts=None) -> None:
            pending = state.start_commit(parts)
            if pending:
                try:
                    await consumer.commit({TopicPartition(topic, p): o for p, o in pending.items()})
                except Exception as e:  # noqa: BLE001 - journaled
                    state.finish_commit(pending, e)
                else:
                    state.finish_commit(pending, None)

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                ps = {tp.partition for tp in revoked}
                await commit(ps & state.owned)
                state.released(ps, "revoke")

            async def on_partitions_assigned(self, assigned):
                gen = getattr(consumer._coordinator, "generation", None)
                state.assigned([tp.partition for tp in assigned], gen)

        stopping = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
        consumer.subscribe([topic], listener=Listener())
        await consumer.start()
        journal.write("started")
        try:
            while not stopping.is_set():
                batches = await consumer.getmany(timeout_ms=200, max_records=200)
                for tp, records in batches.items():
                    if records:
                        state.consumed(tp.partition, [r.offset for r in records])
                        if STALL[0]:
                            journal.write("stalled")
                            await asyncio.Event().wait()
                await commit()
            await commit()
            state.released(set(state.owned), "close")
        finally:
            await consumer.stop()

    asyncio.run(run())


CLIENTS = {"confluent-kafka": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


def die_with_parent() -> None:
    """A member outliving a test that was itself killed would consume forever: PR_SET_PDEATHSIG."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def diagnosable() -> None:
    """SIGUSR1 prints every thread's stack to the member's log (the test asks before it reports a
    member that stopped taking part), and the Python clients log their group state changes there."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s")
    for name in ("kafka.coordinator", "aiokafka.consumer.group_coordinator"):
        logging.getLogger(name).setLevel(logging.INFO)


def main() -> None:
    die_with_parent()
    diagnosable()
    cfg = json.loads(sys.argv[1])
    journal = Journal(cfg["journal"])
    try:
        CLIENTS[cfg["client"]](cfg, journal)
    except BaseException as e:
        journal.write("error", error=repr(e))
        raise
    journal.write("closed")


if __name__ == "__main__":
    main()
