"""Runs the group coordinator for the broker: requests in with the clock, actions carried out.

The coordinator (coordinator/group_coordinator.py) is sans-I/O; this is its shell. A handler calls
`submit(ctx, GroupCoordinator.join_group, request)`: the request gets a ticket and waits on it while
the coordinator's actions are carried out. Records go to `__consumer_offsets` (created on first
need, compacted) and their completions run once the append is done (and flushed when the log's
flush policy says so); responses go to the tickets they name, which may be requests parked earlier.
A task in the broker's nursery wakes the coordinator at its next deadline (session timeouts,
rebalance timeouts, the initial rebalance delay, offset retention).

At startup every partition of `__consumer_offsets` is replayed into the coordinator before the
broker accepts connections, transaction markers included (offsets committed in a transaction are
pending until its marker; the transaction service reports markers it writes later through
`complete_transaction`). At shutdown parked requests are answered NOT_COORDINATOR, as Kafka
does when it resigns, so that clients find the coordinator again once the broker is back.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..coordinator.actions import Actions, Append
from ..coordinator.group import RequestInfo
from ..coordinator.group_coordinator import (
    OFFSETS_TOPIC,
    GroupCoordinator,
    GroupCoordinatorConfig,
)
from ..wire.coordinator_record import RecordFormatError
from ..wire.records import ControlRecordType, parse_control_record
from .coordinator_runtime import DeadlineWaker, append_records, create_internal_topic, replay_topic
from ..wire.exceptions import CodecError
from .consumer_groups import consumer_group_config, topics_image

if TYPE_CHECKING:
    from .config import KafkaConfig
    from .context import RequestContext
    from .metadata import MetadataCache
    from .replica_manager import ReplicaManager

log = logging.getLogger("samsa.group_service")


class _Reply:
    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: Any = None

    def set(self, response: Any) -> None:
        if not self.event.is_set():
            self.response = response
            self.event.set()


def random_member_uuid() -> str:
    """The unique part of a member id, as Kafka makes it: a random UUID."""
    return str(uuid.uuid4())


class GroupService:
    def __init__(self, config: KafkaConfig, metadata: MetadataCache, replicas: ReplicaManager,
                 disk_limiter: trio.CapacityLimiter, clock: Callable[[], int],
                 new_member_uuid: Callable[[], str]) -> None:
        """`replicas`: where `__consumer_offsets` is (created through it); `disk_limiter`: fsyncs
        take turns with the broker's; `clock()`: ms since the epoch (offsets and group states carry
        wall-clock times); `new_member_uuid()`: the unique part of each new member id."""
        self._config = config
        self._metadata = metadata
        self._replicas = replicas
        self._disk_limiter = disk_limiter
        self._clock = clock
        self._new_member_uuid = new_member_uuid
        self.coordinator: GroupCoordinator | None = None
        self._replies: dict[int, _Reply] = {}
        self._tickets = itertools.count()
        self._waker = DeadlineWaker("group coordinator", clock)
        self._topics_changed = False

    # --- configuration ----------------------------------------------------------------------------

    def _coordinator_config(self) -> GroupCoordinatorConfig:
        get = self._config.get
        topic = self._metadata.topics.get(OFFSETS_TOPIC)
        return GroupCoordinatorConfig(
            # The topic's real partition count wins: groups must map where their records are.
            offsets_topic_num_partitions=topic.num_partitions if topic else get("offsets.topic.num.partitions"),
            group_min_session_timeout_ms=get("group.min.session.timeout.ms"),
            group_max_session_timeout_ms=get("group.max.session.timeout.ms"),
            group_max_size=get("group.max.size"),
            group_initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms"),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes"),
            offsets_retention_ms=get("offsets.retention.minutes") * 60_000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms"),
            consumer=consumer_group_config(get),
        )

    def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` the way Kafka's coordinator asks for it, if it is missing."""
        if OFFSETS_TOPIC in self._metadata.topics or self.coordinator is None:
            return
        create_internal_topic(self._replicas, self._config, OFFSETS_TOPIC,
                              self.coordinator.config.offsets_topic_num_partitions,
                              "offsets.topic.replication.factor", {
                                  "cleanup.policy": "compact",
                                  "segment.bytes": str(self._config.get("offsets.topic.segment.bytes")),
                                  # Batches are compressed here with offsets.topic.compression.codec; the log
                                  # keeps them as written.
                                  "compression.type": "producer",
                              })

    # --- lifecycle ----------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.coordinator = GroupCoordinator(self._coordinator_config(), self._clock(), self._new_member_uuid)
        self.coordinator.consumer.topics = topics_image(self._metadata)
        loaded = await trio.to_thread.run_sync(self._load)
        task_status.started()
        try:
            await self._apply(loaded)
            await self._waker.run(self.coordinator.next_deadline, self._fire_timers, before=self._update_topics)
        finally:
            self._deliver(self.coordinator.unload(self._clock()).responses)

    def _load(self) -> Actions:
        """Replay every record of `__consumer_offsets` (runs in a thread, before requests arrive)."""
        replay_topic(self._metadata, self._replicas, OFFSETS_TOPIC, self._replay_batch)
        return self.coordinator.load_complete(self._clock())

    def _replay_batch(self, partition, header, records) -> int:
        replayed = 0
        try:
            if header.is_control:
                self._replay_marker(header, records)
                return replayed
            producer_id = header.producer_id if header.is_transactional else -1
            for record in records:
                if record.key is not None:
                    value = None if record.value is None else bytes(record.value)
                    self.coordinator.replay(bytes(record.key), value, producer_id)
                    replayed += 1
        except (RecordFormatError, CodecError) as e:
            log.error("Skipping a malformed record in %s: %s", partition.name, e)
        return replayed

    def _replay_marker(self, header, records) -> None:
        if records:  # an emptied marker: its transaction was cleaned away
            marker = parse_control_record(records[0])
            if marker.type is not ControlRecordType.UNKNOWN:
                self.coordinator.replay_end_txn_marker(header.producer_id, marker.type is ControlRecordType.COMMIT)

    def complete_transaction(self, producer_id: int, commit: bool, partitions: set[int]) -> None:
        """A transaction's marker is written to these partitions of `__consumer_offsets`."""
        if self.coordinator is not None:
            self._deliver(self.coordinator.complete_transaction(self._clock(), producer_id, commit,
                                                                partitions).responses)

    def topics_changed(self) -> None:
        """A topic was created, deleted or grew: consumer groups subscribed to it rebalance."""
        self._topics_changed = True
        self._waker.poke()

    async def _update_topics(self) -> None:
        """Hand the coordinator the topics as they are now, if they changed: before the next group
        request, so that a client that created a topic then heartbeats sees it."""
        if self._topics_changed:
            self._topics_changed = False
            topics = topics_image(self._metadata)
            await self._apply(self.coordinator.consumer.update_topics(self._clock(), topics))

    async def _fire_timers(self, now_ms: int) -> None:
        await self._apply(self.coordinator.on_timer(now_ms))

    # --- requests -----------------------------------------------------------------------------------

    @staticmethod
    def request_info(ctx: RequestContext) -> RequestInfo:
        # Kafka shows a member's host as InetAddress.toString does: "/127.0.0.1".
        return RequestInfo(ctx.api_version, ctx.client_id or "", f"/{ctx.connection.client_host}")

    async def submit(self, ctx: RequestContext, method: Callable[..., Actions], *args: Any) -> Any:
        """Run `method(coordinator, now_ms, ticket, request_info, *args)` and wait for its response."""
        info = self.request_info(ctx)
        return await self.call(lambda now_ms, ticket: method(self.coordinator, now_ms, ticket, info, *args))

    async def call(self, operation: Callable[[int, int], Actions]) -> Any:
        self.ensure_offsets_topic()
        await self._update_topics()
        ticket = next(self._tickets)
        reply = self._replies[ticket] = _Reply()
        try:
            await self._apply(operation(self._clock(), ticket))
            await reply.event.wait()
            return reply.response
        finally:
            del self._replies[ticket]

    async def topics_deleted(self, names: set[str]) -> None:
        if self.coordinator is not None and self.coordinator.active and names:
            await self._apply(self.coordinator.delete_topic_offsets(self._clock(), names))

    async def _apply(self, actions: Actions) -> None:
        responses = list(actions.responses)
        appends = list(actions.appends)
        to_flush = []
        while appends:
            append = appends.pop(0)
            error, log_to_flush = self._append(append)
            if log_to_flush is not None and log_to_flush not in to_flush:
                to_flush.append(log_to_flush)
            more = self.coordinator.complete_append(append, error, self._clock())
            responses += more.responses
            appends += more.appends
        for log_ in to_flush:
            # flush.messages reached or a segment rolled: fsync before anyone hears of the write.
            await trio.to_thread.run_sync(log_.flush, limiter=self._disk_limiter)
        self._deliver(responses)
        self._waker.poke()

    def _append(self, append: Append) -> tuple[int, Any]:
        """(error code, the log to flush before answering or None)."""
        return append_records(self._replicas, OFFSETS_TOPIC, append.partition, append.records,
                              compression=self._config.get("offsets.topic.compression.codec"),
                              producer=append.producer)

    def _deliver(self, responses: list[tuple[Any, Any]]) -> None:
        for ticket, response in responses:
            reply = self._replies.get(ticket)
            if reply is not None:  # None: the client went away while parked
                reply.set(response)

