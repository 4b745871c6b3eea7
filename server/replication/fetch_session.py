"""Incremental fetch sessions (KIP-227), as Kafka's FetchSession.scala keeps them.

A client that opens a session (session id 0, epoch 0) sends its full partition list once; later
requests (its session id, the next epoch) carry only partitions whose fetch position changed and
those it forgets. The broker answers an incremental request with only the partitions that have
something new: records, a changed high watermark, last stable offset or log start offset, or an
error. This module is pure bookkeeping; the fetch handler does the reading.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field

from ...wire.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
# What the fetch handler reads for a partition of an incremental session with nothing new to say
# (no records, no error, the offsets the client was last sent): left out of the response.
UNCHANGED = None


@dataclass(slots=True)  # one per partition of every request: slots make it quicker to build
class CachedPartition:
    topic: str
    topic_id: object
    partition: int
    fetch_offset: int
    max_bytes: int
    log_start_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int = -1  # a follower's (Fetch v12+): the epoch of the last batch it holds
    # What the client was last told; -1 until the first response.
    high_watermark: int = -1
    last_stable_offset: int = -1
    sent_log_start_offset: int = -1

    def changed(self, high_watermark: int, last_stable_offset: int, log_start_offset: int) -> bool:
        """Whether these offsets are not those the client was last sent."""
        return (high_watermark != self.high_watermark or last_stable_offset != self.last_stable_offset
                or log_start_offset != self.sent_log_start_offset)

    def needs_response(self, high_watermark: int, last_stable_offset: int, log_start_offset: int,
                       has_records: bool, error: int) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: include and remember what changed."""
        changed = (has_records or error != ErrorCode.NONE or high_watermark != self.high_watermark
                   or last_stable_offset != self.last_stable_offset
                   or log_start_offset != self.sent_log_start_offset)
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.sent_log_start_offset = log_start_offset
        return changed


@dataclass
class FetchSession:
    id: int
    epoch: int  # the epoch the next request must carry
    partitions: "OrderedDict[tuple[str, int], CachedPartition]" = field(default_factory=OrderedDict)
    last_used_ms: int = 0
    # Opened by Fetch v13+, which names topics by id: its later requests must too (and v12- not).
    uses_topic_ids: bool = False


@dataclass
class FetchContext:
    """What one fetch request reads and how its response is shaped."""

    partitions: list[CachedPartition]
    session_id: int = INVALID_SESSION_ID
    incremental: bool = False
    error: int = ErrorCode.NONE


class FetchSessionCache:
    def __init__(self, max_slots: int, eviction_ms: int = 120_000, seed: int | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._random = random.Random(seed)

    def _new_id(self) -> int:
        for _ in itertools.count():
            sid = self._random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid
        raise AssertionError("unreachable")

    def _evict(self, now_ms: int) -> bool:
        """Make room by dropping the least recently used session idle past the eviction time."""
        if len(self.sessions) < self.max_slots:
            return True
        oldest = min(self.sessions.values(), key=lambda s: s.last_used_ms, default=None)
        if oldest is not None and now_ms - oldest.last_used_ms >= self.eviction_ms:
            del self.sessions[oldest.id]
            return True
        return False

    def new_context(self, session_id: int, epoch: int, requested: list[CachedPartition],
                    forgotten: list[tuple[str, int]], now_ms: int, uses_topic_ids: bool = False) -> FetchContext:
        """`uses_topic_ids`: the request is Fetch v13+; a session opened by the other kind of request
        is FETCH_SESSION_TOPIC_ID_ERROR (Kafka's FetchManager.newContext)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            # A full request: it replaces any session the client had.
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH or self.max_slots <= 0 or not self._evict(now_ms):
                return FetchContext(requested)
            created = FetchSession(self._new_id(), 1, last_used_ms=now_ms, uses_topic_ids=uses_topic_ids)
            for p in requested:
                created.partitions[(p.topic, p.partition)] = p
            self.sessions[created.id] = created
            return FetchContext(list(created.partitions.values()), created.id)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext([], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for key in forgotten:
            session.partitions.pop(key, None)
        for p in requested:
            cached = session.partitions.get((p.topic, p.partition))
            if cached is None:
                session.partitions[(p.topic, p.partition)] = p
            else:
                cached.fetch_offset = p.fetch_offset
                cached.max_bytes = p.max_bytes
                cached.log_start_offset = p.log_start_offset
                cached.current_leader_epoch = p.current_leader_epoch
                cached.last_fetched_epoch = p.last_fetched_epoch
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        session.last_used_ms = now_ms
        return FetchContext(list(session.partitions.values()), session.id, incremental=True)

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def remove_topic(self, topic: str) -> None:
        for session in self.sessions.values():
            for key in [k for k in session.partitions if k[0] == topic]:
                del session.partitions[key]
