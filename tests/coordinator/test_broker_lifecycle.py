"""The KRaft broker's lifecycle (coordinator/broker_lifecycle.py), driven with an explicit clock:
Kafka 4.4's BrokerLifecycleManager's states and timings."""

from __future__ import annotations

import math
import uuid

from samsa.coordinator.broker_lifecycle import (
    BrokerLifecycle, BrokerState, SendHeartbeat, SendRegistration, ShutDown)

NONE, STALE_BROKER_EPOCH = 0, 77


def registered(now: int = 0) -> BrokerLifecycle:
    lifecycle = BrokerLifecycle(heartbeat_interval_ms=2000, initial_registration_timeout_ms=60000)
    assert lifecycle.start(now) == [SendRegistration()]
    assert lifecycle.registration_response(now + 5, NONE, broker_epoch=42) == []
    return lifecycle


def test_registration_then_fenced_until_caught_up_then_unfenced():
    lifecycle = registered()
    assert lifecycle.state == BrokerState.STARTING and lifecycle.broker_epoch == 42
    assert lifecycle.deadline == 5  # the first heartbeat at once
    lifecycle.metadata_applied(7)
    assert lifecycle.poll(5) == [SendHeartbeat(42, 7, want_fence=True, want_shut_down=False)]
    assert lifecycle.deadline == math.inf  # one in flight
    lifecycle.heartbeat_response(8, NONE, is_caught_up=False)
    assert lifecycle.state == BrokerState.STARTING and lifecycle.deadline == 18  # every 10 ms while starting
    assert lifecycle.poll(17) == []
    assert lifecycle.poll(18) == [SendHeartbeat(42, 7, True, False)]
    lifecycle.heartbeat_response(20, NONE, is_caught_up=True)
    assert lifecycle.state == BrokerState.RECOVERY and lifecycle.caught_up
    lifecycle.ready_to_unfence(21)
    assert lifecycle.poll(21) == [SendHeartbeat(42, 7, want_fence=False, want_shut_down=False)]
    lifecycle.heartbeat_response(23, NONE, is_caught_up=True, is_fenced=False)
    assert lifecycle.state == BrokerState.RUNNING and lifecycle.unfenced
    assert lifecycle.deadline == 2023  # broker.heartbeat.interval.ms from now on
    assert lifecycle.poll(2023) == [SendHeartbeat(42, 7, False, False)]


def test_failures_are_retried_after_the_interval():
    lifecycle = BrokerLifecycle(heartbeat_interval_ms=2000, initial_registration_timeout_ms=60000)
    lifecycle.start(0)
    lifecycle.registration_response(3, None)  # no answer
    assert lifecycle.deadline == 2003
    assert lifecycle.poll(2003) == [SendRegistration()]
    lifecycle.registration_response(2004, NONE, broker_epoch=9)
    assert lifecycle.poll(2004) == [SendHeartbeat(9, -1, True, False)]
    lifecycle.heartbeat_response(2005, STALE_BROKER_EPOCH)
    assert lifecycle.deadline == 4005


def test_not_registered_in_time_shuts_down():
    lifecycle = BrokerLifecycle(heartbeat_interval_ms=2000, initial_registration_timeout_ms=5000)
    lifecycle.start(0)
    lifecycle.registration_response(1, 99)  # an error: retried after the interval
    assert lifecycle.poll(2001) == [SendRegistration()]
    lifecycle.registration_response(2002, 99)
    assert lifecycle.deadline == 4002
    lifecycle.poll(4002)
    lifecycle.registration_response(4003, 99)
    assert lifecycle.deadline == 5000
    assert lifecycle.poll(5000) == [ShutDown("unable to register with the controller quorum")]
    assert lifecycle.state == BrokerState.SHUTTING_DOWN and lifecycle.deadline == math.inf


def test_ready_to_unfence_while_a_heartbeat_is_in_flight_sends_the_next_at_once():
    lifecycle = registered()
    lifecycle.poll(5)
    lifecycle.heartbeat_response(6, NONE, is_caught_up=True)
    assert lifecycle.poll(16) == [SendHeartbeat(42, -1, True, False)]
    lifecycle.ready_to_unfence(17)  # in flight: after its answer, not 2 s later
    lifecycle.heartbeat_response(18, NONE, is_caught_up=True, is_fenced=True)
    assert lifecycle.deadline == 18
    assert lifecycle.poll(18) == [SendHeartbeat(42, -1, False, False)]


