"""The fetching side of an incremental fetch session (KIP-227), as Kafka's FetchSessionHandler keeps
it for a replica fetcher: the first request names every partition (session id 0, epoch 0) and the
leader opens a session for them; each later request (that session id, the next epoch) names only
the partitions whose fetch position changed since the leader last heard of them, and those dropped
from the session (forgotten); the leader then answers only for partitions with something new. A
follower of many quiet partitions (a group coordinator's fifty, say) thus sends and decodes a
partition or two per fetch, not all of them. Pure bookkeeping: the fetcher builds the request and
reads the answer.

An error for the whole fetch (the session evicted, an epoch out of step) or a new connection starts
over with a full request, which opens a new session.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import NamedTuple

from ...wire.errors import ErrorCode
from .fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID

TopicPartition = tuple[str, int]


class PartitionFetch(NamedTuple):
    """What a fetch asks of one partition; a change of any field is sent to the leader. (A tuple:
    one is made for every partition of every fetch.)"""
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int


@dataclass
class SessionRequest:
    """One fetch request's session fields and partitions."""
    session_id: int
    epoch: int
    partitions: dict[TopicPartition, PartitionFetch]  # to send: all of them when full
    forgotten: list[TopicPartition]
    full: bool


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.next_epoch = INITIAL_EPOCH
        # What the leader's session holds for each partition: what it was last sent.
        self._sent: dict[TopicPartition, PartitionFetch] = {}

    def build(self, wanted: dict[TopicPartition, PartitionFetch],
              candidates: Collection[TopicPartition] | None = None) -> SessionRequest:
        """The request for the partitions `wanted` now. `candidates`: the only partitions that may
        have changed or left `wanted` since the last request (a fetcher that knows which it touched
        need not have every other one compared); None: any of them. Remembers what it sends: a
        request that then fails must be followed by `reset`."""
        if self.next_epoch == INITIAL_EPOCH:
            self._sent = dict(wanted)
            return SessionRequest(self.session_id, INITIAL_EPOCH, dict(wanted), [], full=True)
        sent = self._sent
        if candidates is None:
            changed = {key: fetch for key, fetch in wanted.items() if sent.get(key) != fetch}
            forgotten = [key for key in sent if key not in wanted]
        else:
            changed = {}
            forgotten = []
            for key in candidates:
                fetch = wanted.get(key)
                if fetch is None:
                    if key in sent:
                        forgotten.append(key)
                elif sent.get(key) != fetch:
                    changed[key] = fetch
        for key in forgotten:
            del sent[key]
        sent.update(changed)
        return SessionRequest(self.session_id, self.next_epoch, changed, forgotten, full=False)

    def handle_response(self, request: SessionRequest, error_code: int, session_id: int) -> None:
        """The leader answered `request` (Kafka's FetchSessionHandler.handleResponse)."""
        if error_code != ErrorCode.NONE:
            self.reset()
            return
        if request.full:
            # A leader that keeps no session (its cache full, or Fetch before v7) answers session 0:
            # the next request is full again and asks for a session again.
            self.session_id = session_id
            self.next_epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
        else:
            self.next_epoch = self.next_epoch + 1 if self.next_epoch < 2**31 - 1 else 1

    def reset(self) -> None:
        """Start over with a full request (an error, a new connection): the leader replaces the
        session it had with a new one."""
        self.next_epoch = INITIAL_EPOCH
        self._sent = {}

