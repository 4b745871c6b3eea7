"""Where a share partition's state is kept (Kafka's Persister): the share coordinator of the
partition's key, reached as Kafka's brokers reach it (InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary).

Every method answers an error code of the protocol (ErrorCode.NONE on success), never raises for a
refusal; callers retry as Kafka's DefaultStatePersister does for the retriable ones.

`DefaultStatePersister` is Kafka's DefaultStatePersister with its PersisterStateManager: for each
share partition it finds the coordinator of the key (the leader of the key's partition of
`__share_group_state`, created on first need, as FindCoordinator with key type SHARE finds it) and
asks it. When this broker is the coordinator the share service is called directly (Kafka sends the
RPC to itself over the network); otherwise the RPC goes to the coordinator over the inter-broker
listener, one connection per broker, one request at a time: the share partitions asked of a broker
while a request to it is under way go together in the next request, one per RPC and group (as
Kafka's PersisterStateManager coalesces a node's requests), so that several share partitions' writes
wait for about one round trip, not one each. Retriable answers (the coordinator
moved, is loading or not available, the topic partition is unknown yet, the network failed or
timed out) are retried after an exponential backoff (1 s doubling up to 30 s, 20 % jitter), five
attempts in all, the coordinator found again each time; then the error is answered.
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...coordinator.share_coordinator import SharePartitionKey
from ...coordinator.share_state import PersisterStateBatch, SharePartitionState
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, request_class

if TYPE_CHECKING:
    from ..coordinators.share_service import ShareService
    from ..metadata.cache import BrokerInfo

log = logging.getLogger("samsa.persister")


class Persister(Protocol):
    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> int:
        """Start (or restart, with a higher state epoch) a share partition's state at start_offset."""
        ...

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> tuple[int, SharePartitionState | None]:
        """The state a share partition's new leader resumes from (the leader epoch fences older leaders)."""
        ...

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: SharePartitionState) -> int:
        """Record a share partition's changed state (its batches replace those they overlap)."""
        ...

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]) -> dict[int, int]:
        """Forget share partitions' state (a deleted group or offsets); the error code of each partition."""
        ...

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> tuple[int, SharePartitionState | None]:
        """The state without its batches (start offset, epochs, delivery complete count): for admin and lag."""
        ...