def running() -> BrokerLifecycle:
    lifecycle = registered()
    lifecycle.poll(5)
    lifecycle.heartbeat_response(6, NONE, is_caught_up=True)
    lifecycle.ready_to_unfence(6)
    lifecycle.poll(6)
    lifecycle.heartbeat_response(7, NONE, is_caught_up=True, is_fenced=False)
    assert lifecycle.state == BrokerState.RUNNING
    return lifecycle


def test_controlled_shutdown_waits_for_the_controller():
    lifecycle = running()
    assert lifecycle.begin_controlled_shutdown(100) == []
    assert lifecycle.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN
    assert lifecycle.poll(100) == [SendHeartbeat(42, -1, False, want_shut_down=True)]
    lifecycle.heartbeat_response(101, NONE, is_fenced=False, should_shut_down=False)
    assert lifecycle.deadline == 151  # 50 ms until the first answer came, then the interval
    lifecycle.poll(151)
    lifecycle.heartbeat_response(152, NONE, is_fenced=False, should_shut_down=False)
    assert lifecycle.deadline == 2152
    lifecycle.poll(2152)
    assert lifecycle.heartbeat_response(2153, NONE, should_shut_down=True) == [
        ShutDown("the controller has asked us to exit controlled shutdown")]
    assert lifecycle.state == BrokerState.SHUTTING_DOWN


def test_shutdown_before_running_is_immediate():
    lifecycle = registered()
    assert lifecycle.begin_controlled_shutdown(10) == [
        ShutDown("skipping controlled shutdown because we are in state STARTING")]


def test_reregister_after_the_controller_forgot_the_broker():
    lifecycle = running()
    lifecycle.reregister(50)
    assert lifecycle.poll(50) == [SendRegistration()]
    lifecycle.registration_response(51, NONE, broker_epoch=43)
    assert lifecycle.poll(51) == [SendHeartbeat(43, -1, False, False)]


def test_a_failed_log_dir_is_named_in_every_heartbeat_the_next_at_once():
    """Kafka's propagateDirectoryFailure: the directory goes in offline_log_dirs from then on."""
    d1, d2 = uuid.UUID(int=1), uuid.UUID(int=2)
    lifecycle = running()  # the next heartbeat due at 2007
    lifecycle.directory_failed(100, d2, timeout_ms=30000)
    assert lifecycle.deadline == 100
    assert lifecycle.poll(100) == [SendHeartbeat(42, -1, False, False, offline_log_dirs=(d2,))]
    lifecycle.heartbeat_response(101, NONE, is_fenced=False)
    assert lifecycle.offline_dirs == {d2: True}
    lifecycle.directory_failed(200, d1, timeout_ms=30000)
    assert lifecycle.poll(200) == [SendHeartbeat(42, -1, False, False, offline_log_dirs=(d2, d1))]
    lifecycle.heartbeat_response(201, NONE, is_fenced=False)
    assert lifecycle.poll(2201) == [SendHeartbeat(42, -1, False, False, offline_log_dirs=(d2, d1))]
    assert lifecycle.poll(30200) == []  # both answered in time: no shutdown at their deadlines
    assert lifecycle.state == BrokerState.RUNNING


def test_a_failed_log_dir_the_controller_did_not_hear_of_in_time_shuts_the_broker_down():
    """Kafka's OfflineDirBrokerFailureEvent after log.dir.failure.timeout.ms."""
    d1 = uuid.UUID(int=1)
    lifecycle = running()
    lifecycle.directory_failed(100, d1, timeout_ms=1000)
    assert lifecycle.poll(100) == [SendHeartbeat(42, -1, False, False, offline_log_dirs=(d1,))]
    lifecycle.heartbeat_response(150, None)  # no answer
    assert lifecycle.deadline == 1100
    assert lifecycle.poll(1100) == [ShutDown(f"couldn't communicate offline log dir {d1} with controllers")]
    assert lifecycle.state == BrokerState.SHUTTING_DOWN


def test_a_log_dir_failed_before_registration_waits_for_the_first_heartbeat():
    d1 = uuid.UUID(int=1)
    lifecycle = BrokerLifecycle(heartbeat_interval_ms=2000, initial_registration_timeout_ms=60000)
    lifecycle.start(0)
    lifecycle.directory_failed(1, d1, timeout_ms=30000)
    assert lifecycle.poll(1) == []  # the registration is in flight
    lifecycle.registration_response(5, NONE, broker_epoch=42)
    assert lifecycle.poll(5) == [SendHeartbeat(42, -1, True, False, offline_log_dirs=(d1,))]
