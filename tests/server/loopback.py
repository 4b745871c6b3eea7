"""What the server tests share: a broker in-process on a loopback port, a raw client speaking
Samsa's own codec (samsa.client, so a test can also send what real clients never would), and the
requests most tests make."""

from __future__ import annotations

import trio

from samsa.client.connection import BrokerConnection
from samsa.client.errors import BrokerUnreachable
from samsa.client.framing import SIZE  # noqa: F401 - for the tests that frame bytes by hand
from samsa.server.broker import Broker
from samsa.server.config.kafka_config import KafkaConfig
from samsa.wire import records
from samsa.wire.protocol import ApiKey, request_class

def broker_config(tmp_path, **overrides) -> KafkaConfig:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return KafkaConfig(props)


def run_broker(config: KafkaConfig, scenario, clock: trio.abc.Clock | None = None) -> None:
    """Start a broker, run `scenario(port)` against it, then stop the broker (always)."""
    run_with_broker(config, lambda broker: scenario(broker.endpoints[0].port), clock)


def run_with_broker(config: KafkaConfig, scenario, clock: trio.abc.Clock | None = None) -> None:
    """Start a broker, run `scenario(broker)` against it, then stop the broker (always). `clock`:
    trio's clock for the run (a MockClock makes waits exact and free)."""

    async def main():
        broker = Broker(config)
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            try:
                await scenario(broker)
            finally:
                nursery.cancel_scope.cancel()

    trio.run(main, clock=clock)


class Client(BrokerConnection):
    """Samsa's own client (client/connection.py) without a deadline (tests bound their scenarios
    themselves, some on a MockClock), plus what only a test does: send any bytes, and read a frame
    as it comes."""

    def __init__(self, stream: trio.abc.Stream, client_id: str = "test") -> None:
        super().__init__(stream, client_id, timeout_ms=None)

    @classmethod
    async def connect(cls, port: int, client_id: str = "test") -> "Client":
        return cls(await trio.open_tcp_stream("127.0.0.1", port), client_id)

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_frame(self) -> bytes | None:
        """The next frame body, or None when the broker closed the connection; a reset (or a TLS
        alert) is trio.BrokenResourceError, as trio's streams raise it."""
        try:
            return bytes(await self._read_frame())
        except BrokerUnreachable:
            return None
        except OSError as e:  # read from the socket's descriptor: trio's stream would have wrapped it
            raise trio.BrokenResourceError(str(e)) from e


def produce_request(topic: str, batch: bytes, acks: int = 1):
    Produce = request_class(ApiKey.PRODUCE)
    return Produce(acks=acks, timeout_ms=5000, topic_data=[
        Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])


def fetch_request(topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1):
    Fetch = request_class(ApiKey.FETCH)
    return Fetch(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
                 session_id=0, session_epoch=-1, topics=[Fetch.FetchTopic(topic=topic, partitions=[
                     Fetch.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def one_batch(values: list[bytes]) -> bytes:
    return records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate(values)])


def create_topic_request(name: str, partitions: int = 1):
    Create = request_class(ApiKey.CREATE_TOPICS)
    return Create(topics=[Create.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
                  timeout_ms=5000)
