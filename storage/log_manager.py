"""All the partitions' logs of this broker across its log directories (Kafka's LogManager).

A log directory holds one `<topic>-<partition>` directory per log, the three offset checkpoints,
meta.properties, a `.lock` held while the broker runs, and `.kafka_cleanshutdown` between a clean
shutdown and the next start. Without the clean-shutdown marker, startup loads every log of the
directory, each recovering the segments past its checkpointed recovery point. With it, nothing
needs recovering: startup only lists the directory, and each log is opened on first use
(`get_log`, or retention and the cleaner reaching it), so startup costs the same for ten
partitions as for ten thousand. Until then the checkpoints carry what was read for it.

A partition moving to another log directory (AlterReplicaLogDirs) has a future log there, in a
`<topic>-<partition>.<id>-future` directory, until it caught up with the current log and took its
place (`replace_current_with_future_log`: the future directory renamed to the current name, the
old one renamed `-delete` and removed after file.delete.delay.ms, Kafka's LogManager). Startup
loads the future logs it finds, so the move resumes. A partition not created yet may be given
its directory beforehand (`maybe_update_preferred_log_dir`, Kafka's preferredLogDirs).

With a CleanerConfig whose log.cleaner.enable is true, `cleaner` compacts the logs whose
cleanup.policy has `compact` (the server calls `cleaner.clean_filthiest_log` in worker threads).

Threads: the event loop creates, looks up (opening) and deletes logs; `flush_dirty`, `cleanup`,
`checkpoint` and `shutdown` are meant for worker threads. A lock guards the registry; a second one
makes opening a log and deleting one exclusive, so two threads never open the same log twice.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from .checkpoints import (
    META_PROPERTIES, OffsetCheckpointFile, PartitionMetadataFile, kafka_uuid_string, new_directory_id, read_properties,
    write_properties,
)
from .cluster_metadata import CLUSTER_METADATA_DIR
from .durability import fsync_dir, write_atomically
from .errors import InconsistentTopicIdException, KafkaStorageException, LogDirNotFoundException, caused_by_io_error
from .log import (
    DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX, Log, delete_dir_name, future_dir_name,
    parse_topic_partition_name, segment_file_sizes,
)
from .log_cleaner import CleanerConfig, LogCleaner
from .load_progress import PROGRESS_INTERVAL_S, LoadProgress
from .log_config import LogConfig
from .log_dir_failure_channel import LogDirFailureChannel

log = logging.getLogger("samsa.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
# Kafka's producer.id.expiration.check.interval.ms (an internal config) default.
PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class _UnopenedLog:
    """A log found at a clean startup and not used since: what opening it needs, and what the
    checkpoints keep saying about it meanwhile (None: not in that checkpoint)."""
    log_dir: Path  # the log directory holding it
    directory: Path
    config: LogConfig
    recovery_point: int
    log_start_offset: int | None
    high_watermark: int | None
    topic_id: uuid.UUID | None  # its topic's, which its partition.metadata must name
    # Its segments' sizes by base offset, read from the directory when first asked for: the log
    # does not change until it is opened.
    segment_sizes: dict[int, int] | None = None

    def summary(self, tp: TopicPartition) -> LogSummary:
        """What the log would report opened, from its directory and the checkpoints. A clean
        shutdown flushed it, so its recovery point is its end offset; its start offset is the
        checkpointed one, or its first segment's base where the checkpoint omits it (as Log.open)."""
        if self.segment_sizes is None:
            self.segment_sizes = segment_file_sizes(self.directory)
        sizes = self.segment_sizes
        start = max(self.log_start_offset or 0, min(sizes, default=0))
        return LogSummary(tp[0], tp[1], sum(sizes.values()), len(sizes), start, max(self.recovery_point, start))


@dataclass(frozen=True, slots=True)
class LogSummary:
    """What Kafka's per-log gauges (kafka.log:type=Log) report of a log: bytes of its segments,
    their number, its start and end offsets."""
    topic: str
    partition: int
    size: int
    num_segments: int
    log_start_offset: int
    log_end_offset: int

    @classmethod
    def of(cls, opened: Log) -> LogSummary:
        segments = opened.segments
        return cls(opened.topic, opened.partition, sum(segment.size for segment in segments), len(segments),
                   opened.log_start_offset, opened.log_end_offset)


