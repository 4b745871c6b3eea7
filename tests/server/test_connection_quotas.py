"""Connection limits, as Kafka's ConnectionQuotas: per address closed at once, broker-wide and
per listener waited for; and their configs."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from samsa.server.config.kafka_config import ConfigError, KafkaConfig
from samsa.server.network.connection_quotas import ConnectionQuotas, TooManyConnections
from samsa.wire.errors import ErrorCode

from security_helpers import ApiVersions, closed, config, run
from loopback import Client


async def served(client: Client) -> bool:
    return (await client.call(ApiVersions(), 0)).error_code == ErrorCode.NONE


def test_connections_beyond_max_connections_per_ip_are_closed_at_once(tmp_path):
    async def scenario(broker, ports):
        first, second = await Client.connect(ports["PLAINTEXT"]), await Client.connect(ports["PLAINTEXT"])
        assert await served(first) and await served(second)
        third = await Client.connect(ports["PLAINTEXT"])
        assert await closed(third)
        await first.stream.aclose()
        with trio.fail_after(10):
            while True:  # the broker notices the close on its own schedule
                fourth = await Client.connect(ports["PLAINTEXT"])
                await fourth.send_raw(b"")
                try:
                    if await served(fourth):
                        break
                except AssertionError:
                    await trio.sleep(0.01)
        assert await served(second)

    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0", **{"max.connections.per.ip": "2"}), scenario)


def test_per_ip_overrides(tmp_path):
    async def scenario(broker, ports):
        only = await Client.connect(ports["PLAINTEXT"])
        assert await served(only)
        assert await closed(await Client.connect(ports["PLAINTEXT"]))

    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0", **{"max.connections.per.ip.overrides": "127.0.0.1:1,[::1]:5"}),
        scenario)


def test_max_connections_makes_the_acceptor_wait_for_a_free_slot(tmp_path):
    async def scenario(broker, ports):
        first, second = await Client.connect(ports["PLAINTEXT"]), await Client.connect(ports["PLAINTEXT"])
        assert await served(first) and await served(second)
        third = await Client.connect(ports["PLAINTEXT"])  # the kernel accepts it; the broker waits
        await third.send_raw(b"")
        async with trio.open_nursery() as nursery:
            answered = trio.Event()

            async def call_third():
                assert await served(third)
                answered.set()

            nursery.start_soon(call_third)
            for _ in range(20):  # the broker keeps serving the others meanwhile
                assert await served(second)
            assert not answered.is_set()
            assert broker.connection_quotas.total == 2
            await first.stream.aclose()
            with trio.fail_after(10):
                await answered.wait()

    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0", **{"max.connections": "2"}), scenario)


def test_counts_and_limits_without_a_network():
    quotas = ConnectionQuotas(KafkaConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "max.connections": "3", "listener.name.external.max.connections": "1",
        "max.connections.per.ip": "2", "max.connections.per.ip.overrides": "10.0.0.1:0,::1:4"}))

    async def main():
        await quotas.inc("PLAINTEXT", "127.0.0.1")
        await quotas.inc("EXTERNAL", "::1")
        with pytest.raises(TooManyConnections, match="maximum of 0 connections"):
            await quotas.inc("PLAINTEXT", "10.0.0.1")
        await quotas.inc("PLAINTEXT", "127.0.0.1")
        with pytest.raises(TooManyConnections, match="maximum of 2 connections"):
            await quotas.inc("PLAINTEXT", "127.0.0.1")
        assert (quotas.total, quotas.by_listener, quotas.limit_for("0:0:0:0:0:0:0:1")) == (
            3, {"PLAINTEXT": 2, "EXTERNAL": 1}, 4)
        # The inter-broker listener (PLAINTEXT) is exempt from max.connections, not the others.
        await quotas.inc("PLAINTEXT", "10.0.0.2")
        quotas.dec("EXTERNAL", "::1")
        with trio.move_on_after(1) as waited:  # mock time: gives up once every task is blocked
            await quotas.inc("EXTERNAL", "10.0.0.3")
        assert waited.cancelled_caught
        async with trio.open_nursery() as nursery:
            nursery.start_soon(quotas.inc, "EXTERNAL", "10.0.0.3")
            await trio.testing.wait_all_tasks_blocked()
            quotas.dec("PLAINTEXT", "10.0.0.2")
        assert quotas.by_address == {"127.0.0.1": 2, "10.0.0.3": 1}

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("props, key, message", [
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip", "only if max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides", "found '127.0.0.1'"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:-1"}, "max.connections.per.ip.overrides", "non-negative"),
    ({"max.connections.per.ip.overrides": "no-such-host.invalid:1"}, "max.connections.per.ip.overrides", "resolve"),
])
def test_bad_limits_name_the_key(props, key, message):
    with pytest.raises(ConfigError) as raised:
        ConnectionQuotas(KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:9092", **props}))
    assert raised.value.name == key
    assert message in str(raised.value)


def creation_rate_quotas(**props) -> ConnectionQuotas:
    return ConnectionQuotas(KafkaConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT", **props}))


def test_connection_creation_rate_throttles_as_kafka_measures_it():
    # 11 windows of 1 s, judged over at least 10 s: 20 connections at once are 2 per second.
    quotas = creation_rate_quotas(**{"max.connection.creation.rate": "2"})
    assert [quotas.creation_throttle_ms("EXTERNAL", 0) for _ in range(20)] == [0] * 20
    # 2.1/s: the wait that brings it back to 2/s over the 10 s measured, then capped at one window.
    assert quotas.creation_throttle_ms("EXTERNAL", 0) == 500
    assert quotas.creation_throttle_ms("EXTERNAL", 0) == 1000
    assert quotas.creation_throttle_ms("EXTERNAL", 0) == 1000
    # Once those samples have expired (11 windows on), the rate starts from nothing again.
    assert quotas.creation_throttle_ms("EXTERNAL", 11_000) == 0


def test_the_inter_broker_listener_is_exempt_from_the_broker_wide_creation_rate_only():
    quotas = creation_rate_quotas(**{"max.connection.creation.rate": "1",
                                     "listener.name.plaintext.max.connection.creation.rate": "2"})
    assert [quotas.creation_throttle_ms("PLAINTEXT", 0) for _ in range(20)] == [0] * 20
    assert quotas.creation_throttle_ms("PLAINTEXT", 0) == 500  # its own listener's rate applies
    assert [quotas.creation_throttle_ms("EXTERNAL", 0) for _ in range(10)] == [0] * 10
    assert quotas.creation_throttle_ms("EXTERNAL", 0) == 1000
    unlimited = creation_rate_quotas()
    assert {unlimited.creation_throttle_ms("EXTERNAL", 0) for _ in range(1000)} == {0}
    closed_listener = creation_rate_quotas(**{"listener.name.external.max.connection.creation.rate": "0"})
    assert closed_listener.creation_throttle_ms("EXTERNAL", 0) == 1000


def test_the_acceptor_waits_out_the_creation_throttle_before_counting_a_connection():
    quotas = creation_rate_quotas(**{"max.connection.creation.rate": "2"})

    async def main():
        for _ in range(20):
            await quotas.inc("EXTERNAL", "10.0.0.1")
        assert trio.current_time() == 0
        await quotas.inc("EXTERNAL", "10.0.0.1")
        assert trio.current_time() == 0.5
        assert quotas.total == 21

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_limits_changed_dynamically_apply_to_the_rate_measured_before():
    config = KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
                          "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"})
    quotas = ConnectionQuotas(config)
    assert [quotas.creation_throttle_ms("EXTERNAL", 0) for _ in range(20)] == [0] * 20  # measured all the same
    config.update_dynamic({}, {"listener.name.external.max.connection.creation.rate": "2"})
    assert quotas.creation_throttle_ms("EXTERNAL", 0) == 500
    config.update_dynamic({"max.connection.creation.rate": "1"}, {})
    assert quotas.creation_throttle_ms("EXTERNAL", 0) == 1000  # the broker-wide rate saw them too
    config.update_dynamic({}, {})
    assert quotas.creation_throttle_ms("EXTERNAL", 0) == 0
    config.update_dynamic({}, {"max.connections.per.ip.overrides": "10.0.0.1:7"})
    assert (quotas.limit_for("10.0.0.1"), quotas.limit_for("10.0.0.2")) == (7, 2147483647)


def test_a_raised_max_connections_wakes_the_waiting_acceptor():
    config = KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:9092", "max.connections": "1"})
    quotas = ConnectionQuotas(config)

    async def main():
        await quotas.inc("PLAINTEXT", "127.0.0.1")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(quotas.inc, "PLAINTEXT", "127.0.0.1")
            await trio.testing.wait_all_tasks_blocked()
            assert quotas.total == 1
            config.update_dynamic({}, {"max.connections": "2"})
            quotas.reconfigure()
        assert quotas.total == 2 and trio.current_time() == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
