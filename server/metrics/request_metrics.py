"""What the broker counts as it serves requests, for the metrics endpoint: Kafka's RequestMetrics
(kafka.network: requests by API and version, and the time each took, split as Kafka splits it),
the bytes a fetch sent and the partitions a produce or fetch failed (BrokerTopicStats, with the
appends' counts server/replication/replica_manager.py makes), throttle time by client, and failed
authentications by listener (socket-server-metrics).

The cost per request is one dict lookup and a few adds: the histograms keep a count per bucket
(cumulated only at scrape time) and their sums in nanoseconds. Produce and fetch responses are
walked per partition, never per record.

How Kafka's times map onto Samsa's request path (Kafka's RequestChannel.updateRequestMetrics):
- RequestQueueTimeMs: from the whole request read to its handler starting (header decoded,
  authentication checked): Samsa has no request queue, only this.
- LocalTimeMs: the handler, and the response's encoding, less RemoteTimeMs.
- RemoteTimeMs: time parked (Kafka's purgatory): a long-polling fetch, an acks=all produce waiting
  for the followers, a rebalance (RequestContext.waited_ns).
- ThrottleTimeMs: the throttle time the response carries. Kafka counts the time it held the
  response back, which has been none since KIP-219; Samsa too sends at once and mutes the
  connection for that long, and reports that time here so quotas show. Not part of TotalTimeMs.
- ResponseSendTimeMs: writing the response to the socket.
- TotalTimeMs: from the request read to its response written.
"""

from __future__ import annotations

from bisect import bisect_left

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, request_class

# Histogram buckets, in ms (the upper bounds; +Inf after them).
BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_BOUNDS_NS = tuple(round(ms * 1_000_000) for ms in BUCKETS_MS)
REQUEST_TIMES = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ThrottleTimeMs", "ResponseSendTimeMs",
                 "TotalTimeMs")
_PRODUCE, _FETCH = ApiKey.PRODUCE, ApiKey.FETCH
_BYTES = (bytes, bytearray, memoryview)
# The errors Kafka's ReplicaManager answers without marking FailedProduceRequestsPerSec or
# FailedFetchRequestsPerSec (appendToLocalLog, readFromLog): what clients meet in normal operation
# (a leader moved, a topic not yet known, a record too large), so that a healthy cluster's failure
# rates stay at zero through rolling restarts.
_EXPECTED_PRODUCE_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})
_EXPECTED_FETCH_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_ID})
_THROTTLE_RESOURCES = {"Produce": "Produce", "FetchConsumer": "Fetch"}


class Histogram:
    """Counts by bucket (not cumulative) and the sum of what was observed, in ns."""

    __slots__ = ("counts", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(_BOUNDS_NS) + 1)
        self.sum_ns = 0

    def cumulative_buckets(self) -> list[tuple[str, int]]:
        """Prometheus's (le, count of observations <= le) pairs, +Inf last."""
        buckets, total = [], 0
        for bound, count in zip((*map(str, BUCKETS_MS), "+Inf"), self.counts):
            total += count
            buckets.append((bound, total))
        return buckets


class RequestTimes:
    """The histograms of one request name (Kafka's RequestMetrics of "Produce", "FetchConsumer"...)."""

    __slots__ = ("queue", "local", "remote", "throttle", "send", "total")

    def __init__(self) -> None:
        self.queue = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.throttle = Histogram()
        self.send = Histogram()
        self.total = Histogram()

    def by_name(self) -> dict[str, Histogram]:
        """Kafka's names of the histograms (REQUEST_TIMES' order)."""
        return dict(zip(REQUEST_TIMES, (self.queue, self.local, self.remote, self.throttle, self.send, self.total)))


class RequestCount:
    """Requests of one name and version (Kafka's RequestsPerSec{request, version})."""

    __slots__ = ("name", "version", "count", "times", "throttle_resource")

    def __init__(self, name: str, version: int, times: RequestTimes) -> None:
        self.name = name
        self.version = version
        self.count = 0
        self.times = times
        # The quota Kafka would tag its throttle time with (its quota sensors' type).
        self.throttle_resource = _THROTTLE_RESOURCES.get(name, "Request")


def request_name(api_key: int, from_follower: bool = False) -> str:
    """Kafka's name of a request in RequestMetrics: its API's name, Fetch split by who fetches."""
    if api_key == _FETCH:
        return "FetchFollower" if from_follower else "FetchConsumer"
    return request_class(api_key).__name__.removesuffix("Request")


