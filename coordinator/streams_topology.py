"""A streams group's topology and its configuration against the cluster's topics (Kafka's
StreamsTopology and InternalTopicManager.configureTopics, with RepartitionTopics,
CopartitionedTopicsEnforcer and ChangelogTopics), sans I/O.

The first member to join sends the topology: its subtopologies, each with source topics (the
application's input), repartition source topics (internal, written by another subtopology's
repartition sink), state changelog topics (internal) and copartition groups (topics that must have
as many partitions as each other, as joins need). The coordinator keeps it in the
StreamsGroupTopology record and configures it whenever the topics change:

- a source topic missing: MISSING_SOURCE_TOPICS, and nothing is assigned;
- the partition count of each internal topic decided: a repartition topic's from the widest source of
  the subtopology that writes it (or as the topology fixes it, or as copartitioning requires), a
  changelog topic's from its subtopology's widest source; an invalid topology is
  STREAMS_INVALID_TOPOLOGY, copartitioned topics of different sizes INCORRECTLY_PARTITIONED_TOPICS;
- internal topics that do not exist: MISSING_INTERNAL_TOPICS, and the server creates them (an
  existing one of another size: INCORRECTLY_PARTITIONED_TOPICS);
- otherwise the topology is ready: each subtopology has as many tasks as its widest source topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from ..wire.coordinator_records.streams_group_topology_value import (
    CopartitionGroup, StreamsGroupTopologyValue, Subtopology, TopicConfig, TopicInfo,
)
from ..wire.errors import ErrorCode
from ..wire.messages import streams_group_describe_response as described
from .group import GroupError

__all__ = ["ConfiguredTopology", "InternalTopic", "Status", "StreamsTopology", "TopicConfigurationError",
           "configure_topics"]

# The partition count of a topic of the cluster, None if it does not exist.
PartitionCount = Callable[[str], "int | None"]


class Status(IntEnum):
    """The status codes of StreamsGroupHeartbeatResponse (Kafka's StreamsGroupHeartbeatResponse.Status)."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


class TopicConfigurationError(Exception):
    """Kafka's TopicConfigurationException: the topology cannot be configured now; reported to
    members as a status, not an error."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _invalid(message: str) -> GroupError:
    return GroupError(ErrorCode.STREAMS_INVALID_TOPOLOGY, message)


@dataclass(frozen=True)
class StreamsTopology:
    """The topology as the StreamsGroupTopology record holds it: subtopologies by id."""

    epoch: int
    subtopologies: Mapping[str, Subtopology]

    @classmethod
    def from_record(cls, value: StreamsGroupTopologyValue) -> StreamsTopology:
        return cls(value.epoch, {s.subtopology_id: s for s in value.subtopologies})

    @classmethod
    def from_request(cls, topology) -> StreamsTopology:
        """The heartbeat's Topology as the record has it (Kafka's convertToStreamsGroupTopologyRecord)."""
        return cls.from_record(record_value(topology))

    def record_value(self) -> StreamsGroupTopologyValue:
        return StreamsGroupTopologyValue(epoch=self.epoch, subtopologies=list(self.subtopologies.values()))

    def same_as(self, other: StreamsTopology) -> bool:
        """Kafka compares topologies as records (StreamsTopology.equals)."""
        return self.epoch == other.epoch and dict(self.subtopologies) == dict(other.subtopologies)

    def source_topics(self) -> set[str]:
        """The topics whose partitions are the tasks' input (Kafka's sourceTopicMap keys)."""
        return {t for s in self.subtopologies.values()
                for t in list(s.source_topics) + [r.name for r in s.repartition_source_topics]}

    def source_topic_map(self) -> dict[str, str]:
        """{input topic: the id of the subtopology reading it} (Kafka's StreamsTopology.sourceTopicMap)."""
        return {t: sid for sid, s in self.subtopologies.items()
                for t in list(s.source_topics) + [r.name for r in s.repartition_source_topics]}

    def required_topics(self) -> set[str]:
        return self.source_topics() | {c.name for s in self.subtopologies.values() for c in s.state_changelog_topics}

    def describe(self) -> described.Topology:
        """StreamsGroupDescribe's topology as the member sent it (not configured yet)."""
        return described.Topology(epoch=self.epoch, subtopologies=[
            described.Subtopology(
                subtopology_id=sid, source_topics=sorted(s.source_topics),
                repartition_sink_topics=sorted(s.repartition_sink_topics),
                repartition_source_topics=sorted((_describe_topic(t.name, t.partitions, t.replication_factor,
                                                                  t.topic_configs)
                                                  for t in s.repartition_source_topics), key=lambda t: t.name),
                state_changelog_topics=sorted((_describe_topic(t.name, t.partitions, t.replication_factor,
                                                               t.topic_configs)
                                               for t in s.state_changelog_topics), key=lambda t: t.name))
            for sid, s in sorted(self.subtopologies.items())])


def record_value(topology) -> StreamsGroupTopologyValue:
    """A StreamsGroupHeartbeatRequest Topology as a StreamsGroupTopologyValue."""
    def topic(t) -> TopicInfo:
        return TopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                         topic_configs=[TopicConfig(key=c.key, value=c.value) for c in t.topic_configs or ()])

    return StreamsGroupTopologyValue(epoch=topology.epoch, subtopologies=[
        Subtopology(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics or ()),
                    source_topic_regex=list(s.source_topic_regex or ()),
                    repartition_sink_topics=list(s.repartition_sink_topics or ()),
                    repartition_source_topics=[topic(t) for t in s.repartition_source_topics or ()],
                    state_changelog_topics=[topic(t) for t in s.state_changelog_topics or ()],
                    copartition_groups=[CopartitionGroup(source_topics=list(g.source_topics),
                                                         source_topic_regex=list(g.source_topic_regex),
                                                         repartition_source_topics=list(g.repartition_source_topics))
                                        for g in s.copartition_groups or ()])
        for s in topology.subtopologies or ()])


