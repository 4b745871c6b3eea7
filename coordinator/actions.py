"""What a coordinator call asks of the server (Kafka's CoordinatorResult, widened for parked replies).

Requests are identified by tickets the server hands in (any hashable). A call returns `Actions`:
responses to deliver now, to this request's ticket or to tickets parked earlier (a JoinGroup that
waited for the rebalance, like Kafka's DelayedJoin), and records to append to a partition of
`__consumer_offsets`. Each append carries `on_done(error_code, now_ms, out)`, which the server calls
with the append's outcome (ErrorCode.NONE or the storage error's code) through
`GroupCoordinator.complete_append`: state that must be durable first (a committed offset, a group's
new assignment) changes there, and the responses waiting on it are released there.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Self, TypeVar

from ..wire.errors import ErrorCode

Ticket = Hashable
Record = tuple[bytes, bytes | None]  # (key, value); value None is a tombstone


# The Actions an append's on_done is handed: the coordinator's own kind (TxnActions for transactions).
A = TypeVar("A", bound="Actions")


@dataclass
class Append(Generic[A]):
    partition: int
    records: list[Record]
    on_done: Callable[[int, int, A], None]
    # (producer id, epoch) of a transaction the records belong to (TxnOffsetCommit), else None.
    producer: tuple[int, int] | None = None
    # What the transaction's verification on the partition returned (storage's verification guard):
    # the append is refused if a marker ended the transaction since. None: nothing was verified.
    verification_guard: int | None = None


@dataclass
class Actions:
    responses: list[tuple[Ticket, Any]] = field(default_factory=list)
    appends: list[Append[Self]] = field(default_factory=list)

    def respond(self, ticket: Ticket, response: Any) -> None:
        self.responses.append((ticket, response))

    def append(self, partition: int, records: list[Record], on_done: Callable[[int, int, Self], None],
               producer: tuple[int, int] | None = None, verification_guard: int | None = None) -> None:
        self.appends.append(Append(partition, records, on_done, producer, verification_guard))


def append_error(error: int, too_large: int) -> int:
    """What a failed append means to the clients waiting on it (Kafka's mapping of log errors);
    `too_large` is the answer to records the log refused for their size."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return too_large
    return error
