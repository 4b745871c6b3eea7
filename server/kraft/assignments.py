"""Replica directory assignments to the KRaft controller (Kafka 4.4's AssignmentsManager): a broker
with several log dirs tells the controller in which directory each of its replicas lives, with
AssignReplicasToDirs (key 73). The controller assigns a new replica's directory itself only when the
broker registered a single log dir; otherwise the partition registration says UNASSIGNED, and the
controller cannot tell which leaderships to move when the broker reports a failed log dir in its
heartbeats (ReplicationControlManager.handleDirectoriesOffline moves those of the dir's replicas).

As Kafka's broker, after each published metadata change the publisher compares the directory the
registration names for this broker with the directory its log is in (ReplicaManager.
maybeUpdateTopicAssignment) and hands the differences here (`on_assignment`). They are sent in
batches of at most 2,250, 100 ms after the first is queued, one request at a time; an assignment
the controller refused (or left unanswered) is queued again; a request that failed as a whole is
retried after an exponential backoff (100 ms doubled per failure, at most 10 s). An assignment
whose partition no longer has this broker among its replicas is dropped before sending.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import trio

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, request_class
from .controller_channel import ControllerChannel

log = logging.getLogger("samsa.kraft.assignments")
AssignReplicasToDirsRequest = request_class(ApiKey.ASSIGN_REPLICAS_TO_DIRS)
MAX_ASSIGNMENTS_PER_REQUEST = 2250  # Kafka's AssignmentsManager
INITIAL_BACKOFF_MS = 100  # Kafka's STANDARD_BACKOFF: 100 ms, doubled, at most 10 s
MAX_BACKOFF_MS = 10_000

TopicIdPartition = tuple[uuid.UUID, int]


class AssignmentsManager:
    def __init__(self, channel: ControllerChannel, node_id: int, broker_epoch: Callable[[], int],
                 valid: Callable[[uuid.UUID, int], bool]) -> None:
        """`valid(topic_id, partition)`: the partition still has this broker among its replicas."""
        self._channel = channel
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self._valid = valid
        self.ready: dict[TopicIdPartition, uuid.UUID] = {}
        self.previous_global_failures = 0
        self._queued = trio.Event()

    def on_assignment(self, topic_id: uuid.UUID, partition: int, directory: uuid.UUID) -> None:
        """The replica of (topic_id, partition) is in `directory` (a later one replaces it)."""
        self.ready[(topic_id, partition)] = directory
        self._queued.set()

    # --- the pure steps -------------------------------------------------------------------------

    def delay_ms(self) -> int:
        """How long to wait before sending what is ready (Kafka's AssignmentsManagerDeadlineFunction)."""
        if self.previous_global_failures > 0:
            return min(INITIAL_BACKOFF_MS * 2 ** self.previous_global_failures, MAX_BACKOFF_MS)
        return 0 if len(self.ready) > MAX_ASSIGNMENTS_PER_REQUEST else INITIAL_BACKOFF_MS

    def take_batch(self) -> dict[TopicIdPartition, uuid.UUID]:
        """Up to MAX_ASSIGNMENTS_PER_REQUEST ready assignments, taken out; invalid ones dropped."""
        batch: dict[TopicIdPartition, uuid.UUID] = {}
        invalid = 0
        for key in list(self.ready):
            if len(batch) >= MAX_ASSIGNMENTS_PER_REQUEST:
                break
            directory = self.ready.pop(key)
            if self._valid(*key):
                batch[key] = directory
            else:
                invalid += 1
        log.info("[AssignmentsManager id=%d] maybeSendAssignments: sending %d assignments; invalidated %d assignments "
                 "prior to sending.", self._node_id, len(batch), invalid)
        return batch

    def request(self, batch: dict[TopicIdPartition, uuid.UUID], broker_epoch: int):
        """Kafka's buildRequestData: the partitions grouped by directory, then by topic."""
        Directory, Topic, Partition = (AssignReplicasToDirsRequest.DirectoryData, AssignReplicasToDirsRequest.TopicData,
                                       AssignReplicasToDirsRequest.PartitionData)
        directories: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for (topic_id, partition), directory in batch.items():
            directories.setdefault(directory, {}).setdefault(topic_id, []).append(partition)
        return AssignReplicasToDirsRequest(broker_id=self._node_id, broker_epoch=broker_epoch, directories=[
            Directory(id=directory, topics=[Topic(topic_id=topic_id, partitions=[Partition(partition_index=p)
                                                                                 for p in partitions])
                                            for topic_id, partitions in topics.items()])
            for directory, topics in directories.items()])

    def handle_response(self, sent: dict[TopicIdPartition, uuid.UUID], response) -> None:
        """Kafka's handleResponse: `response` None when none came. What was not taken is ready again
        (unless a newer assignment of the partition was queued meanwhile)."""
        if response is None or response.error_code != ErrorCode.NONE:
            self.previous_global_failures += 1
            log.error("[AssignmentsManager id=%d] handleResponse: %d assignments failed; global error: %s. Retrying.",
                      self._node_id, len(sent), "Timeout" if response is None
                      else f"Response-level error: {ErrorCode(response.error_code).name}")
            for key, directory in sent.items():
                self.ready.setdefault(key, directory)
            return
        self.previous_global_failures = 0
        unanswered = dict(sent)
        for directory in response.directories:
            for topic in directory.topics:
                for partition in topic.partitions:
                    key = (topic.topic_id, partition.partition_index)
                    assigned = unanswered.pop(key, None)
                    if assigned is None:
                        log.error("[AssignmentsManager id=%d] handleResponse: response contained topicIdPartition "
                                  "%s:%d, but this was not in the request.", self._node_id, *key)
                    elif partition.error_code != ErrorCode.NONE:
                        log.error("[AssignmentsManager id=%d] handleResponse: error assigning %s:%d: %s.", self._node_id,
                                  *key, ErrorCode(partition.error_code).name)
                        self.ready.setdefault(key, assigned)
        for key, directory in unanswered.items():
            log.error("[AssignmentsManager id=%d] handleResponse: no result in response for partition %s:%d.",
                      self._node_id, *key)
            self.ready.setdefault(key, directory)

    # --- the I/O ------------------------------------------------------------------------------

    async def run(self, registered: trio.Event, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await registered.wait()  # the request carries the broker epoch
        while True:
            if not self.ready:
                self._queued = trio.Event()
                await self._queued.wait()
                continue
            await trio.sleep(self.delay_ms() / 1000)  # Kafka's batching deadline, or its backoff
            batch = self.take_batch()
            if batch:
                response = await self._channel.call(self.request(batch, self._broker_epoch()), 0)
                self.handle_response(batch, response)