class LogManager:
    def __init__(self, log_dirs: Iterable[Path | str], default_config: LogConfig, clock_ms: Callable[[], int], *,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 cleaner_config: CleanerConfig | None = None, progress_interval_s: float = PROGRESS_INTERVAL_S,
                 monotonic: Callable[[], float] = time.monotonic,
                 on_all_log_dirs_failed: Callable[[], None] | None = None) -> None:
        """`progress_interval_s` and `monotonic`: how often, by which clock, a recovery at startup
        logs its progress. `on_all_log_dirs_failed`: what the broker does when its last log
        directory goes offline (Kafka halts)."""
        self.log_dirs = [Path(d) for d in log_dirs]
        self._progress_interval_s = progress_interval_s
        self._monotonic = monotonic
        self.failure_channel = LogDirFailureChannel()
        self.failure_channel.add_listener(self._handle_log_dir_failure)
        self._on_all_log_dirs_failed = on_all_log_dirs_failed
        self.default_config = default_config
        self._clock_ms = clock_ms
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._unopened: dict[TopicPartition, _UnopenedLog] = {}
        # The future logs of the partitions moving to another log directory (always opened).
        self._future_logs: dict[TopicPartition, Log] = {}
        # Where a partition not created yet goes once it is (AlterReplicaLogDirs asked for it).
        self._preferred_log_dirs: dict[TopicPartition, Path] = {}
        # (when deleted, the log or its unopened directory): each goes once the broker's
        # log.segment.delete.delay.ms, as it is then, has passed (Kafka's deleteLogs reads its current
        # default config's file.delete.delay.ms, not the topic's).
        self._logs_to_delete: list[tuple[int, Log | Path]] = []
        # (when, log): logs with `.deleted` segments to unlink then; a leaf lock, as a log reports
        # while it holds its own.
        self._segment_deletions: list[tuple[int, Log]] = []
        self._segment_deletions_lock = threading.Lock()
        self._deleted_since_checkpoint: set[TopicPartition] = set()
        self._log_counts: dict[Path, int] = {}  # logs per log directory
        self._lock = threading.Lock()
        self._opening_lock = threading.RLock()  # taken before `_lock`
        self._checkpoint_lock = threading.Lock()
        self._dir_locks: list[int] = []
        self.cleaner = (LogCleaner(cleaner_config, self.log_dirs, self._compacted_logs, clock_ms, self._log_locations,
                                   self.failure_channel)
                        if cleaner_config is not None and cleaner_config.enable else None)

    # -- identity
    def is_formatted(self) -> bool:
        """Whether any log directory has its meta.properties (Kafka's `kafka-storage format` writes them)."""
        return any((d / META_PROPERTIES).exists() for d in self.log_dirs)

    def ensure_meta_properties(self, node_id: int, new_cluster_id: Callable[[], str]) -> str:
        """Check or write meta.properties in every log directory; returns the cluster id (read, or
        made with `new_cluster_id` for a fresh broker). Refuses directories that belong to another
        node or another cluster."""
        found = {d: read_properties(d / META_PROPERTIES) for d in self.log_dirs}
        cluster_ids = {p["cluster.id"] for p in found.values() if p and "cluster.id" in p}
        if len(cluster_ids) > 1:
            raise KafkaStorageException(
                f"The cluster IDs {sorted(cluster_ids)} in the log directories do not match; the directories "
                f"belong to different clusters.")
        for directory, props in found.items():
            stored = props and (props.get("node.id") or props.get("broker.id"))
            if stored and int(stored) != node_id:
                raise KafkaStorageException(
                    f"Stored node id {stored} doesn't match previous node id {node_id} in "
                    f"{directory / META_PROPERTIES}. If you moved your data, make sure your configured node id "
                    f"matches.")
        cluster_id = cluster_ids.pop() if cluster_ids else new_cluster_id()
        for directory, props in found.items():
            if props is None:
                directory.mkdir(parents=True, exist_ok=True)
                # In the order Kafka's Properties.store writes these four keys (kafka-storage format's
                # files compare byte for byte, but for the date line and the directory id).
                write_properties(directory / META_PROPERTIES, {
                    "node.id": str(node_id), "directory.id": new_directory_id(), "version": "1",
                    "cluster.id": cluster_id})
        return cluster_id

    # -- lifecycle
    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None,
                topic_ids: Mapping[str, uuid.UUID] | None = None) -> None:
        """Lock the directories and find every log, with its topic's config (or the default): loaded
        (and recovered) at once where the last shutdown was unclean, on first use otherwise. A log
        whose partition.metadata names another topic id than `topic_ids` gives its topic is not
        opened (InconsistentTopicIdException on use)."""
        topic_configs = topic_configs or {}
        topic_ids = topic_ids or {}
        for directory in self.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock_dir(directory)
            marker = directory / CLEAN_SHUTDOWN_FILE
            had_clean_shutdown = marker.exists()
            # Gone from now on: a crash while loading or running must count as unclean next time.
            marker.unlink(missing_ok=True)
            recovery_points = _read_checkpoint_or_empty(directory / RECOVERY_POINT_CHECKPOINT_FILE)
            log_start_offsets = _read_checkpoint_or_empty(directory / LOG_START_OFFSET_CHECKPOINT_FILE)
            high_watermarks = _read_checkpoint_or_empty(directory / REPLICATION_OFFSET_CHECKPOINT_FILE)
            with os.scandir(directory) as entries:
                log_dirs = sorted(e.name for e in entries if e.is_dir())
            found: list[tuple[TopicPartition, _UnopenedLog]] = []
            futures: list[tuple[TopicPartition, _UnopenedLog]] = []
            for name in log_dirs:
                if name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(directory / name, ignore_errors=True)  # a deletion the last run left unfinished
                    continue
                if name.endswith(STRAY_DIR_SUFFIX) or name == CLUSTER_METADATA_DIR:
                    continue  # KRaft's metadata log (a dir Kafka wrote) is no partition Samsa serves
                try:
                    tp = parse_topic_partition_name(name)
                except ValueError:
                    log.warning("Ignoring %s in log directory %s: not a topic-partition directory", name, directory)
                    continue
                if name.endswith(FUTURE_DIR_SUFFIX):
                    # A move the last run left unfinished: loaded, so that it resumes.
                    futures.append((tp, _UnopenedLog(
                        directory, directory / name, topic_configs.get(tp[0], self.default_config),
                        recovery_points.get(tp, 0), log_start_offsets.get(tp), high_watermarks.get(tp),
                        topic_ids.get(tp[0]))))
                    continue
                if tp in self._logs or tp in self._unopened:
                    raise KafkaStorageException(
                        f"Duplicate log directories for {name} are found in both {self._directory_of(tp)} and "
                        f"{directory / name}.")
                found.append((tp, _UnopenedLog(
                    directory, directory / name, topic_configs.get(tp[0], self.default_config),
                    recovery_points.get(tp, 0), log_start_offsets.get(tp), high_watermarks.get(tp),
                    topic_ids.get(tp[0]))))
            if had_clean_shutdown:
                if found:
                    log.info("Skipping recovery of %d logs from %s since clean shutdown file was found",
                             len(found), directory)
                for tp, unopened in found:
                    self._leave_unopened(tp, unopened)
            else:
                self._recover_all(directory, found)
            for tp, unopened in futures:
                self._load_future(tp, unopened, had_clean_shutdown)
        if self.cleaner is not None:
            self.cleaner.load_checkpoints()

    def _load_future(self, tp: TopicPartition, found: _UnopenedLog, had_clean_shutdown: bool) -> None:
        previous = self._future_logs.get(tp)
        if previous is not None:
            raise KafkaStorageException(f"Duplicate log directories found: {found.directory}, {previous.dir}")
        try:
            self._future_logs[tp] = self._load(found, had_clean_shutdown=had_clean_shutdown)
        except InconsistentTopicIdException as e:
            log.error("%s", e)  # a future log of another topic of that name: not resumed
            return
        log.info("Loaded the future log of %s-%d in %s: its move resumes", *tp, found.log_dir)

    def _recover_all(self, directory: Path, found: list[tuple[TopicPartition, _UnopenedLog]]) -> None:
        """Load every log of a directory the last run did not shut down cleanly, saying how far it got."""
        if not found:
            return
        log.info("Attempting recovery for all logs in %s since no clean shutdown file was found", directory)
        progress = LoadProgress(directory, len(found), interval_s=self._progress_interval_s,
                                monotonic=self._monotonic)
        for tp, unopened in found:
            try:
                self._register(self._load(unopened, had_clean_shutdown=False))
            except InconsistentTopicIdException as e:
                log.error("%s", e)  # left unopened: refused again on each use
                self._leave_unopened(tp, unopened)
            progress.completed()
        progress.finished()

    def _leave_unopened(self, tp: TopicPartition, unopened: _UnopenedLog) -> None:
        self._unopened[tp] = unopened
        self._log_counts[unopened.log_dir] = self._log_counts.get(unopened.log_dir, 0) + 1

    def _load(self, found: _UnopenedLog, *, had_clean_shutdown: bool) -> Log:
        self._check_online(found.log_dir, found.directory.name)
        if found.topic_id is not None:
            _check_topic_id(found.directory, found.topic_id)
        # A log that cannot be loaded stays apart (see _open_all), its directory online: Samsa opens
        # logs on first use, where Kafka loads them all at startup.
        loaded = Log.open(found.directory, found.config, log_start_offset=found.log_start_offset or 0,
                          recovery_point=found.recovery_point, clock_ms=self._clock_ms,
                          had_clean_shutdown=had_clean_shutdown,
                          producer_id_expiration_ms=self._producer_id_expiration_ms)
        loaded.log_dir_failure_channel = self.failure_channel
        loaded.on_segments_deletion_scheduled = self._schedule_segment_deletion
        loaded.high_watermark = loaded.log_start_offset if found.high_watermark is None else found.high_watermark
        return loaded

    def _open(self, tp: TopicPartition) -> Log | None:
        """Open a log left unopened at startup (None if it is not one, or is gone)."""
        with self._opening_lock:
            opened = self._logs.get(tp)
            found = self._unopened.get(tp)
            if opened is not None or found is None:
                return opened
            loaded = self._load(found, had_clean_shutdown=True)
            with self._lock:
                del self._unopened[tp]
                self._logs[tp] = loaded
                loaded.update_config(found.config)  # changed while it was opening
            return loaded

    def _directory_of(self, tp: TopicPartition) -> Path:
        found = self._logs.get(tp)
        return found.dir if found is not None else self._unopened[tp].directory

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown marker (not in
        a directory where a log went offline: what it holds must be recovered)."""
        if self.cleaner is not None:
            self.cleaner.shutdown()
        damaged = set()
        for each in self.opened_logs() + self.future_logs():
            each.flush()
            each.close()  # writes the producer snapshot a clean restart loads
            if each.is_offline:
                damaged.add(each.dir.parent)
        with self._lock:
            doomed, self._logs_to_delete = self._logs_to_delete, []
        for _, deleting in doomed:
            _delete(deleting)
        self.checkpoint()
        damaged |= self.failure_channel.offline_log_dirs
        for directory in self.log_dirs:
            if directory not in damaged:
                write_atomically(directory / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": -1}))
        for fd in self._dir_locks:
            os.close(fd)
        self._dir_locks = []

    def _lock_dir(self, directory: Path) -> None:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KafkaStorageException(
                f"Failed to acquire lock on file .lock in {directory}. A Kafka instance in another process or "
                f"thread is using this directory.") from None
        self._dir_locks.append(fd)

    # -- the registry
    def logs(self) -> list[Log]:
        """Every log, opening those not used since startup."""
        with self._lock:
            unopened = list(self._unopened)
        return self._open_all(unopened)

    def opened_logs(self) -> list[Log]:
        """The logs opened so far: the others have not changed since the last clean shutdown."""
        with self._lock:
            return list(self._logs.values())

    def log_summaries(self) -> list[LogSummary]:
        """Every log's figures, sorted by topic and partition, opening none: a log not used since a
        clean startup is described from its checkpoints and a stat of its segment files (cached).
        Logs in an offline directory are left out, as Kafka removes their metrics."""
        with self._lock:
            opened = list(self._logs.values())
            unopened = list(self._unopened.items())
        summaries = [LogSummary.of(each) for each in opened if not each.is_offline]
        for tp, found in unopened:
            if self.failure_channel.has_offline_log_dir(found.log_dir):
                continue
            try:
                summaries.append(found.summary(tp))
            except OSError as e:  # deleted meanwhile, or a failing disk opening the log will report
                log.debug("No figures for %s-%d: %s", *tp, e)
        summaries.sort(key=lambda each: (each.topic, each.partition))
        return summaries

    def _compacted_logs(self) -> list[Log]:
        """What the cleaner looks at: the opened logs, after opening those whose topic compacts."""
        with self._lock:
            unopened = [tp for tp, found in self._unopened.items() if found.config.compact]
        return self._open_all(unopened)

    def _open_all(self, unopened: list[TopicPartition]) -> list[Log]:
        """Open these logs, then list every opened one. A log that cannot be opened is left out
        (its error logged; the next use tries again): one bad disk holds up no other log's work."""
        for tp in unopened:
            try:
                self._open(tp)
            except KafkaStorageException as e:
                log.error("%s", e)
        return self.opened_logs()

    def _log_locations(self) -> set[tuple[Path, str, int]]:
        """(log directory, topic, partition) of every log, opened or not."""
        with self._lock:
            return ({(each.dir.parent, *tp) for tp, each in self._logs.items()}
                    | {(found.log_dir, *tp) for tp, found in self._unopened.items()})

    def has_log(self, topic: str, partition: int) -> bool:
        tp = (topic, partition)
        return tp in self._logs or tp in self._unopened

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The partition's log, opened if this is its first use since startup."""
        found = self._logs.get((topic, partition))
        if found is None and (topic, partition) in self._unopened:
            found = self._open((topic, partition))
        return found

    def update_config(self, topic: str, partition: int, config: LogConfig) -> None:
        """The topic's config changed: the log uses it, or will when opened."""
        with self._lock:
            opened = self._logs.get((topic, partition))
            unopened = self._unopened.get((topic, partition))
            if unopened is not None:
                unopened.config = config  # `_open` applies it should the log be opening right now
            future = self._future_logs.get((topic, partition))
        if opened is not None:
            opened.update_config(config)
        if future is not None:
            future.update_config(config)

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                   topic_id: uuid.UUID | None = None) -> Log:
        """The partition's log, created empty in the log directory holding the fewest logs, its
        partition.metadata naming `topic_id` (when given); the one there when it names the same
        topic id or none (InconsistentTopicIdException otherwise: Kafka's getOrCreateLog)."""
        if (topic, partition) in self._deleted_since_checkpoint:
            # The checkpoints still name the deleted log: after a crash its start offset would
            # apply to the new one. Rare (deleted and created again within a checkpoint interval).
            self.checkpoint()
        existing = self.get_log(topic, partition)
        if existing is not None:
            if topic_id is not None:
                _check_topic_id(existing.dir, topic_id)
            return existing
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            live = self.live_log_dirs
            if not live:
                raise KafkaStorageException(f"Can not create log for {topic}-{partition} because all log "
                                            f"directories are offline")
            preferred = self._preferred_log_dirs.get((topic, partition))
            directory = preferred if preferred in live else min(live, key=lambda d: self._log_counts.get(d, 0))
            if topic_id is not None:
                _check_topic_id(directory / f"{topic}-{partition}", topic_id)
            with self._reporting_io_failure(directory):
                created = Log.open(directory / f"{topic}-{partition}", config or self.default_config,
                                   clock_ms=self._clock_ms, producer_id_expiration_ms=self._producer_id_expiration_ms)
                if topic_id is not None:
                    _check_topic_id(created.dir, topic_id)  # writes it in the new directory
            created.log_dir_failure_channel = self.failure_channel
            created.on_segments_deletion_scheduled = self._schedule_segment_deletion
            self._register(created)
            self._preferred_log_dirs.pop((topic, partition), None)
            return created

    def _register(self, added: Log) -> None:
        self._logs[(added.topic, added.partition)] = added
        self._log_counts[added.dir.parent] = self._log_counts.get(added.dir.parent, 0) + 1

    def delete_log(self, topic: str, partition: int) -> Log | None:
        """Forget the log and rename its directory to `<topic>-<partition>.<uuid>-delete`;
        `delete_due_files` removes it once log.segment.delete.delay.ms has passed, the next
        checkpoint forgets it. Returns the log, None when there was none or it was never opened
        (then it is deleted unopened)."""
        with self._opening_lock, self._lock:
            removed = self._logs.pop((topic, partition), None)
            unopened = self._unopened.pop((topic, partition), None) if removed is None else None
            if removed is not None:
                parent = removed.dir.parent
                removed.rename_dir(delete_dir_name(topic, partition))
                doomed: Log | Path = removed
            elif unopened is None:
                return None
            else:
                parent = unopened.log_dir
                doomed = parent / delete_dir_name(topic, partition)
                try:
                    os.rename(unopened.directory, doomed)
                except OSError as e:
                    self._unopened[(topic, partition)] = unopened
                    raise KafkaStorageException(f"Error while renaming dir for {topic}-{partition}: {e}") from e
            self._log_counts[parent] -= 1
            self._logs_to_delete.append((self._clock_ms(), doomed))
            self._deleted_since_checkpoint.add((topic, partition))
        if self.cleaner is not None:
            self.cleaner.forget_log(topic, partition, parent)
        self.delete_future_log(topic, partition)  # the partition leaves this broker: its move ends
        return removed

    # -- moving a partition to another log directory (Kafka's future logs)
    def is_log_dir_online(self, log_dir: str) -> bool:
        """Whether the log directory, an absolute path, is online; LogDirNotFoundException when it
        is none of log.dirs (Kafka's isLogDirOnline)."""
        found = next((d for d in self.log_dirs if os.path.abspath(d) == log_dir), None)
        if found is None:
            raise LogDirNotFoundException(f"Log dir {log_dir} is not found in the config.")
        return not self.failure_channel.has_offline_log_dir(found)

    def log_dir_named(self, log_dir: str) -> Path:
        """The configured log directory whose absolute path is `log_dir`."""
        found = next((d for d in self.log_dirs if os.path.abspath(d) == log_dir), None)
        if found is None:
            raise LogDirNotFoundException(f"Log dir {log_dir} is not found in the config.")
        return found

    def maybe_update_preferred_log_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Create the partition in `log_dir` should it be created here later; not when its log or
        future log is there already (Kafka's maybeUpdatePreferredLogDir)."""
        tp = (topic, partition)
        with self._lock:
            current, future = self._logs.get(tp), self._future_logs.get(tp)
            unopened = self._unopened.get(tp)
            if (current is None or current.dir.parent != log_dir) and (
                    unopened is None or unopened.log_dir != log_dir) and (
                    future is None or future.dir.parent != log_dir):
                self._preferred_log_dirs[tp] = log_dir

    def get_future_log(self, topic: str, partition: int) -> Log | None:
        return self._future_logs.get((topic, partition))

    def future_logs(self) -> list[Log]:
        with self._lock:
            return list(self._future_logs.values())

    def create_future_log(self, topic: str, partition: int, log_dir: Path, topic_id: uuid.UUID | None = None) -> Log:
        """The partition's future log in `log_dir`, created empty at the current log's start
        offset in a `<topic>-<partition>.<id>-future` directory (the one there if it exists:
        Kafka's getOrCreateLog(isFuture = true)). The current log must be opened."""
        tp = (topic, partition)
        if tp in self._deleted_since_checkpoint:
            self.checkpoint()  # as create_log: no stale recovery point may apply to the new log
        with self._opening_lock, self._lock:
            existing = self._future_logs.get(tp)
            if existing is not None:
                return existing
            current = self._logs.get(tp)
            if current is None:
                raise KafkaStorageException(f"The current replica for {topic}-{partition} is offline")
            if current.dir.parent == log_dir:
                raise KafkaStorageException(f"Can not create the future log for {topic}-{partition} in the current "
                                            f"log directory of this partition")
            self._check_online(log_dir, f"{topic}-{partition}")
            with self._reporting_io_failure(log_dir):
                created = Log.open(log_dir / future_dir_name(topic, partition), current.config,
                                   log_start_offset=current.log_start_offset, clock_ms=self._clock_ms,
                                   producer_id_expiration_ms=self._producer_id_expiration_ms)
                if topic_id is not None:
                    _check_topic_id(created.dir, topic_id)
            created.log_dir_failure_channel = self.failure_channel
            created.on_segments_deletion_scheduled = self._schedule_segment_deletion
            self._future_logs[tp] = created
            self._preferred_log_dirs.pop(tp, None)
        log.info("Created the future log of %s-%d in %s", topic, partition, log_dir)
        return created

    def replace_current_with_future_log(self, topic: str, partition: int) -> Log:
        """The future log, which holds all the current one does, becomes the current log (Kafka's
        replaceCurrentWithFutureLog): its directory is renamed `<topic>-<partition>` (made durable
        first: a crash then finds two current logs, which startup refuses as Kafka does, never
        only the future one), then the old log's is renamed `-delete`. The old log stays open for
        the reads that hold its files (a fetch response being sent) until file.delete.delay.ms
        has passed, when it is removed. Returns the new current log."""
        tp = (topic, partition)
        with self._opening_lock, self._lock:
            source, dest = self._logs.get(tp), self._future_logs.get(tp)
            if source is None or source.is_offline:
                raise KafkaStorageException(f"The current replica for {topic}-{partition} is offline")
            if dest is None or dest.is_offline:
                raise KafkaStorageException(f"The future replica for {topic}-{partition} is offline")
            log.info("Attempting to replace current log %r with %r for %s-%d", source, dest, topic, partition)
            with self._reporting_io_failure(dest.dir.parent):
                dest.rename_dir(f"{topic}-{partition}")
                fsync_dir(dest.dir.parent)
            # Epochs begun with no record yet (a leader's new epoch): the copy only saw batches.
            for entry in source.leader_epoch_cache.entries:
                if entry.epoch > dest.leader_epoch_cache.latest_epoch and entry.start_offset <= dest.log_end_offset:
                    dest.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
            dest.high_watermark = source.high_watermark
            del self._future_logs[tp]
            self._logs[tp] = dest
            self._log_counts[source.dir.parent] -= 1
            self._log_counts[dest.dir.parent] = self._log_counts.get(dest.dir.parent, 0) + 1
            try:
                source.rename_dir(delete_dir_name(topic, partition))
            except KafkaStorageException as e:
                self.failure_channel.maybe_add_offline_log_dir(source.dir.parent, str(e), e)
            self._logs_to_delete.append((self._clock_ms(), source))
        if self.cleaner is not None:
            self.cleaner.alter_checkpoint_dir(tp, source.dir.parent, dest.dir.parent)
        log.info("The current replica is successfully replaced with the future replica for %s-%d", topic, partition)
        return dest

    def delete_future_log(self, topic: str, partition: int) -> Log | None:
        """Forget the partition's future log and delete it as a deleted log goes (its move was
        cancelled, or the partition left); None when there was none."""
        tp = (topic, partition)
        with self._opening_lock, self._lock:
            future = self._future_logs.pop(tp, None)
            if future is None:
                return None
            if future.is_offline:
                # In a failed directory: only its handlers close (Kafka's removeFutureLocalReplica
                # without deleteFromLogDir); a restart finds it again.
                future.close()
                return future
            try:
                future.rename_dir(delete_dir_name(topic, partition))
            except KafkaStorageException as e:
                self.failure_channel.maybe_add_offline_log_dir(future.dir.parent, str(e), e)
            self._logs_to_delete.append((self._clock_ms(), future))
            self._deleted_since_checkpoint.add(tp)
        log.info("Deleted the future log of %s-%d", topic, partition)
        return future

    # -- periodic work (worker threads)
    def checkpoint(self) -> None:
        """Write each directory's recovery points, log start offsets and high watermarks; then the
        producer snapshots no recovery from those points needs go."""
        with self._checkpoint_lock:
            by_dir: dict[Path, list[tuple[TopicPartition, Log]]] = {d: [] for d in self.log_dirs}
            unopened_by_dir: dict[Path, list[tuple[TopicPartition, _UnopenedLog]]] = {d: [] for d in self.log_dirs}
            with self._lock:
                for tp, each in (*self._logs.items(), *self._future_logs.items()):
                    by_dir.setdefault(each.dir.parent, []).append((tp, each))
                for tp, found in self._unopened.items():
                    unopened_by_dir.setdefault(found.log_dir, []).append((tp, found))
                forgotten = set(self._deleted_since_checkpoint)
            for directory in by_dir.keys() | unopened_by_dir.keys():
                if self.failure_channel.has_offline_log_dir(directory):
                    continue  # Kafka drops an offline directory's checkpoints
                logs, unopened = by_dir.get(directory, []), unopened_by_dir.get(directory, [])
                try:
                    self._write_checkpoints(directory, logs, unopened)
                except (OSError, KafkaStorageException) as e:
                    self.failure_channel.maybe_add_offline_log_dir(
                        directory, f"Error while writing checkpoints in dir {directory}: {e}", e)
                    continue
                for _, each in logs:
                    try:
                        each.delete_snapshots_after_recovery_point_checkpoint()
                    except KafkaStorageException as e:
                        log.error("%s", e)
            with self._lock:
                self._deleted_since_checkpoint -= forgotten
            if self.cleaner is not None:
                self.cleaner.write_checkpoints()

    @staticmethod
    def _write_checkpoints(directory: Path, logs: list[tuple[TopicPartition, Log]],
                           unopened: list[tuple[TopicPartition, _UnopenedLog]]) -> None:
        OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT_FILE).write(
            {**{tp: found.recovery_point for tp, found in unopened},
             **{tp: each.recovery_point for tp, each in logs}})
        # Kafka records a start offset only where it differs from the first segment's base.
        OffsetCheckpointFile(directory / LOG_START_OFFSET_CHECKPOINT_FILE).write(
            {**{tp: found.log_start_offset for tp, found in unopened if found.log_start_offset is not None},
             **{tp: each.log_start_offset for tp, each in logs
                if each.log_start_offset > each.segments[0].base_offset}})
        OffsetCheckpointFile(directory / REPLICATION_OFFSET_CHECKPOINT_FILE).write(
            {**{tp: found.high_watermark for tp, found in unopened if found.high_watermark is not None},
             **{tp: each.high_watermark for tp, each in logs}})

    # -- a failed log directory (Kafka's LogManager.handleLogDirFailure)
    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failure_channel.has_offline_log_dir(d)]

    def is_log_offline(self, topic: str, partition: int) -> bool:
        """The log went offline, or its directory did (no lock: on every request's path)."""
        opened = self._logs.get((topic, partition))
        if opened is not None:
            return opened.is_offline
        found = self._unopened.get((topic, partition))
        return found is not None and self.failure_channel.has_offline_log_dir(found.log_dir)

    def _check_online(self, log_dir: Path, name: str) -> None:
        if self.failure_channel.has_offline_log_dir(log_dir):
            raise KafkaStorageException(f"Partition {name} is in an offline log directory {log_dir}")

    def _reporting_io_failure(self, log_dir: Path) -> "_ReportIoFailure":
        return _ReportIoFailure(self.failure_channel, log_dir)

    def _handle_log_dir_failure(self, log_dir: Path) -> None:
        """Every log in the directory goes offline (the one that failed already is); with no
        directory left, the broker is told (Kafka halts it: nothing could be stored any more).
        Runs in whichever thread met the failure: it only sets flags, taking no lock a log's I/O
        may hold."""
        log.warning("Stopping serving logs in dir %s", log_dir)
        offline = [each for each in list(self._logs.values()) if each.dir.parent == log_dir]
        for each in offline:
            each.mark_offline()
        for each in list(self._future_logs.values()):
            if each.dir.parent == log_dir:
                each.mark_offline()  # its mover stops and forgets it (Kafka's removeOfflineLogs(futureLogs))
        log.warning("Logs for partitions %s are offline due to failure on log directory %s",
                    ",".join(sorted(each.name for each in offline)), log_dir)
        if not self.live_log_dirs:
            log.critical("Shutdown broker because all log dirs in %s have failed",
                         ", ".join(str(d) for d in self.log_dirs))
            if self._on_all_log_dirs_failed is not None:
                self._on_all_log_dirs_failed()

    def flush_dirty(self, now_ms: int) -> None:
        """Flush the logs past flush.ms or flush.messages, and those with a rolled segment not yet
        flushed (Kafka flushes a rolled segment at once; this keeps crash recovery short)."""
        for each in self.opened_logs() + self.future_logs():
            if each.flush_due(now_ms):
                each.flush()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int | None = None) -> int:
        """Forget, in every log, the producers idle past producer.id.expiration.ms; `expiration_ms`
        is its value now (a cluster-wide dynamic config), for these logs and the ones created later."""
        if expiration_ms is not None:
            self._producer_id_expiration_ms = expiration_ms
        return sum(each.remove_expired_producers(now_ms, expiration_ms) for each in self.opened_logs())

    def cleanup(self, now_ms: int) -> int:
        """Retention for every log not being cleaned (opening those not used since startup: their
        segments may have aged past retention.ms), then the removal of files whose deletion delay
        has passed. Returns the number of segments retention removed."""
        logs = self.logs() if self.cleaner is None else self.cleaner.pause_cleaning(self.logs())
        try:
            removed = sum(each.delete_old_segments(now_ms) for each in logs)
        finally:
            if self.cleaner is not None:
                self.cleaner.resume_cleaning(logs)
        self.delete_due_files(now_ms)
        return removed

    def _schedule_segment_deletion(self, log: Log, when_ms: int) -> None:
        with self._segment_deletions_lock:
            self._segment_deletions.append((when_ms, log))

    def file_deletion_due_in(self, now_ms: int) -> int | None:
        """Milliseconds until the next deleted log or `.deleted` segment is due (its
        file.delete.delay.ms passed; 0 or less: due now), None when nothing awaits deletion.
        Cheap: no I/O."""
        delay = self.default_config.file_delete_delay_ms
        with self._lock:
            dues = [deleted + delay for deleted, _ in self._logs_to_delete]
        with self._segment_deletions_lock:
            dues.extend(when for when, _ in self._segment_deletions)
        return min(dues) - now_ms if dues else None

    def delete_due_files(self, now_ms: int) -> None:
        """Remove what file.delete.delay.ms no longer keeps: the directories of deleted logs
        (Kafka's kafka-delete-logs task) and the `.deleted` segments of retention, truncation and
        the cleaner's swaps (its delete-file tasks)."""
        with self._lock:
            due, self._logs_to_delete = _split_due(self._logs_to_delete,
                                                   now_ms - self.default_config.file_delete_delay_ms)
        for deleting in due:
            try:
                _delete(deleting)
            except (OSError, KafkaStorageException) as e:  # as Kafka: logged, the others still go
                log.error("Exception while deleting %s: %s", deleting, e)
        with self._segment_deletions_lock:
            due_logs, self._segment_deletions = _split_due(self._segment_deletions, now_ms)
        for each in {id(each): each for each in due_logs}.values():  # once per log, however many are due
            try:
                each.delete_pending_segments(now_ms)
            except OSError as e:
                log.error("Exception while deleting segments of %s: %s", each.name, e)


