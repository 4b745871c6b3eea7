"""Quota math on an explicit clock: Kafka's sampled rates, throttle times, precedence of entities,
token buckets for controller mutations, connection rates per IP."""

from __future__ import annotations

import pytest

from samsa.coordinator.client_quotas import (CONNECTION_CREATION_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
                                             REQUEST_PERCENTAGE, quota_entity)
from samsa.coordinator.quota_manager import (INACTIVE_SENSOR_EXPIRATION_MS, ClientQuotaManager, ConnectionRateQuota,
                                             ControllerMutationQuotaManager, Rate, Window, java_round)

KAFKA_DEFAULT = Window(samples=11, size_ms=1000)


def producer_quotas(*entities_and_rates):
    return {entity: {PRODUCER_BYTE_RATE: rate} for entity, rate in entities_and_rates}


def test_a_young_rate_counts_the_windows_it_has_not_lived_yet_as_empty():
    rate = Rate(KAFKA_DEFAULT)
    rate.record(1000, 0)
    # (samples - 1) whole windows at least: 1000 bytes over 10 s.
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == 100.0
    rate.record(1000, 3_500)
    assert rate.window_size_ms(3_500) == 10_500  # 3 full windows lived, 7 assumed, half of the 4th
    assert rate.measure(3_500) == pytest.approx(2000 / 10.5)


def test_a_rate_forgets_samples_older_than_its_windows():
    rate = Rate(Window(samples=3, size_ms=1000))
    rate.record(900, 0)
    rate.record(300, 1_000)
    # From the oldest sample on, and at least samples - 1 whole windows: 1.5 s + one more window.
    assert rate.measure(1_500) == pytest.approx(1200 / 2.5)
    # At 3 s the first sample (last event at 0) is 3 windows old: gone.
    assert rate.measure(3_000) == pytest.approx(300 / 2.0)
    assert rate.measure(10_000) == 0.0


def test_throttle_time_is_the_quiet_time_that_brings_the_rate_back_to_the_quota():
    quotas = producer_quotas((quota_entity(client_id="c"), 10.0))
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    assert manager.record("ANONYMOUS", "c", 100, 0) == 0  # 10 B/s: at the bound, not over it
    # 300 B over 10 s is 30 B/s: (30 - 10) / 10 * 10 s.
    assert manager.record("ANONYMOUS", "c", 200, 0) == 20_000
    assert manager.record("ANONYMOUS", "other", 10_000, 0) == 0  # no quota for that client-id


def test_java_rounding_of_throttle_times():
    assert (java_round(0.5), java_round(1.5), java_round(2.5), java_round(-0.5)) == (1, 2, 3, 0)


def test_request_time_throttle_is_capped_at_one_window_and_byte_rates_are_not():
    quotas = {quota_entity(client_id=None): {REQUEST_PERCENTAGE: 1.0, PRODUCER_BYTE_RATE: 1.0}}
    request = ClientQuotaManager(REQUEST_PERCENTAGE, quotas, KAFKA_DEFAULT, max_throttle_ms=1000)
    produce = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    assert request.record("u", "c", 500.0, 0) == 1000
    assert produce.record("u", "c", 500.0, 0) == 490_000  # 50 B/s against 1 over 10 s


def test_a_client_that_waits_out_its_throttle_times_is_held_at_its_quota():
    quotas = producer_quotas((quota_entity(client_id="slow"), 1_000_000))
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    now, sent = 0, 0
    while now < 120_000:
        sent += 100_000
        throttle_ms = manager.record("ANONYMOUS", "slow", 100_000, now)
        now += max(throttle_ms, 5)  # a fast client: 20 MB/s were it not throttled
    # After the first burst (about samples - 1 windows' worth), 1 MB/s.
    assert sent / (now / 1000) == pytest.approx(1_000_000, rel=0.1)


def test_precedence_of_the_eight_entity_levels():
    levels = [
        (quota_entity(user="alice", client_id="app"), 1),
        (quota_entity(user="alice", client_id=None), 2),
        (quota_entity(user="alice"), 3),
        (quota_entity(user=None, client_id="app"), 4),
        (quota_entity(user=None, client_id=None), 5),
        (quota_entity(user=None), 6),
        (quota_entity(client_id="app"), 7),
        (quota_entity(client_id=None), 8),
    ]
    quotas = producer_quotas(*levels)
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    for entity, expected in levels:
        manager.refresh()
        assert manager.quota("alice", "app") == expected
        del quotas[entity]
    manager.refresh()
    assert manager.quota("alice", "app") is None


def test_user_and_client_id_levels_apply_by_what_the_client_is():
    quotas = producer_quotas((quota_entity(user="alice"), 100), (quota_entity(client_id=None), 7))
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    assert manager.quota("alice", "app") == 100
    assert manager.quota("bob", "app") == 7  # no user level for bob: the client-id default
    assert manager.quota("bob", None) is None  # a client without an id has no client-id level