InitializeRequest = request_class(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
ReadRequest = request_class(ApiKey.READ_SHARE_GROUP_STATE)
WriteRequest = request_class(ApiKey.WRITE_SHARE_GROUP_STATE)
DeleteRequest = request_class(ApiKey.DELETE_SHARE_GROUP_STATE)
SummaryRequest = request_class(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)


# The share state RPCs' requests for one topic of a group, as the persister sends them.

def initialize_request(group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int):
    return InitializeRequest(group_id=group_id, topics=[InitializeRequest.InitializeStateData(
        topic_id=topic_id, partitions=[InitializeRequest.PartitionData(
            partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])


def read_request(group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int):
    return ReadRequest(group_id=group_id, topics=[ReadRequest.ReadStateData(
        topic_id=topic_id, partitions=[ReadRequest.PartitionData(partition=partition, leader_epoch=leader_epoch)])])


def write_request(group_id: str, topic_id: uuid.UUID, partition: int, state: SharePartitionState):
    return WriteRequest(group_id=group_id, topics=[WriteRequest.WriteStateData(
        topic_id=topic_id, partitions=[WriteRequest.PartitionData(
            partition=partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count,
            state_batches=[WriteRequest.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                   delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                           for b in state.state_batches])])])


def delete_request(group_id: str, topic_id: uuid.UUID, partitions: list[int]):
    return DeleteRequest(group_id=group_id, topics=[DeleteRequest.DeleteStateData(
        topic_id=topic_id, partitions=[DeleteRequest.PartitionData(partition=p) for p in partitions])])


def summary_request(group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int):
    return SummaryRequest(group_id=group_id, topics=[SummaryRequest.ReadStateSummaryData(
        topic_id=topic_id, partitions=[SummaryRequest.PartitionData(partition=partition, leader_epoch=leader_epoch)])])

# Kafka's PersisterStateManager: REQUEST_BACKOFF_MS, REQUEST_BACKOFF_MAX_MS, its retry attempts and
# the InterBrokerSendThread's request timeout (DEFAULT_SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS).
REQUEST_BACKOFF_MS = 1000
REQUEST_BACKOFF_MAX_MS = 30_000
MAX_ATTEMPTS = 5
RETRY_BACKOFF_EXP_BASE = 2
RETRY_BACKOFF_JITTER = 0.2
REQUEST_TIMEOUT_MS = 30_000

# Answers after which the coordinator is found again and the RPC retried.
RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.NOT_COORDINATOR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})

# The versions sent to another broker: the newest Samsa serves (its handlers' ranges).
VERSIONS = {ApiKey.INITIALIZE_SHARE_GROUP_STATE: 0, ApiKey.READ_SHARE_GROUP_STATE: 0,
            ApiKey.WRITE_SHARE_GROUP_STATE: 1, ApiKey.DELETE_SHARE_GROUP_STATE: 0,
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: 1}


class ExponentialBackoff:
    """Kafka's ExponentialBackoffManager: attempts counted, a backoff growing with them."""

    def __init__(self, initial_ms: int, max_ms: int, rng: random.Random, max_attempts: int = MAX_ATTEMPTS,
                 multiplier: int = RETRY_BACKOFF_EXP_BASE, jitter: float = RETRY_BACKOFF_JITTER) -> None:
        self.initial_ms = min(initial_ms, max_ms)
        self.max_ms = max_ms
        self.max_attempts = max_attempts
        self.multiplier = multiplier
        self.jitter = jitter
        self.attempts = 0
        self._rng = rng
        self._exp_max = 0.0
        if max_ms > initial_ms:
            self._exp_max = math.log(max_ms / max(initial_ms, 1)) / math.log(multiplier)

    def increment_attempt(self) -> None:
        self.attempts += 1

    def reset_attempts(self) -> None:
        self.attempts = 0

    def can_attempt(self) -> bool:
        return self.attempts < self.max_attempts

    def backoff_ms(self) -> int:
        if self._exp_max == 0.0:
            return self.initial_ms
        term = self.initial_ms * self.multiplier ** min(self.attempts, self._exp_max)
        factor = self._rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter else 1.0
        return min(int(factor * term), self.max_ms)


@dataclass(frozen=True)
class _Rpc:
    api_key: ApiKey
    call: Callable[[ShareService, Any], Awaitable[Any]]  # the local share service's method


_INITIALIZE = _Rpc(ApiKey.INITIALIZE_SHARE_GROUP_STATE, lambda s, r: s.initialize_state(r))
_READ = _Rpc(ApiKey.READ_SHARE_GROUP_STATE, lambda s, r: s.read_state(r))
_WRITE = _Rpc(ApiKey.WRITE_SHARE_GROUP_STATE, lambda s, r: s.write_state(r))
_DELETE = _Rpc(ApiKey.DELETE_SHARE_GROUP_STATE, lambda s, r: s.delete_state(r))
_SUMMARY = _Rpc(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, lambda s, r: s.read_state_summary(r))


class _Coalesced:
    """A request to a broker gathering share partitions of one RPC and group until it is sent."""

    def __init__(self) -> None:
        self.by_topic: dict[uuid.UUID, list[Any]] = {}  # the partitions' data, by topic id
        self.keys: set[tuple[uuid.UUID, int]] = set()
        self.response: Any = None
        self.failed: Exception | None = None
        self.done = trio.Event()

    def add(self, topic_id: uuid.UUID, data: Any) -> None:
        self.by_topic.setdefault(topic_id, []).append(data)
        self.keys.add((topic_id, data.partition))


@dataclass
class _Failed:
    """The result of a share partition that got no coordinator's answer."""

    error_code: int


class DefaultStatePersister:
    def __init__(self, node_id: int, share_coordinator: ShareService,
                 find_coordinator: Callable[[int], Awaitable[tuple[int, BrokerInfo | None]]], *,
                 backoff_ms: int = REQUEST_BACKOFF_MS, backoff_max_ms: int = REQUEST_BACKOFF_MAX_MS,
                 request_timeout_ms: int = REQUEST_TIMEOUT_MS, rng: random.Random | None = None) -> None:
        """`node_id`: this broker's; `share_coordinator`: its share service; `find_coordinator(index)`:
        the coordinator of a partition of `__share_group_state` as reachable on the inter-broker
        listener, (NONE, node) or (error, None), creating the topic on first need (the admin
        manager's coordinator lookup, as FindCoordinator makes it)."""
        self._node_id = node_id
        self._share_coordinator = share_coordinator
        self._find_coordinator = find_coordinator
        self._backoff_ms = backoff_ms
        self._backoff_max_ms = backoff_max_ms
        self._request_timeout_ms = request_timeout_ms
        self._rng = rng or random.Random()
        self._connections: dict[int, tuple[tuple[str, int], BrokerConnection]] = {}
        self._locks: dict[int, trio.Lock] = {}
        self._gathering: dict[tuple[int, ApiKey, str], _Coalesced] = {}  # requests waiting for their broker

    # --- the Persister -------------------------------------------------------------------------------

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> int:
        request = initialize_request(group_id, topic_id, partition, state_epoch, start_offset)
        return (await self._send(_INITIALIZE, SharePartitionKey(group_id, topic_id, partition), request)).error_code

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> tuple[int, SharePartitionState | None]:
        request = read_request(group_id, topic_id, partition, leader_epoch)
        result = await self._send(_READ, SharePartitionKey(group_id, topic_id, partition), request)
        if result.error_code != ErrorCode.NONE:
            return result.error_code, None
        return ErrorCode.NONE, SharePartitionState(
            state_epoch=result.state_epoch, start_offset=result.start_offset, leader_epoch=leader_epoch,
            state_batches=[PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                           for b in result.state_batches])

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: SharePartitionState) -> int:
        request = write_request(group_id, topic_id, partition, state)
        return (await self._send(_WRITE, SharePartitionKey(group_id, topic_id, partition), request)).error_code

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]) -> dict[int, int]:
        errors: dict[int, int] = {}

        async def one(partition: int) -> None:
            request = delete_request(group_id, topic_id, [partition])
            result = await self._send(_DELETE, SharePartitionKey(group_id, topic_id, partition), request)
            errors[partition] = result.error_code

        async with trio.open_nursery() as nursery:
            for partition in dict.fromkeys(partitions):
                nursery.start_soon(one, partition)
        return {partition: errors[partition] for partition in dict.fromkeys(partitions)}

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> tuple[int, SharePartitionState | None]:
        request = summary_request(group_id, topic_id, partition, leader_epoch)
        result = await self._send(_SUMMARY, SharePartitionKey(group_id, topic_id, partition), request)
        if result.error_code != ErrorCode.NONE:
            return result.error_code, None
        return ErrorCode.NONE, SharePartitionState(
            state_epoch=result.state_epoch, start_offset=result.start_offset, leader_epoch=result.leader_epoch,
            delivery_complete_count=result.delivery_complete_count)

    # --- finding the coordinator and asking it --------------------------------------------------------

    async def _send(self, rpc: _Rpc, key: SharePartitionKey, request) -> Any:
        """The share partition's result from its coordinator, retried as Kafka's handlers retry."""
        if not key.group_id or key.partition < 0:  # Kafka's validate: refused before anything is sent
            return _Failed(ErrorCode.INVALID_REQUEST)
        find_backoff = ExponentialBackoff(self._backoff_ms, self._backoff_max_ms, self._rng)
        rpc_backoff = ExponentialBackoff(self._backoff_ms, self._backoff_max_ms, self._rng)
        while True:
            error, node = await self._find_coordinator(self._share_coordinator.partition_for(key))
            if error != ErrorCode.NONE or node is None:
                find_backoff.increment_attempt()
                if error in RETRIABLE and find_backoff.can_attempt():
                    log.debug("Retriable error %s finding the coordinator of %s", ErrorCode(error).name, key)
                    await trio.sleep(find_backoff.backoff_ms() / 1000)
                    continue
                log.error("Unable to find the share coordinator of %s: %s", key, ErrorCode(error).name)
                return _Failed(error)
            find_backoff.reset_attempts()
            result = await self._ask(rpc, node, key, request)
            rpc_backoff.increment_attempt()
            if result.error_code == ErrorCode.NONE or result.error_code not in RETRIABLE:
                return result
            if not rpc_backoff.can_attempt():
                log.error("Exhausted max retries for %s RPC for key %s without success.", rpc.api_key.name, key)
                return result
            log.debug("Retriable error %s in %s RPC for key %s", ErrorCode(result.error_code).name, rpc.api_key.name,
                      key)
            await trio.sleep(rpc_backoff.backoff_ms() / 1000)

    async def _ask(self, rpc: _Rpc, node: BrokerInfo, key: SharePartitionKey, request) -> Any:
        """The coordinator's result for the share partition: this broker's share service, or the RPC."""
        if node.node_id == self._node_id:
            response = await rpc.call(self._share_coordinator, request)
        else:
            try:
                response = await self._request(rpc, node, request)
            except (BrokerUnreachable, CodecError) as e:
                log.info("%s to broker %d failed: %s", rpc.api_key.name, node.node_id, e)
                return _Failed(ErrorCode.NETWORK_EXCEPTION)
        for topic in response.results:
            if topic.topic_id == key.topic_id:
                for result in topic.partitions:
                    if result.partition == key.partition:
                        return result
        log.error("No result for share partition %s in the %s response", key, rpc.api_key.name)
        return _Failed(ErrorCode.UNKNOWN_SERVER_ERROR)

    async def _request(self, rpc: _Rpc, node: BrokerInfo, request) -> Any:
        """The response of the request to `node` that carries `request`'s share partition."""
        [topic] = request.topics
        [data] = topic.partitions
        gathering = (node.node_id, rpc.api_key, request.group_id)
        coalesced = self._gathering.get(gathering)
        if coalesced is not None and (topic.topic_id, data.partition) not in coalesced.keys:
            coalesced.add(topic.topic_id, data)
            await coalesced.done.wait()
            if coalesced.failed is not None:
                raise coalesced.failed
            return coalesced.response
        coalesced = _Coalesced()
        coalesced.add(topic.topic_id, data)
        if gathering not in self._gathering:
            self._gathering[gathering] = coalesced
        try:
            async with self._locks.setdefault(node.node_id, trio.Lock()):  # a connection carries one at a time
                if self._gathering.get(gathering) is coalesced:
                    del self._gathering[gathering]
                combined = type(request)(group_id=request.group_id, topics=[
                    type(topic)(topic_id=topic_id, partitions=partitions)
                    for topic_id, partitions in coalesced.by_topic.items()])
                try:
                    connection = await self._connection(node)
                    coalesced.response = await connection.call(combined, VERSIONS[rpc.api_key])
                except (BrokerUnreachable, CodecError) as e:
                    coalesced.failed = e
                    await self._drop(node.node_id)
                    raise
        finally:
            if self._gathering.get(gathering) is coalesced:  # cancelled before it was sent
                del self._gathering[gathering]
            if coalesced.response is None and coalesced.failed is None:
                coalesced.failed = BrokerUnreachable(f"{rpc.api_key.name} to broker {node.node_id} not sent")
            coalesced.done.set()
        return coalesced.response

    async def _connection(self, node: BrokerInfo) -> BrokerConnection:
        address = (node.host, node.port)
        known = self._connections.get(node.node_id)
        if known is not None and known[0] == address:
            return known[1]
        await self._drop(node.node_id)
        connection = await BrokerConnection.connect(*address, f"broker-{self._node_id}-share-persister",
                                                    self._request_timeout_ms)
        self._connections[node.node_id] = (address, connection)
        return connection

    async def _drop(self, node_id: int) -> None:
        known = self._connections.pop(node_id, None)
        if known is not None:
            with trio.CancelScope(shield=True):
                await known[1].aclose()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Until the broker stops: then the connections to other brokers are closed."""
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            for node_id in list(self._connections):
                await self._drop(node_id)