_Item = TypeVar("_Item")


def _split_due(entries: list[tuple[int, _Item]], last_due: int) -> tuple[list[_Item], list[tuple[int, _Item]]]:
    """(the items whose time is at most last_due, the entries left)."""
    return [item for at, item in entries if at <= last_due], [(at, item) for at, item in entries if at > last_due]


class _ReportIoFailure:
    """An I/O failure creating a log takes its directory offline (Kafka's getOrCreateLog
    reports to the LogDirFailureChannel)."""

    def __init__(self, channel: LogDirFailureChannel, log_dir: Path) -> None:
        self.channel = channel
        self.log_dir = log_dir

    def __enter__(self) -> None:
        pass

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and caused_by_io_error(exc):
            self.channel.maybe_add_offline_log_dir(self.log_dir, f"Error while creating a log in dir "
                                                                  f"{self.log_dir}: {exc}", exc)


def _delete(doomed: Log | Path) -> None:
    """Delete a log renamed for deletion, or the directory of one that was never opened."""
    if isinstance(doomed, Log):
        doomed.delete()
    else:
        shutil.rmtree(doomed, ignore_errors=True)


def _check_topic_id(directory: Path, topic_id: uuid.UUID) -> None:
    """Refuse a partition directory whose partition.metadata names another topic (Kafka's
    UnifiedLog.assignTopicId); one without the file gets it."""
    metadata = PartitionMetadataFile(directory)
    try:
        stored = metadata.read()
    except (ValueError, OSError) as e:
        raise KafkaStorageException(f"Error while reading {metadata.path}: {e}") from e
    if stored is None:
        if directory.is_dir():
            metadata.write(topic_id)
    elif stored != topic_id:
        raise InconsistentTopicIdException(
            f"Tried to assign topic ID {kafka_uuid_string(topic_id)} to log for topic partition {directory.name}, "
            f"but log already contained topic ID {kafka_uuid_string(stored)}")


def _read_checkpoint_or_empty(path: Path) -> dict[TopicPartition, int]:
    """A damaged checkpoint costs recovery time, not the startup: read it as empty."""
    try:
        return OffsetCheckpointFile(path).read()
    except (ValueError, OSError) as e:
        log.warning("Error occurred while reading %s, resetting it: %s", path, e)
        return {}
