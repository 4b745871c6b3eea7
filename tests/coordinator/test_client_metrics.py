"""The client telemetry state machine (KIP-714's ClientMetricsManager) with an explicit clock:
subscription ids as Kafka computes them, matching, the push interval rules, terminating pushes,
the size limit, and instance expiry."""

from __future__ import annotations

import base64
import itertools
import re
import uuid

from samsa.coordinator.client_metrics import (
    DEFAULT_INTERVAL_MS,
    ClientAttributes,
    ClientMetricsManager,
    Subscription,
    java_hash_order,
    java_string_hash,
    java_uuid_hash,
    kafka_uuid_string,
    subscription_id,
)
from samsa.wire.errors import ErrorCode

ZERO = uuid.UUID(int=0)
ID = uuid.UUID(bytes=base64.urlsafe_b64decode("r1x2Ea0vRz-KzQ2Kq7LtgA=="))
PRODUCER, CONSUMER = "org.apache.kafka.producer.", "org.apache.kafka.consumer."
GZIP, BOGUS_CODEC = 1, 9


def client(client_id="app", connection="c1", software=("librdkafka", "2.16.0")) -> ClientAttributes:
    return ClientAttributes(client_id, *software, "127.0.0.1", 50000, connection)


def manager(max_bytes=1024, ids=None) -> ClientMetricsManager:
    counter = itertools.count(1)
    return ClientMetricsManager(max_bytes, new_uuid=ids or (lambda: uuid.UUID(int=next(counter) << 64 | 7)))


# --- Java's hashing: the values below are what Kafka 4.4's classes compute (Crc32C, Uuid, HashSet) ---


def test_subscription_ids_are_kafkas():
    assert java_string_hash("hello") == 99162322
    assert java_uuid_hash(ID) == 588042532
    assert subscription_id(java_hash_order([PRODUCER, CONSUMER]), 300000, ID) == 610029016
    zero_hash = uuid.UUID(bytes=bytes(range(16)))  # its two halves XOR to a hash of 0
    metrics = ["b", "a", "org.apache.kafka.producer.node.request.latency.", "c.d.e", "zz", "org.apache.kafka.consumer.poll."]
    assert java_hash_order(metrics) == ["zz", "a", "b", "c.d.e", "org.apache.kafka.producer.node.request.latency.",
                                        "org.apache.kafka.consumer.poll."]
    assert subscription_id(java_hash_order(metrics), 1000, zero_hash) == -728657274
    assert subscription_id(["*"], 300000, zero_hash) == 1012207395
    assert subscription_id([], 1000, zero_hash) == 1788331976
    # Past 12 names the table doubles to 32 buckets.
    many = java_hash_order([f"org.apache.kafka.metric{i}." for i in range(14)])
    assert [int(name[len("org.apache.kafka.metric"):-1]) for name in many] == [0, 3, 4, 1, 2, 7, 8, 5, 10, 6, 11, 9, 12, 13]


def test_kafka_uuid_string():
    assert kafka_uuid_string(ID) == "r1x2Ea0vRz-KzQ2Kq7LtgA"


# --- GetTelemetrySubscriptions --------------------------------------------------------------------


def test_a_new_client_gets_an_id_and_the_matching_subscriptions():
    m = manager(max_bytes=2048)
    m.update_subscription("producers", Subscription("producers", (PRODUCER,), 1000))
    m.update_subscription("others", Subscription("others", (CONSUMER,), 5000, {"client_id": re.compile("other.*")}))
    answer = m.get_subscriptions(0, ZERO, client())
    assert answer.error_code == ErrorCode.NONE
    assert answer.client_instance_id == uuid.UUID(int=1 << 64 | 7)
    assert answer.requested_metrics == (PRODUCER,)
    assert answer.push_interval_ms == 1000
    assert answer.telemetry_max_bytes == 2048
    assert answer.accepted_compression_types == (4, 3, 1, 2)  # zstd, lz4, gzip, snappy, Kafka's order
    assert answer.delta_temporality is True
    assert answer.subscription_id == subscription_id([PRODUCER], 1000, answer.client_instance_id)