def _describe_topic(name: str, partitions: int, replication_factor: int, configs) -> described.TopicInfo:
    return described.TopicInfo(name=name, partitions=partitions, replication_factor=replication_factor,
                               topic_configs=[described.KeyValue(key=c.key, value=c.value) for c in configs or ()])


@dataclass(frozen=True)
class InternalTopic:
    """An internal topic with its partition count decided (Kafka's ConfiguredInternalTopic); a
    replication factor of -1 takes the broker's default."""

    name: str
    partitions: int
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfiguredSubtopology:
    num_tasks: int
    source_topics: frozenset[str]
    repartition_source_topics: Mapping[str, InternalTopic]
    repartition_sink_topics: frozenset[str]
    state_changelog_topics: Mapping[str, InternalTopic]

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)

    def input_topics(self) -> list[str]:
        return sorted(self.source_topics | set(self.repartition_source_topics))


@dataclass(frozen=True)
class ConfiguredTopology:
    """The topology configured against the topics of one moment (Kafka's ConfiguredTopology):
    `subtopologies` is None when it could not be configured; `error` says why it is not ready."""

    epoch: int
    metadata_hash: int
    subtopologies: Mapping[str, ConfiguredSubtopology] | None
    internal_topics_to_create: Mapping[str, InternalTopic]
    error: TopicConfigurationError | None

    def is_ready(self) -> bool:
        return self.error is None and self.subtopologies is not None

    def describe(self) -> described.Topology:
        assert self.subtopologies is not None
        return described.Topology(epoch=self.epoch, subtopologies=[
            described.Subtopology(
                subtopology_id=sid, source_topics=sorted(s.source_topics),
                repartition_sink_topics=sorted(s.repartition_sink_topics),
                repartition_source_topics=[_describe_topic(t.name, t.partitions, max(t.replication_factor, 0),
                                                           [TopicConfig(key=k, value=v) for k, v in t.configs.items()])
                                           for _, t in sorted(s.repartition_source_topics.items())],
                state_changelog_topics=[_describe_topic(t.name, t.partitions, max(t.replication_factor, 0),
                                                        [TopicConfig(key=k, value=v) for k, v in t.configs.items()])
                                        for _, t in sorted(s.state_changelog_topics.items())])
            for sid, s in sorted(self.subtopologies.items())])