def test_who_shares_a_measured_rate():
    quotas = producer_quotas((quota_entity(user="alice"), 100), (quota_entity(client_id=None), 100))
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    # All of alice's clients share her rate; under the client-id default each client-id has its own.
    assert manager.metric_tags("alice", "a") == manager.metric_tags("alice", "b") == ("alice", "")
    assert manager.metric_tags("bob", "a") == ("", "a") != manager.metric_tags("bob", "b")
    manager.record("alice", "a", 1500, 0)
    assert manager.record("alice", "b", 1, 0) > 0
    manager.record("bob", "a", 1500, 0)
    assert manager.record("bob", "b", 1, 0) == 0


def test_a_changed_quota_applies_to_a_client_already_measured():
    quotas = producer_quotas((quota_entity(client_id="c"), 1000))
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    assert manager.record("u", "c", 5000, 0) == 0
    quotas[quota_entity(client_id="c")] = {PRODUCER_BYTE_RATE: 100}
    manager.refresh()
    assert manager.record("u", "c", 0, 0) == 40_000  # 500 B/s against 100
    del quotas[quota_entity(client_id="c")]
    manager.refresh()
    assert not manager.enabled and manager.record("u", "c", 10**9, 0) == 0


def test_unrecord_takes_a_value_back_and_max_value_in_window():
    quotas = producer_quotas((quota_entity(client_id="c"), 100))
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    assert manager.record("u", "c", 5000, 0) > 0
    manager.unrecord("u", "c", 5000, 0)
    assert manager.record("u", "c", 1000, 0) == 0
    assert manager.max_value_in_window("u", "c") == 100 * 10
    assert manager.max_value_in_window("u", "other") is None


def test_idle_clients_are_forgotten_after_an_hour():
    quotas = producer_quotas((quota_entity(client_id=None), 100))
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, KAFKA_DEFAULT)
    manager.record("u", "a", 1, 0)
    manager.record("u", "b", 1, INACTIVE_SENSOR_EXPIRATION_MS + 1)
    assert set(manager.sensors) == {("", "b")}


TWO_SECOND_WINDOW = Window(samples=2, size_ms=1000)


def mutations(rate: float, window=TWO_SECOND_WINDOW):
    quotas = {quota_entity(user=None): {CONTROLLER_MUTATION_RATE: rate}}
    return ControllerMutationQuotaManager(quotas, window)


def test_strict_mutation_quota_refuses_only_once_the_bucket_is_empty():
    manager = mutations(rate=5.0)  # burst: 2 windows of 1 s at 5/s = 10 tokens
    quota = manager.new_quota("u", "c", strict=True, now_ms=0)
    assert quota.record(12, 0)  # the bucket had tokens: accepted, now -2
    assert quota.throttle_time_ms(0) == 0
    assert not quota.record(1, 0)  # exhausted: refused, 2 tokens short at 5/s
    assert quota.throttle_time_ms(0) == 400
    assert quota.throttle_time_ms(300) == 100  # a response sent later carries what is left
    later = manager.new_quota("u", "c", strict=True, now_ms=400)
    assert later.record(1, 400)  # refilled to 0: accepted again


def test_permissive_mutation_quota_accepts_and_throttles():
    manager = mutations(rate=5.0)
    quota = manager.new_quota("u", "c", strict=False, now_ms=0)
    assert quota.record(8, 0) and quota.throttle_time_ms(0) == 0
    assert quota.record(7, 0)
    assert quota.throttle_time_ms(0) == 1000  # 5 tokens short at 5/s


def test_mutation_quota_applies_the_user_default_and_none_is_unbounded():
    quota = mutations(rate=1.0).new_quota("u", None, strict=True, now_ms=0)
    assert quota.record(10, 0) and not quota.record(1, 0)  # no client-id: the user default still applies
    unbounded = ControllerMutationQuotaManager({}).new_quota("u", "c", strict=True, now_ms=0)
    assert all(unbounded.record(10**6, 0) for _ in range(3)) and unbounded.throttle_time_ms(0) == 0


def test_connection_rate_per_ip_refuses_and_does_not_count_refused_connections():
    quotas = {quota_entity(ip="10.0.0.1"): {CONNECTION_CREATION_RATE: 2},
              quota_entity(ip=None): {CONNECTION_CREATION_RATE: 1000}}
    limiter = ConnectionRateQuota(quotas, Window(samples=2, size_ms=1000))
    # 2/s over at least one window: the third connection in the first second is over, 3/s: (3-2)/2 s.
    assert [limiter.record_connection("10.0.0.1", 0) for _ in range(3)] == [0, 0, 500]
    assert limiter.record_connection("10.0.0.1", 100) > 0  # 3 in 1.1 s: still over
    assert limiter.record_connection("10.0.0.1", 500) == 0  # 3 in 1.5 s: the refused ones did not count
    assert limiter.record_connection("10.0.0.2", 0) == 0  # the default applies, and is far off
    assert ConnectionRateQuota({}).record_connection("10.0.0.1", 0) == 0
