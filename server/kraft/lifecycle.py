"""The I/O shell of a KRaft broker's lifecycle (coordinator/broker_lifecycle.py, Kafka's
BrokerLifecycleManager): BrokerRegistration (key 62) with the advertised listeners, the feature
ranges this broker supports, its log dirs' ids and an incarnation id, then BrokerHeartbeat (key 63)
with the broker epoch, the metadata offset applied and the ids of the log dirs that failed since the
start (`directory_failed`), through the channel to the active controller.
Once the controller says the broker caught up, it is ready to be unfenced (the metadata up to there is
published as it is replayed); `controlled_shutdown` asks the controller to move this broker's
leaders away (want_shut_down) and returns once it lets the broker go.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import trio

from ...coordinator.broker_lifecycle import BrokerLifecycle, BrokerState, SendHeartbeat, SendRegistration, ShutDown
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, request_class
from ..clock import loop_time
from .controller_channel import ControllerChannel

log = logging.getLogger("samsa.kraft.lifecycle")
BrokerRegistrationRequest = request_class(ApiKey.BROKER_REGISTRATION)
BrokerHeartbeatRequest = request_class(ApiKey.BROKER_HEARTBEAT)
REGISTRATION_VERSION = 4  # Kafka 4.4's: log dirs, previous broker epoch
HEARTBEAT_VERSION = 1
_SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def _uuid_order(u: uuid.UUID) -> tuple[int, int]:
    """Kafka's Uuid.compareTo, which BrokerLifecycleManager sorts the registration's log dirs by:
    the most, then the least significant 64 bits, each a signed long."""
    return (int.from_bytes(u.bytes[:8], "big", signed=True), int.from_bytes(u.bytes[8:], "big", signed=True))


def _now_ms() -> int:
    return int(loop_time() * 1000)


class Lifecycle:
    def __init__(self, config, channel: ControllerChannel, cluster_id: str, node_id: int,
                 log_dir_ids: list[uuid.UUID], supported_features: dict[str, tuple[int, int]],
                 listeners: Callable[[], list[tuple[str, str, int, str]]], on_shutdown: Callable[[str], None]) -> None:
        self._config = config
        self._channel = channel
        self._cluster_id = cluster_id
        self._node_id = node_id
        self._log_dir_ids = sorted(log_dir_ids, key=_uuid_order)
        self._features = supported_features
        self._listeners = listeners  # (name, host, port, security protocol), once bound
        self._on_shutdown = on_shutdown
        self.incarnation_id = uuid.uuid4()
        self.state = BrokerLifecycle(config.get_int("broker.heartbeat.interval.ms"),
                                     config.get_int("initial.broker.registration.timeout.ms"))
        self._wake = trio.Event()
        self.registered = trio.Event()  # a broker epoch is known
        self.caught_up = trio.Event()  # the controller said so
        self.unfenced = trio.Event()
        self.shut_down = trio.Event()  # the controller let the broker go (or registration gave up)

    @property
    def broker_id(self) -> int:
        return self._node_id

    @property
    def broker_epoch(self) -> int:
        """The epoch of this broker's registration, as requests to the controller carry it (-1 before)."""
        return self.state.broker_epoch

    def metadata_applied(self, offset: int) -> None:
        self.state.metadata_applied(offset)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        lifecycle = self.state
        log.info("[BrokerLifecycleManager id=%d] Incarnation %s of broker %d in cluster %s is now STARTING.",
                 self._node_id, self.incarnation_id, self._node_id, self._cluster_id)
        actions = lifecycle.start(_now_ms())
        task_status.started()
        async with trio.open_nursery() as nursery:
            while True:
                for action in actions:
                    if isinstance(action, ShutDown):
                        log.info("[BrokerLifecycleManager id=%d] Transitioning to SHUTTING_DOWN: %s", self._node_id,
                                 action.reason)
                        self.shut_down.set()
                        self._on_shutdown(action.reason)
                    else:
                        nursery.start_soon(self._send, action)
                if lifecycle.state == BrokerState.SHUTTING_DOWN:
                    return
                with trio.move_on_at(lifecycle.deadline / 1000):
                    await self._wake.wait()
                self._wake = trio.Event()
                actions = lifecycle.poll(_now_ms())

    async def _send(self, action: SendRegistration | SendHeartbeat) -> None:
        lifecycle = self.state
        if isinstance(action, SendRegistration):
            response = await self._channel.call(self._registration(), REGISTRATION_VERSION)
            code = None if response is None else response.error_code
            if response is not None and code == ErrorCode.NONE:
                log.info("[BrokerLifecycleManager id=%d] Successfully registered broker %d with broker epoch %d",
                         self._node_id, self._node_id, response.broker_epoch)
            elif code is not None:
                log.info("[BrokerLifecycleManager id=%d] Unable to register broker %d because the controller "
                         "returned error %s", self._node_id, self._node_id, ErrorCode(code).name)
            actions = lifecycle.registration_response(_now_ms(), code, -1 if response is None else response.broker_epoch)
            if lifecycle.registered:
                self.registered.set()
        else:
            request = BrokerHeartbeatRequest(
                broker_id=self._node_id, broker_epoch=action.broker_epoch,
                current_metadata_offset=action.current_metadata_offset, want_fence=action.want_fence,
                want_shut_down=action.want_shut_down, offline_log_dirs=list(action.offline_log_dirs))
            response = await self._channel.call(request, HEARTBEAT_VERSION)
            code = None if response is None else response.error_code
            before = lifecycle.state
            if response is None or code != ErrorCode.NONE:
                if code is not None:
                    log.warning("[BrokerLifecycleManager id=%d] Broker %d sent a heartbeat request but received "
                                "error %s.", self._node_id, self._node_id, ErrorCode(code).name)
                actions = lifecycle.heartbeat_response(_now_ms(), code)
                if code == ErrorCode.STALE_BROKER_EPOCH:
                    lifecycle.reregister(_now_ms())
            else:
                actions = lifecycle.heartbeat_response(_now_ms(), code, is_caught_up=response.is_caught_up,
                                                       is_fenced=response.is_fenced,
                                                       should_shut_down=response.should_shut_down)
            self._transitioned(before, lifecycle.state)
        self._act(actions)

    def _transitioned(self, before: BrokerState, after: BrokerState) -> None:
        if before == after:
            return
        if after == BrokerState.RECOVERY:
            log.info("[BrokerLifecycleManager id=%d] The broker has caught up. Transitioning from STARTING to "
                     "RECOVERY.", self._node_id)
            self.caught_up.set()
            # Kafka's BrokerServer waits for the publishers to apply what it caught up to; Samsa
            # publishes each committed batch as it is replayed, so it is ready now.
            self.state.ready_to_unfence(_now_ms())
        elif after == BrokerState.RUNNING:
            log.info("[BrokerLifecycleManager id=%d] The broker has been unfenced. Transitioning from RECOVERY to "
                     "RUNNING.", self._node_id)
            self.unfenced.set()

    def _act(self, actions) -> None:
        for action in actions:
            if isinstance(action, ShutDown):
                self.shut_down.set()
                self._on_shutdown(action.reason)
        self._wake.set()

    def directory_failed(self, directory: uuid.UUID) -> None:
        """Kafka's propagateDirectoryFailure: the controller hears of the failed log dir in the next
        heartbeat (sent at once), and moves the leaderships of its replicas; unheard of within
        log.dir.failure.timeout.ms, the broker shuts down."""
        log.warning("[BrokerLifecycleManager id=%d] Log directory %s failed: reporting it to the controller.",
                    self._node_id, directory)
        self.state.directory_failed(_now_ms(), directory, self._config.get_int("log.dir.failure.timeout.ms"))
        self._wake.set()

    async def controlled_shutdown(self) -> None:
        """Heartbeats ask to shut down until the controller lets the broker go (Kafka's
        beginControlledShutdown, then controlledShutdownFuture)."""
        log.info("[BrokerLifecycleManager id=%d] Beginning controlled shutdown.", self._node_id)
        self._act(self.state.begin_controlled_shutdown(_now_ms()))
        await self.shut_down.wait()

    def _registration(self):
        Listener, Feature = BrokerRegistrationRequest.Listener, BrokerRegistrationRequest.Feature
        return BrokerRegistrationRequest(
            broker_id=self._node_id, cluster_id=self._cluster_id, incarnation_id=self.incarnation_id,
            listeners=[Listener(name=name, host=host, port=port, security_protocol=_SECURITY_PROTOCOLS[protocol])
                       for name, host, port, protocol in self._listeners()],
            features=[Feature(name=name, min_supported_version=low, max_supported_version=high)
                      for name, (low, high) in sorted(self._features.items())],
            rack=self._config.get_string("broker.rack"), is_migrating_zk_broker=False, log_dirs=self._log_dir_ids,
            previous_broker_epoch=-1)