def summarize(topics: Iterable[str]) -> str:
    """Kafka's summarizeTopics: at most three names, then how many more."""
    topics = list(topics)
    if not topics:
        return "<none>"
    return ", ".join(topics[:3]) + (f" and {len(topics) - 3} additional topics" if len(topics) > 3 else "")


def configure_topics(topology: StreamsTopology, partition_count: PartitionCount, metadata_hash: int = 0,
                     ) -> ConfiguredTopology:
    """Kafka's InternalTopicManager.configureTopics. Raises GroupError(STREAMS_INVALID_TOPOLOGY) for
    a topology that can never be configured."""
    try:
        missing = sorted({t for s in topology.subtopologies.values() for t in s.source_topics
                          if partition_count(t) is None})
        if missing:
            raise TopicConfigurationError(Status.MISSING_SOURCE_TOPICS, f"Source topics {summarize(missing)} are missing.")
        decided: dict[str, int] = {}

        def count(topic: str) -> int | None:
            actual = partition_count(topic)
            return decided.get(topic) if actual is None else actual

        decided.update(_repartition_topic_counts(topology, count))
        _enforce_copartitioning(topology, count, decided)
        for s in topology.subtopologies.values():
            widest = max((_known(count, t) for t in _inputs(s)), default=None)
            if widest is None:
                raise _invalid(f"No source topics found for subtopology {s.subtopology_id}")
            for t in s.state_changelog_topics:
                decided[t.name] = widest
        subtopologies = {sid: _configured(s, count, decided) for sid, s in sorted(topology.subtopologies.items())}
        to_create: dict[str, InternalTopic] = {}
        for sub in subtopologies.values():
            to_create.update(sub.repartition_source_topics)
            to_create.update(sub.state_changelog_topics)
        for topic in sorted(topology.required_topics()):
            existing = partition_count(topic)
            expected = to_create.pop(topic, None) if existing is not None else None
            if expected is not None and existing != expected.partitions:
                raise TopicConfigurationError(
                    Status.INCORRECTLY_PARTITIONED_TOPICS,
                    f"Existing topic {topic} has different number of partitions: expected {expected.partitions}, "
                    f"found {existing}")
        error = None
        if to_create:
            error = TopicConfigurationError(Status.MISSING_INTERNAL_TOPICS,
                                            f"Internal topics are missing: {summarize(sorted(to_create))}")
        return ConfiguredTopology(topology.epoch, metadata_hash, subtopologies, to_create, error)
    except TopicConfigurationError as e:
        return ConfiguredTopology(topology.epoch, metadata_hash, None, {}, e)


def _inputs(s: Subtopology) -> list[str]:
    return list(s.source_topics) + [t.name for t in s.repartition_source_topics]


def _known(count: Callable[[str], int | None], topic: str) -> int:
    n = count(topic)
    if n is None:
        raise _invalid(f"Number of partitions must be set for topic {topic}")
    return n