def _from_follower(request, version: int) -> bool:
    return (request.replica_state.replica_id if version >= 15 else request.replica_id) >= 0


class RequestMetrics:
    def __init__(self) -> None:
        self.requests: dict[int, RequestCount] = {}  # by api_key << 16 | version << 1 | from a follower
        self.times: dict[str, RequestTimes] = {}  # by request name
        self.throttle_time_ms: dict[tuple[str, str], int] = {}  # by (quota resource, client id)
        self.failed_authentication: dict[str, int] = {}  # by listener

    def _new_count(self, key: int, api_key: int, version: int, from_follower: bool) -> RequestCount:
        name = request_name(api_key, from_follower)
        times = self.times.get(name)
        if times is None:
            times = self.times[name] = RequestTimes()
        count = self.requests[key] = RequestCount(name, version, times)
        return count

    def record(self, ctx, request, response, received_ns: int, send_ns: int, sent_ns: int) -> None:
        """A request answered: read whole at `received_ns`, its handler started at ctx.started_ns,
        its response written from `send_ns` to `sent_ns` (both `send_ns` when there was none)."""
        api_key, version = ctx.api_key, ctx.api_version
        from_follower = api_key == _FETCH and _from_follower(request, version)
        key = api_key << 16 | version << 1 | from_follower
        count = self.requests.get(key)
        if count is None:
            count = self._new_count(key, api_key, version, from_follower)
        count.count += 1
        times = count.times
        started, waited = ctx.started_ns, ctx.waited_ns
        throttle_ms = ctx.throttle_time_ms or 0
        # Unrolled, and the first bucket (where queue, remote, throttle and send times mostly
        # fall) found by one comparison: this runs for every request.
        bounds, first = _BOUNDS_NS, _BOUNDS_NS[0]
        h = times.queue
        ns = started - received_ns
        h.counts[0 if ns <= first else bisect_left(bounds, ns)] += 1
        h.sum_ns += ns
        h = times.local
        ns = send_ns - started - waited
        h.counts[0 if ns <= first else bisect_left(bounds, ns)] += 1
        h.sum_ns += ns
        h = times.remote
        h.counts[0 if waited <= first else bisect_left(bounds, waited)] += 1
        h.sum_ns += waited
        h = times.throttle
        ns = throttle_ms * 1_000_000
        h.counts[0 if ns <= first else bisect_left(bounds, ns)] += 1
        h.sum_ns += ns
        h = times.send
        ns = sent_ns - send_ns
        h.counts[0 if ns <= first else bisect_left(bounds, ns)] += 1
        h.sum_ns += ns
        h = times.total
        ns = sent_ns - received_ns
        h.counts[0 if ns <= first else bisect_left(bounds, ns)] += 1
        h.sum_ns += ns
        if throttle_ms:
            client = (count.throttle_resource, ctx.client_id or "")
            self.throttle_time_ms[client] = self.throttle_time_ms.get(client, 0) + throttle_ms
        if response is not None:
            if api_key == _PRODUCE:
                _count_failed_produce(ctx.services.replica_manager.topic_stats, response)
            elif api_key == _FETCH:
                _count_fetched(ctx.services.replica_manager.topic_stats, response, from_follower)

    def authentication_failed(self, listener: str) -> None:
        self.failed_authentication[listener] = self.failed_authentication.get(listener, 0) + 1


def _count_failed_produce(topic_stats, response) -> None:
    """Every partition a produce answered with an unexpected error counts as a failed produce
    request of its topic (of the broker alone when the topic does not exist)."""
    for topic in response.responses:
        for p in topic.partition_responses:
            if p.error_code and p.error_code not in _EXPECTED_PRODUCE_ERRORS:
                topic_stats.of_existing(topic.name).failed_produce_requests += 1


def _count_fetched(topic_stats, response, from_follower: bool) -> None:
    """Kafka's updateBytesOut: the record bytes of each partition, as BytesOut for a consumer and
    ReplicationBytesOut for a follower; and the partitions answered with an error."""
    for topic in response.responses:
        stats = topic_stats.of_existing(topic.topic)
        sent = 0
        for p in topic.partitions:
            if p.error_code and p.error_code not in _EXPECTED_FETCH_ERRORS:
                stats.failed_fetch_requests += 1
            records = p.records
            if records is not None:
                sent += len(records) if isinstance(records, _BYTES) else records.size
        if from_follower:
            stats.replication_bytes_out += sent
        else:
            stats.bytes_out += sent
