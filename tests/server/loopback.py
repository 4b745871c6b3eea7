"""What the server tests share: a broker in-process on a loopback port, a raw client speaking
Samsa's own codec (so a test can send what real clients never would), and the requests most tests
make."""

from __future__ import annotations

import struct

import trio

from samsa.server.broker import Broker
from samsa.server.config.kafka_config import KafkaConfig
from samsa.wire import records
from samsa.wire.protocol import ApiKey, decode_response, encode_request, request_class

SIZE = struct.Struct(">i")


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


class Client:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.correlation_id = 0

    @classmethod
    async def connect(cls, port: int) -> "Client":
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_frame(self) -> bytes | None:
        """The next response frame body, or None when the broker closed the connection."""
        while True:
            if len(self.buffer) >= 4:
                (size,) = SIZE.unpack_from(self.buffer)
                if len(self.buffer) >= 4 + size:
                    frame = bytes(self.buffer[4:4 + size])
                    del self.buffer[:4 + size]
                    return frame
            chunk = await self.stream.receive_some(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk

    async def call(self, message, version: int):
        self.correlation_id += 1
        await self.send_raw(encode_request(message, version, self.correlation_id, "test"))
        frame = await self.read_frame()
        assert frame is not None, "broker closed the connection"
        correlation_id, response = decode_response(frame, message.API_KEY, version)
        assert correlation_id == self.correlation_id
        return response


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