def test_overlapping_subscriptions_merge_and_a_star_means_all():
    m = manager()
    m.update_subscription("a", Subscription("a", (PRODUCER, CONSUMER), 2000))
    m.update_subscription("b", Subscription("b", (CONSUMER,), 1000))
    answer = m.get_subscriptions(0, ID, client())
    assert answer.client_instance_id == ID  # a client's own id is kept
    assert answer.requested_metrics == tuple(java_hash_order([PRODUCER, CONSUMER]))
    assert answer.push_interval_ms == 1000
    m.update_subscription("all", Subscription("all", ("*", "x."), 3000))
    assert m.get_subscriptions(1000, ID, client()).requested_metrics == ("*",)


def test_no_subscription_is_the_default_interval_and_no_metrics():
    answer = manager().get_subscriptions(0, ID, client())
    assert (answer.requested_metrics, answer.push_interval_ms) == ((), DEFAULT_INTERVAL_MS)
    assert answer.subscription_id == subscription_id([], DEFAULT_INTERVAL_MS, ID)


def test_match_patterns_must_all_match_whole_attributes():
    m = manager()
    m.update_subscription("s", Subscription("s", (PRODUCER,), 1000, {
        "client_software_name": re.compile("librdkafka"), "client_id": re.compile("app")}))
    assert m.get_subscriptions(0, uuid.UUID(int=11 << 64), client("app")).requested_metrics == (PRODUCER,)
    assert m.get_subscriptions(0, uuid.UUID(int=12 << 64), client("app2")).requested_metrics == ()
    assert m.get_subscriptions(0, uuid.UUID(int=13 << 64), client("app", software=(None, None))).requested_metrics == ()
    m.update_subscription("by-id", Subscription("by-id", (CONSUMER,), 1000, {
        "client_instance_id": re.compile(re.escape(kafka_uuid_string(ID)))}))
    assert m.get_subscriptions(0, ID, client("other")).requested_metrics == (CONSUMER,)


def test_a_second_get_within_the_interval_is_throttled_unless_the_subscriptions_changed():
    m = manager()
    m.update_subscription("s", Subscription("s", (PRODUCER,), 1000))
    assert m.get_subscriptions(0, ID, client()).error_code == ErrorCode.NONE
    early = m.get_subscriptions(999, ID, client())
    assert early.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert "arrived before the next push interval time" in early.message
    assert m.get_subscriptions(1000, ID, client()).error_code == ErrorCode.NONE
    # A changed subscription is a new instance: its times start over, so the client learns it at once.
    m.update_subscription("s", Subscription("s", (CONSUMER,), 1000))
    changed = m.get_subscriptions(1001, ID, client())
    assert (changed.error_code, changed.requested_metrics) == (ErrorCode.NONE, (CONSUMER,))


def test_deleting_a_subscription_re_evaluates_clients():
    m = manager()
    m.update_subscription("s", Subscription("s", (PRODUCER,), 1000))
    first = m.get_subscriptions(0, ID, client())
    m.update_subscription("s", None)
    m.update_subscription("never-set", None)
    after = m.get_subscriptions(1, ID, client())
    assert after.requested_metrics == () and after.subscription_id != first.subscription_id


# --- PushTelemetry --------------------------------------------------------------------------------


def subscribed(m, interval_ms=1000, now_ms=0):
    m.update_subscription("s", Subscription("s", (PRODUCER,), interval_ms))
    return m.get_subscriptions(now_ms, ID, client()).subscription_id


