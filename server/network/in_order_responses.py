"""One connection's responses sent in the order of its requests while acks=all produces wait for
their ISR.

Kafka serves a connection one request at a time: its channel is muted from the moment a request is
read until the response is sent. An acks=all produce therefore holds the connection for a
replication round trip, and the client's next produce is not even read until then (librdkafka
sends one partition per Produce request: at 16 partitions every produce of a connection waited for
the one before it, issue 31). Samsa keeps every order that muting gives but one: once an acks=all
produce has appended to all its partitions and waits only for followers, the connection reads on,
and a following acks=all produce appends too, after it (the logs' order is still the requests'
order). Any other request (another API, acks 0 or 1, a produce while quotas are on) waits until
every earlier response is sent, so it sees the broker as Kafka would show it; responses leave in
request order. Nothing a client observes is new: a record is acknowledged only once its ISR has
it, and a consumer sees the later produce's records only after the earlier's (the high watermark
passes them in order).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

Entry = TypeVar("Entry")
# Responses that may wait on one connection before it stops reading: the most requests an
# idempotent producer keeps in flight (max.in.flight.requests.per.connection at most 5, KIP-98).
# Each holds its request's frame.
MAX_WAITING = 5


class InOrderResponses(Generic[Entry]):
    """The responses waiting to be sent on one connection. `respond` answers one entry (waits
    for it, sends it); the entries are answered one at a time, in the order they were put."""

    def __init__(self, nursery: trio.Nursery, respond: Callable[[Entry], Awaitable[None]],
                 limit: int = MAX_WAITING) -> None:
        self._nursery = nursery
        self._respond = respond
        self._limit = limit  # entries that may wait; more hold the reader back
        self._queue: deque[Entry] = deque()  # not yet given to `respond`
        self._answering = False  # `respond` has the entry put before those queued
        self._changed = trio.Event()  # set when an entry is answered or the sender stops
        self._sender: bool = False
        self._closed = False
        # What stopped the sender (a response that could not be sent): the connection is closed.
        self.failure: Exception | None = None

    @property
    def pending(self) -> int:
        """Entries put and not answered yet."""
        return len(self._queue) + self._answering

    async def put(self, entry: Entry) -> None:
        """Answer `entry` after every entry put before it (waits while `limit` entries wait)."""
        while self.pending >= self._limit and self.failure is None:
            await self._changed.wait()
        self._queue.append(entry)
        if self._sender:
            self._signal()
        elif self.failure is None:  # after a failure the connection is closing: left unanswered
            self._sender = True
            self._nursery.start_soon(self._send_in_order)

    async def drained(self) -> None:
        """Return once every entry put so far is answered (or the sender stopped)."""
        while self.pending and self.failure is None and self._sender:
            await self._changed.wait()

    def close(self) -> None:
        """No more entries: the sender stops once it has answered those put."""
        self._closed = True
        self._signal()

    def unanswered(self) -> list[Entry]:
        """The entries never given to `respond` (the connection closed first); forgets them."""
        left = list(self._queue)
        self._queue.clear()
        return left

    async def _send_in_order(self) -> None:
        try:
            while True:
                while not self.pending:
                    if self._closed:
                        return
                    await self._changed.wait()
                self._answering = True
                try:
                    await self._respond(self._queue.popleft())
                finally:
                    self._answering = False
                self._signal()
        except Exception as e:  # noqa: BLE001 (the connection is closed; its serving task raises it)
            self.failure = e
            self._nursery.cancel_scope.cancel()
        finally:
            self._sender = False
            self._signal()

    def _signal(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
