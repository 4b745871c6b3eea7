"""Kafka's BrokerTopicStats: per-topic counters of what the broker took in and sent out, counted
where it happens (a partition's append, a fetch's response) at the cost of an attribute add each.
Read at scrape time; the broker-wide figures (Kafka's all-topics meters) are the sum of the topics'
plus what topics since deleted, or never created, had counted, so no append pays for two adds."""

from __future__ import annotations

_FIELDS = ("bytes_in", "messages_in", "bytes_out", "replication_bytes_in", "replication_bytes_out",
           "failed_produce_requests", "failed_fetch_requests")


class TopicStats:
    """One topic's counters (Kafka's BrokerTopicMetrics of the topic)."""

    __slots__ = _FIELDS
    # _FIELDS' types, for a type checker (the loops below set them by name)
    bytes_in: int
    messages_in: int
    bytes_out: int
    replication_bytes_in: int
    replication_bytes_out: int
    failed_produce_requests: int
    failed_fetch_requests: int

    def __init__(self) -> None:
        for name in _FIELDS:
            setattr(self, name, 0)

    def add(self, other: TopicStats) -> None:
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class BrokerTopicStats:
    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        # Counted for topics deleted since, and failures naming a topic that does not exist (not
        # given a series of their own: any client could make up topic names without end).
        self.unattributed = TopicStats()

    def of(self, topic: str) -> TopicStats:
        """The topic's counters, created on first use (a partition of it is opened)."""
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = TopicStats()
        return stats

    def of_existing(self, topic: str) -> TopicStats:
        """The topic's counters if a partition of it was opened here; the unattributed ones otherwise."""
        return self.topics.get(topic) or self.unattributed

    def remove(self, topic: str) -> None:
        """The topic was deleted: its series goes (as Kafka removes its metrics); its counts stay in
        the broker-wide totals."""
        stats = self.topics.pop(topic, None)
        if stats is not None:
            self.unattributed.add(stats)

    def all_topics(self) -> TopicStats:
        total = TopicStats()
        total.add(self.unattributed)
        for stats in self.topics.values():
            total.add(stats)
        return total
