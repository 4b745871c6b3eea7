"""A history of a failover test, and what it shows: every write a broker acknowledged (partition,
offset, value) and every record read (partition, offset, value), checked against the log as read
back whole at the end.

The writer sends values in order per partition (an idempotent producer keeps that order through
its retries), so the checker knows what must hold:
- lost: an acknowledged value that the final log does not hold, or holds at another offset than
  the one acknowledged (librdkafka acknowledges some writes without an offset: a later batch's
  success implies an earlier one whose answer the dead leader never sent; such a value must be in
  the partition, anywhere);
- unconfirmed: the exception to that, not a loss: writes acknowledged without an offset, none of
  them in the final log, sent before any of the writer's values the partition holds. librdkafka's
  inference holds only where the leader checks that sequences follow on, and a leader with no state
  for a producer accepts any sequence (Kafka 3.9's ProducerAppendInfo.checkSequence, so a log
  trimmed by retention does not wedge its producers): a new producer's first requests refused
  (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION: not persisted, queued again) and a later one
  accepted have librdkafka report the refused ones delivered ("implicitly acked by subsequent batch
  success", confluent-kafka-go issue 921) though no broker ever took them;
- duplicated: a value the final log holds at more than one offset;
- reordered: values of one partition whose offsets in the final log are not in the order they were
  sent;
- phantom reads: a record read during the run that the final log does not hold at that offset (a
  consumer saw what was later truncated: the high watermark ran ahead of the ISR).
Pure: threads record into it (a lock keeps their lists whole), the test asks `check()`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class Anomalies:
    lost: list[tuple[int, int, bytes]] = field(default_factory=list)  # (partition, acked offset, value)
    duplicated: list[tuple[int, bytes, list[int]]] = field(default_factory=list)  # (partition, value, offsets)
    reordered: list[tuple[int, bytes, bytes]] = field(default_factory=list)  # (partition, earlier, later) sent
    phantom_reads: list[tuple[int, int, bytes]] = field(default_factory=list)
    unconfirmed: list[tuple[int, bytes]] = field(default_factory=list)  # (partition, value): not an anomaly

    def __bool__(self) -> bool:
        return bool(self.lost or self.duplicated or self.reordered or self.phantom_reads)

    def summary(self, limit: int = 10) -> str:
        parts = []
        for name in ("lost", "duplicated", "reordered", "phantom_reads"):
            found = getattr(self, name)
            if found:
                parts.append(f"{len(found)} {name}: {found[:limit]}")
        unconfirmed = f" ({len(self.unconfirmed)} unconfirmed: {self.unconfirmed[:limit]})" if self.unconfirmed else ""
        return ("; ".join(parts) or "no anomalies") + unconfirmed


class History:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent: dict[int, list[bytes]] = defaultdict(list)  # by partition, in the order sent
        self.acked: list[tuple[int, int | None, bytes, float]] = []  # (partition, offset, value, monotonic time)
        self.failed: list[tuple[int, bytes, str]] = []  # (partition, value, error): not acknowledged
        self.reads: list[tuple[int, int, bytes]] = []

    def record_sent(self, partition: int, value: bytes) -> None:
        with self._lock:
            self.sent[partition].append(value)

    def record_ack(self, partition: int, offset: int | None, value: bytes) -> None:
        with self._lock:
            self.acked.append((partition, offset, value, time.monotonic()))

    def record_failure(self, partition: int, value: bytes, error: str) -> None:
        with self._lock:
            self.failed.append((partition, value, error))

    def record_read(self, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.reads.append((partition, offset, value))

    def acked_count(self, partition: int) -> int:
        with self._lock:
            return sum(1 for p, *_ in self.acked if p == partition)

    def answered_count(self) -> int:
        """Writes answered so far, acknowledged or refused."""
        with self._lock:
            return len(self.acked) + len(self.failed)

    def last_ack_after(self, partition: int, since: float) -> float | None:
        """When the first write of `partition` sent after `since` was acknowledged, if one was
        (acknowledged at an offset above every one acknowledged before `since`)."""
        with self._lock:
            acked = [(o, t) for p, o, _, t in self.acked if p == partition and o is not None]
        before = max((o for o, t in acked if t < since), default=-1)
        return min((t for o, t in acked if t >= since and o > before), default=None)

    def check(self, final_log: dict[int, list[tuple[int, bytes]]]) -> Anomalies:
        """`final_log`: each partition's records (offset, value) read from its start to its end."""
        found = Anomalies()
        with self._lock:
            acked, reads, sent = list(self.acked), list(self.reads), {p: list(v) for p, v in self.sent.items()}
        at: dict[int, dict[int, bytes]] = {p: dict(records) for p, records in final_log.items()}
        offsets_of: dict[int, dict[bytes, list[int]]] = {}
        for p, records in final_log.items():
            by_value: dict[bytes, list[int]] = defaultdict(list)
            for offset, value in records:
                by_value[value].append(offset)
            offsets_of[p] = by_value
            found.duplicated.extend((p, v, offsets) for v, offsets in by_value.items() if len(offsets) > 1)
        first_held = {p: next((i for i, v in enumerate(values) if offsets_of.get(p, {}).get(v)), len(values))
                      for p, values in sent.items()}
        sent_index = {(p, v): i for p, values in sent.items() for i, v in enumerate(values)}
        for p, offset, value, _ in acked:
            if offset is not None:
                if at.get(p, {}).get(offset) != value:
                    found.lost.append((p, offset, value))
            elif not offsets_of.get(p, {}).get(value):
                if sent_index.get((p, value), len(sent.get(p, ()))) < first_held.get(p, 0):
                    found.unconfirmed.append((p, value))
                else:
                    found.lost.append((p, offset, value))
        for p, offset, value in dict.fromkeys(reads):
            if at.get(p, {}).get(offset) != value:
                found.phantom_reads.append((p, offset, value))
        for p, values in sent.items():
            previous: tuple[int, bytes] | None = None
            for value in values:
                offsets = offsets_of.get(p, {}).get(value)
                if not offsets:
                    continue  # never written (not acknowledged, so not lost either)
                if previous is not None and offsets[0] < previous[0]:
                    found.reordered.append((p, previous[1], value))
                previous = (offsets[0], value)
        return found

    def counts(self) -> Counter:
        with self._lock:
            return Counter(acked=len(self.acked), failed=len(self.failed), reads=len(self.reads),
                           sent=sum(len(v) for v in self.sent.values()))
