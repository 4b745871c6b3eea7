"""A KRaft broker's lifecycle with the controller quorum (Kafka 4.4's BrokerLifecycleManager), sans I/O.

The broker registers with the active controller (BrokerRegistration), then heartbeats
(BrokerHeartbeat) every `broker.heartbeat.interval.ms` with its broker epoch and the offset of the
metadata it has applied. Its states are Kafka's BrokerState:

- STARTING: registering, then heartbeating (every 10 ms) until the controller answers that the
  broker caught up with the metadata log (`is_caught_up`);
- RECOVERY: caught up, still fenced; once the broker has applied the metadata it caught up to
  (`ready_to_unfence`) its heartbeats stop asking to stay fenced, and the controller unfences it;
- RUNNING: unfenced; heartbeats every interval;
- PENDING_CONTROLLED_SHUTDOWN: heartbeats carry `want_shut_down` (every 50 ms until the first
  answer) until the controller answers `should_shut_down`, its leaders moved away;
- SHUTTING_DOWN: no more communication.

A log directory that fails (`directory_failed`) is named in every heartbeat's `offline_log_dirs`
from then on, the next sent at once; if no heartbeat naming it is answered without error within
`log.dir.failure.timeout.ms`, the broker shuts down (Kafka's OfflineDirBrokerFailureEvent): the
controller must learn of the failure to move the leaderships of the directory's replicas.

A failed request (no answer, an error code) is tried again after the heartbeat interval; a
registration not accepted within `initial.broker.registration.timeout.ms` of the start shuts the
broker down, as Kafka's does. One request at a time: a communication that falls due while one is in
flight is sent as soon as its answer comes.

Events and the time (ms, any monotonic origin) come in as method calls; what the shell must do comes
back as actions (the requests to send; `ShutDown` when the broker must stop), and `deadline` is when
`poll` wants to run next. server/kraft/lifecycle.py is the I/O shell.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["BrokerState", "SendRegistration", "SendHeartbeat", "ShutDown", "BrokerLifecycle"]

NONE = 0  # ErrorCode.NONE (coordinator/ imports no server code)
STARTING_HEARTBEAT_MS = 10  # Kafka's heartbeat period while STARTING, waiting to catch up
SHUTDOWN_HEARTBEAT_MS = 50  # ... and while waiting for the first answer to want_shut_down


class BrokerState(IntEnum):
    """Kafka's BrokerState (the metric `kafka.server:type=KafkaServer,name=BrokerState`)."""
    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


@dataclass(frozen=True)
class SendRegistration:
    """Send BrokerRegistration (its content is the shell's: listeners, features, log dirs, incarnation)."""


@dataclass(frozen=True)
class SendHeartbeat:
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool
    offline_log_dirs: tuple[uuid.UUID, ...] = field(default=())


@dataclass(frozen=True)
class ShutDown:
    """The broker must stop: the controller let it go, or it could not register in time."""
    reason: str


Action = SendRegistration | SendHeartbeat | ShutDown