def test_the_first_push_after_a_get_is_accepted_early_the_next_one_waits_an_interval():
    m = manager()
    sid = subscribed(m)
    assert m.push(10, ID, sid, False, GZIP, 100, client()).error_code == ErrorCode.NONE
    assert m.push(1009, ID, sid, False, GZIP, 100, client()).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert m.push(1010, ID, sid, False, GZIP, 100, client()).error_code == ErrorCode.NONE
    # The Get after a push waits an interval from that push too.
    assert m.get_subscriptions(1500, ID, client()).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_push_errors_in_kafkas_order():
    m = manager(max_bytes=100)
    sid = subscribed(m)
    assert m.push(0, ZERO, sid, False, 0, 0, client()).error_code == ErrorCode.INVALID_REQUEST
    assert m.push(0, uuid.UUID(int=1), sid, False, 0, 0, client()).error_code == ErrorCode.INVALID_REQUEST
    assert m.push(0, ID, sid + 1, False, 0, 0, client()).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    # The push above used up the first-after-Get allowance.
    assert m.push(1000, ID, sid, False, BOGUS_CODEC, 0, client()).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    too_large = m.push(2000, ID, sid, False, 0, 101, client())
    assert too_large.error_code == ErrorCode.TELEMETRY_TOO_LARGE
    assert too_large.message.endswith("is larger than the maximum allowed size [100]")
    assert m.push(3000, ID, sid, False, 0, 100, client()).error_code == ErrorCode.NONE


def test_a_push_from_an_unknown_instance_creates_it_and_learns_its_subscription_id_is_stale():
    m = manager()
    m.update_subscription("s", Subscription("s", (PRODUCER,), 1000))
    assert m.push(0, ID, 42, False, 0, 10, client()).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert ID in m.instances


def test_a_terminating_push_is_accepted_early_and_is_the_last():
    m = manager()
    sid = subscribed(m)
    assert m.push(0, ID, sid, False, 0, 10, client()).error_code == ErrorCode.NONE
    assert m.push(1, ID, sid, True, 0, 10, client()).error_code == ErrorCode.NONE
    after = m.push(5000, ID, sid, False, 0, 10, client())
    assert after.error_code == ErrorCode.INVALID_REQUEST
    assert "terminating to TRUE" in after.message


def test_a_refused_terminating_push_still_ends_the_session():
    m = manager()
    sid = subscribed(m)
    assert m.push(0, ID, sid + 1, True, 0, 10, client()).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert m.push(5000, ID, sid, False, 0, 10, client()).error_code == ErrorCode.INVALID_REQUEST


# --- instance lifetime ----------------------------------------------------------------------------


def test_instances_expire_after_three_intervals_or_a_minute_and_go_with_their_connection():
    m = manager()
    m.update_subscription("s", Subscription("s", (PRODUCER,), 30_000))
    m.get_subscriptions(0, ID, client(connection="c1"))
    other = uuid.UUID(int=99 << 64)
    m.get_subscriptions(0, other, client(connection="c2"))
    assert m.expire(89_999) == []
    assert m.disconnected("c2") == other
    assert m.disconnected("c2") is None
    assert m.expire(90_000) == [ID]
    assert not m.instances
    short = manager()
    short.get_subscriptions(0, ID, client())
    short.update_subscription("s", Subscription("s", (PRODUCER,), 100))
    short.get_subscriptions(10, ID, client())  # re-evaluated: 3 x 100 ms is less than a minute
    assert short.expire(60_009) == [] and short.expire(60_010) == [ID]


def test_the_cache_keeps_the_most_recently_used_instances():
    m = manager()
    m.cache_max_size = 2
    ids = [uuid.UUID(int=(i + 100) << 64) for i in range(3)]
    for i, client_instance_id in enumerate(ids):
        m.get_subscriptions(i, client_instance_id, client(connection=f"c{i}"))
    assert list(m.instances) == ids[1:]


def test_new_ids_are_never_reserved_in_use_or_dash_led():
    dash_led = uuid.UUID(bytes=base64.urlsafe_b64decode("-" + "A" * 21 + "=="))
    queue = iter([ZERO, uuid.UUID(int=1), dash_led, ID, ID, uuid.UUID(int=5 << 64)])
    m = manager(ids=lambda: next(queue))
    assert m.get_subscriptions(0, ZERO, client()).client_instance_id == ID
    assert m.get_subscriptions(0, ZERO, client(connection="c2")).client_instance_id == uuid.UUID(int=5 << 64)
