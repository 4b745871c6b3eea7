"""Partitions this broker leads, their logs, and the fetches parked on them (purgatory).

With one broker every partition's ISR is this broker alone, so the high watermark follows the log
end offset on every append. A long-polling fetch registers a trio.Event with each partition it
reads; an append sets them, so the fetch wakes as soon as data arrives.

After a clean shutdown a partition's log is opened on its first use (`Partition.log`): what
Metadata answers comes from the metadata image, so startup opens no log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ..storage.errors import KafkaStorageException
from ..storage.log import AppendOrigin
from ..storage.log_config import LogConfig
from ..wire.errors import ErrorCode
from .heap import making_long_lived_objects
from .metadata import MetadataStore, TopicInfo

if TYPE_CHECKING:
    from ..storage.log import Log
    from ..storage.log_manager import LogManager
    from .config import KafkaConfig

log = logging.getLogger("samsa.replica")
READ_COMMITTED = 1  # isolation_level of Fetch and ListOffsets


class Partition:
    def __init__(self, topic: TopicInfo, index: int, logs: LogManager) -> None:
        self.topic = topic
        self.index = index
        self._logs = logs
        self._log: Log | None = None
        self.leader_epoch = 0
        self._waiters: list[trio.Event] = []

    @property
    def log(self) -> Log:
        """The partition's log, opened on first use."""
        log_ = self._log
        return self.open_log() if log_ is None else log_

    def open_log(self) -> Log:
        log_ = self._log
        if log_ is None:
            log_ = self._logs.get_log(self.topic.name, self.index)
            if log_ is None:
                raise KafkaStorageException(f"The log of partition {self.name} is missing")
            log_.high_watermark = log_.log_end_offset
            self._log = log_
        return log_

    def update_config(self, config: LogConfig) -> None:
        self._logs.update_config(self.topic.name, self.index, config)

    @property
    def name(self) -> str:
        return f"{self.topic.name}-{self.index}"

    @property
    def last_stable_offset(self) -> int:
        """Up to the first record of the earliest open transaction, at most the high watermark."""
        return self.log.last_stable_offset

    def read_bound(self, isolation_level: int) -> int:
        """The first offset a reader may not see: the last stable offset for read_committed."""
        return self.last_stable_offset if isolation_level == READ_COMMITTED else self.log.high_watermark

    def check_leader_epoch(self, requested: int) -> int:
        """KIP-320: a client's view of the leader epoch; -1 means it has none to check."""
        if requested < 0 or requested == self.leader_epoch:
            return ErrorCode.NONE
        return ErrorCode.FENCED_LEADER_EPOCH if requested < self.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH

    def append(self, records, origin: AppendOrigin = AppendOrigin.CLIENT) -> object:
        """Append a batch, or a Produce partition's parsed records (the log converts, validates and
        assigns offsets in place); wakes parked fetches."""
        info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch, origin=origin)
        self.log.high_watermark = self.log.log_end_offset
        self.wake()
        return info

    def park(self, event: trio.Event) -> None:
        self._waiters.append(event)

    def unpark(self, event: trio.Event) -> None:
        try:
            self._waiters.remove(event)
        except ValueError:
            pass

    @property
    def has_parked_fetches(self) -> bool:
        return bool(self._waiters)

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.set()


async def let_woken_fetches_answer() -> None:
    """Let the fetches an append woke send their responses before the appending request goes on:
    a consumer's latency is the append's, while a producer pipelines past its acknowledgement.
    trio runs each batch of runnable tasks in either order, so a task yielding twice runs again
    only after every task that was already runnable (the woken fetches) has had its turn."""
    await trio.lowlevel.cancel_shielded_checkpoint()
    await trio.lowlevel.cancel_shielded_checkpoint()


class ReplicaManager:
    def __init__(self, logs: LogManager, metadata: MetadataStore, config: KafkaConfig,
                 on_topics_changed: Callable[[], None]) -> None:
        """`config`: the broker's, dynamic configs applied (topic logs take its defaults);
        `on_topics_changed()`: called when a topic was created, deleted or grew."""
        self._logs = logs
        self._metadata = metadata
        self._config = config
        self._on_topics_changed = on_topics_changed
        self.partitions: dict[tuple[str, int], Partition] = {}

    def topic_log_config(self, topic: TopicInfo) -> LogConfig:
        return LogConfig.from_props(topic.configs, base=self._config.log_config())

    def load(self) -> None:
        """A partition for every one in the metadata image, its log created where missing; the
        logs startup loaded (recovered) take the high watermark now, the others when opened."""
        logs = self._logs
        for topic in self._metadata.topics.values():
            config = None
            for index in range(topic.num_partitions):
                if not logs.has_log(topic.name, index):
                    config = config or self.topic_log_config(topic)
                    self._open(topic, index, config)
                else:
                    self.partitions[(topic.name, index)] = Partition(topic, index, logs)
        for log_ in logs.opened_logs():
            partition = self.partitions.get((log_.topic, log_.partition))
            if partition is not None:
                partition.open_log()  # its high watermark follows the log end offset from now

    def _open(self, topic: TopicInfo, index: int, config: LogConfig) -> Partition:
        self._logs.create_log(topic.name, index, config, topic.topic_id)  # or the log that is there
        self._logs.update_config(topic.name, index, config)
        partition = Partition(topic, index, self._logs)
        partition.open_log()
        self.partitions[(topic.name, index)] = partition
        return partition

    def _open_all(self, topic: TopicInfo, indexes: range, config: LogConfig) -> None:
        """Open (creating) these partitions' logs, or none of them: a directory that cannot be made
        (a full disk, no descriptors left) must not leave a topic whose partitions have no log,
        which every later Metadata request would trip over."""
        opened = []
        try:
            with making_long_lived_objects():
                for index in indexes:
                    self._open(topic, index, config)
                    opened.append(index)
        except (OSError, KafkaStorageException) as e:
            for index in opened:
                del self.partitions[(topic.name, index)]
                self._logs.delete_log(topic.name, index)
            log.error("Could not create the logs of %s partitions %s: %s", topic.name, indexes, e)
            raise KafkaStorageException(f"Could not create the log of {topic.name}: {getattr(e, 'strerror', None) or e}") from e

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str],
                     replication_factor: int = 1) -> TopicInfo:
        topic = self._metadata.add_topic(name, num_partitions, configs, replication_factor)
        config = self.topic_log_config(topic)
        try:
            self._open_all(topic, range(num_partitions), config)
        except KafkaStorageException:
            self._metadata.remove_topic(name)
            raise
        log.info("Created topic %s with %d partitions, topic id %s", name, num_partitions, topic.topic_id)
        self._on_topics_changed()
        return topic

    def add_partitions(self, name: str, new_total: int) -> None:
        topic = self._metadata.topics[name]
        config = self.topic_log_config(topic)
        self._open_all(topic, range(topic.num_partitions, new_total), config)
        self._metadata.set_partitions(name, new_total)
        self._on_topics_changed()

    def update_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self._metadata.topics[name]
        self._metadata.set_configs(name, configs)
        config = self.topic_log_config(topic)
        for index in range(topic.num_partitions):
            self.partitions[(name, index)].update_config(config)

    def delete_topic(self, name: str) -> TopicInfo:
        topic = self._metadata.remove_topic(name)
        for index in range(topic.num_partitions):
            partition = self.partitions.pop((name, index), None)
            if partition is not None:
                partition.wake()
                self._logs.delete_log(name, index)
        log.info("Deleted topic %s", name)
        self._on_topics_changed()
        return topic

    def wake_all(self) -> None:
        for partition in self.partitions.values():
            partition.wake()