class BrokerLifecycle:
    def __init__(self, heartbeat_interval_ms: int, initial_registration_timeout_ms: int) -> None:
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.initial_registration_timeout_ms = initial_registration_timeout_ms
        self.state = BrokerState.NOT_RUNNING
        self.broker_epoch = -1
        self.registered = False
        self.caught_up = False  # the controller said so (Kafka's initialCatchUpFuture)
        self.unfenced = False  # Kafka's initialUnfenceFuture
        self.metadata_offset = -1  # the offset of the last metadata record applied here
        self._ready_to_unfence = False
        self._initial_registration_succeeded = False
        self._registration_deadline = math.inf
        self._in_flight = False
        self._next_immediate = False  # a communication fell due while one was in flight
        self._got_shutdown_response = False
        self._next_communication = math.inf  # when the next request is due
        # Failed log directories, in the order they failed -> whether a heartbeat naming them was
        # answered (Kafka's offlineDirs), and until when an unanswered one may wait.
        self.offline_dirs: dict[uuid.UUID, bool] = {}
        self._offline_dir_deadlines: dict[uuid.UUID, float] = {}
        self._offline_dirs_in_flight: tuple[uuid.UUID, ...] = ()

    @property
    def deadline(self) -> float:
        """When `poll` must run next (ms), inf when nothing is scheduled."""
        if self.state == BrokerState.SHUTTING_DOWN:
            return math.inf
        due = math.inf if self._in_flight else self._next_communication
        return min(due, self._registration_deadline, *self._offline_dir_deadlines.values())

    def start(self, now_ms: int) -> list[Action]:
        """StartupEvent: STARTING, registration sent at once."""
        self.state = BrokerState.STARTING
        self._registration_deadline = now_ms + self.initial_registration_timeout_ms
        self._in_flight = True
        return [SendRegistration()]

    def poll(self, now_ms: int) -> list[Action]:
        """What falls due at `now_ms`: a registration or heartbeat, or the shutdown of a broker that
        did not register in time."""
        if self.state == BrokerState.SHUTTING_DOWN:
            return []
        if now_ms >= self._registration_deadline:
            self._registration_deadline = math.inf
            if not self._initial_registration_succeeded:
                return self._shut_down("unable to register with the controller quorum")
        for directory, deadline in list(self._offline_dir_deadlines.items()):
            if now_ms >= deadline:
                del self._offline_dir_deadlines[directory]
                if not self.offline_dirs.get(directory, False):
                    return self._shut_down(f"couldn't communicate offline log dir {directory} with controllers")
        if self._in_flight or now_ms < self._next_communication:
            return []
        self._next_communication = math.inf
        self._in_flight = True
        if not self.registered:
            return [SendRegistration()]
        self._offline_dirs_in_flight = tuple(self.offline_dirs)
        return [SendHeartbeat(self.broker_epoch, self.metadata_offset, not self._ready_to_unfence,
                              self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN, self._offline_dirs_in_flight)]

    def metadata_applied(self, offset: int) -> None:
        """The broker's metadata image holds the records up to `offset` (the next heartbeat says it)."""
        self.metadata_offset = max(self.metadata_offset, offset)

    def directory_failed(self, now_ms: int, directory: uuid.UUID, timeout_ms: int) -> None:
        """Kafka's propagateDirectoryFailure: the log directory `directory` failed; heartbeats name
        it from now on (the next at once, once registered), and one naming it must be answered
        within `timeout_ms` (log.dir.failure.timeout.ms), else the broker shuts down."""
        self.offline_dirs[directory] = False
        self._offline_dir_deadlines[directory] = now_ms + timeout_ms
        if self.registered:
            self._schedule(now_ms, 0)

    def ready_to_unfence(self, now_ms: int) -> None:
        """SetReadyToUnfenceEvent: the broker has applied what it caught up to; heartbeats stop
        asking to stay fenced, the next at once."""
        self._ready_to_unfence = True
        self._schedule(now_ms, 0)

    def registration_response(self, now_ms: int, error_code: int | None, broker_epoch: int = -1) -> list[Action]:
        """BrokerRegistration's answer; error_code None: none came (connection lost, timed out)."""
        self._in_flight = False
        if self.state == BrokerState.SHUTTING_DOWN:
            return []
        if error_code == NONE:
            self.broker_epoch = broker_epoch
            self.registered = True
            self._initial_registration_succeeded = True
            self._registration_deadline = math.inf  # Kafka's RegistrationTimeoutEvent then does nothing
            self._schedule(now_ms, 0)
        else:
            self._after_failure(now_ms)
        return []

    def heartbeat_response(self, now_ms: int, error_code: int | None, *, is_caught_up: bool = False,
                           is_fenced: bool = True, should_shut_down: bool = False) -> list[Action]:
        """BrokerHeartbeat's answer (Kafka's BrokerHeartbeatResponseEvent); error_code None: none came."""
        self._in_flight = False
        if self.state == BrokerState.SHUTTING_DOWN:
            return []
        if error_code != NONE:
            self._after_failure(now_ms)
            return []
        for directory in self._offline_dirs_in_flight:  # the controller knows of these now
            self.offline_dirs[directory] = True
        if self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            if should_shut_down:
                return self._shut_down("the controller has asked us to exit controlled shutdown")
            self._schedule(now_ms, self.heartbeat_interval_ms if self._got_shutdown_response else SHUTDOWN_HEARTBEAT_MS)
            self._got_shutdown_response = True
        elif self.state == BrokerState.STARTING:
            if is_caught_up:
                self.state = BrokerState.RECOVERY
                self.caught_up = True
            self._schedule(now_ms, STARTING_HEARTBEAT_MS)
        elif self.state == BrokerState.RECOVERY:
            if not is_fenced:
                self.state = BrokerState.RUNNING
                self.unfenced = True
            self._schedule(now_ms, self.heartbeat_interval_ms)
        else:
            self._schedule(now_ms, self.heartbeat_interval_ms)
        return []

    def reregister(self, now_ms: int) -> None:
        """ResendBrokerRegistrationEvent: register again (the controller no longer knows this
        incarnation, e.g. it answered a heartbeat with STALE_BROKER_EPOCH)."""
        self.registered = False
        self._schedule(now_ms, 0)

    def begin_controlled_shutdown(self, now_ms: int) -> list[Action]:
        """BeginControlledShutdownEvent: a RUNNING broker asks the controller to move its leaders
        away first; in any other state it shuts down at once."""
        if self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            return []
        if self.state == BrokerState.RUNNING:
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            self._schedule(now_ms, 0)
            return []
        return self._shut_down(f"skipping controlled shutdown because we are in state {self.state.name}")

    def _after_failure(self, now_ms: int) -> None:
        self._next_immediate = False
        self._schedule(now_ms, self.heartbeat_interval_ms)

    def _schedule(self, now_ms: int, delay_ms: int) -> None:
        """Kafka's scheduleNextCommunication: at once if one fell due while a request was in flight."""
        if self._in_flight and delay_ms == 0:  # due now, but one is in flight: right after its answer
            self._next_immediate = True
            return
        if self._next_immediate:
            delay_ms = 0
        self._next_immediate = False
        self._next_communication = now_ms + delay_ms

    def _shut_down(self, reason: str) -> list[Action]:
        self.state = BrokerState.SHUTTING_DOWN
        self._next_communication = math.inf
        return [ShutDown(reason)]