def _repartition_topic_counts(topology: StreamsTopology, count: Callable[[str], int | None]) -> dict[str, int]:
    """Kafka's RepartitionTopics.setup: a repartition topic's partitions are fixed by the topology or
    those of the widest input of the subtopology that writes it, computed until nothing changes."""
    counts = {t.name: t.partitions for s in topology.subtopologies.values() for t in s.repartition_source_topics
              if t.partitions != 0}
    subtopologies = list(topology.subtopologies.values())
    while True:
        needed = progress = False
        for s in subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                widest = None
                for t in s.repartition_source_topics:
                    n = counts.get(t.name)
                    if n is not None and (widest is None or n > widest):
                        widest = n
                for t in s.source_topics:
                    n = count(t)
                    if n is not None and (widest is None or n > widest):
                        widest = n
                if widest is None:
                    needed = True
                else:
                    counts[sink] = widest
                    progress = True
        if not needed:
            break
        if not progress:
            raise _invalid("Failed to compute number of partitions for all repartition topics, make sure all user "
                           "input topics are created and all pattern subscriptions match at least one topic in the "
                           "cluster")
    for s in subtopologies:
        if any(t.name not in counts for t in s.repartition_source_topics):
            raise _invalid("Failed to compute number of partitions for all repartition topics, because a repartition "
                           "source topic is never used as a sink topic.")
    return counts


def _enforce_copartitioning(topology: StreamsTopology, count: Callable[[str], int | None],
                            decided: dict[str, int]) -> None:
    """Kafka's CopartitionedTopicsEnforcer over every copartition group of the topology."""
    fixed = {t.name for s in topology.subtopologies.values() for t in s.repartition_source_topics if t.partitions != 0}
    flexible = {t.name for s in topology.subtopologies.values() for t in s.repartition_source_topics
                if t.partitions == 0}
    for s in topology.subtopologies.values():
        for group in s.copartition_groups:
            topics = {s.source_topics[i] for i in group.source_topics} | {
                s.repartition_source_topics[i].name for i in group.repartition_source_topics}
            if not topics:
                continue
            repartition = {t: _known(count, t) for t in topics if t in fixed or t in flexible}
            others = {t: _known(count, t) for t in topics if t not in repartition}
            if set(repartition) == topics:
                if fixed:
                    # Kafka takes the first of the fixed repartition topics and checks the others against it.
                    sizes = {_known(count, t) for t in fixed}
                    if len(sizes) > 1:
                        raise TopicConfigurationError(
                            Status.INCORRECTLY_PARTITIONED_TOPICS,
                            f"Following topics do not have the same number of partitions: [{_tree_map(repartition)}]")
                    n = sizes.pop()
                else:
                    n = max(repartition.values(), default=0)
                    if n == 0:
                        raise _invalid("All topics in the copartition group had undefined partition number: "
                                       f"[{', '.join(sorted(repartition))}]")
            else:
                sizes = set(others.values())
                if len(sizes) > 1:
                    raise TopicConfigurationError(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Following topics do not have the same number of partitions: [{_tree_map(others)}]")
                n = sizes.pop()
            for topic, current in repartition.items():
                decided[topic] = n
                if topic in fixed and current != n:
                    raise TopicConfigurationError(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Number of partitions [{current}] of repartition topic [{topic}] doesn't match number of "
                        f"partitions [{n}] of the source topic.")


def _tree_map(counts: Mapping[str, int]) -> str:
    """A Java TreeMap's toString, without its braces' content order changing: {a=1, b=2}."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) + "}"


def _configured(s: Subtopology, count: Callable[[str], int | None], decided: Mapping[str, int]) -> ConfiguredSubtopology:
    def internal(t: TopicInfo) -> InternalTopic:
        n = t.partitions if t.partitions != 0 else decided.get(t.name)
        if n is None:
            raise _invalid(f"Number of partitions must be set for topic {t.name}")
        return InternalTopic(t.name, n, t.replication_factor if t.replication_factor != 0 else -1,
                             {c.key: c.value for c in t.topic_configs or ()})

    return ConfiguredSubtopology(
        num_tasks=max(_known(count, t) for t in _inputs(s)),
        source_topics=frozenset(s.source_topics),
        repartition_source_topics={t.name: internal(t) for t in s.repartition_source_topics},
        repartition_sink_topics=frozenset(s.repartition_sink_topics),
        state_changelog_topics={t.name: internal(t) for t in s.state_changelog_topics})
