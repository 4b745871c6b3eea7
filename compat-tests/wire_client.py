"""A raw Kafka protocol client for the compatibility tests: Samsa's own client on a blocking socket
(samsa.client.blocking), so a test can send exactly the same bytes to Samsa and to Kafka and read
back every field of the answer, or send what no real client would (an unsupported version)."""

from __future__ import annotations

import struct

from server_process import HOST

from samsa.client.blocking import BlockingConnection
from samsa.client.errors import BrokerUnreachable
from samsa.client.framing import SIZE
from samsa.wire import records
from samsa.wire.protocol import ApiKey, request_class

REQUEST_HEADER_V1 = struct.Struct(">hhi")  # api key, api version, correlation id (then client id)


class WireClient(BlockingConnection):
    def __init__(self, host: str, port: int, client_id: str = "differential", timeout: float = 15.0) -> None:
        connection = BlockingConnection.connect(host, port, client_id, timeout)
        super().__init__(connection.sock, client_id)

    def call_bytes(self, api_key: int, version: int, body: bytes = b"", flexible: bool = False) -> bytes | None:
        """A request with a v1 header (v2 with `flexible`: no tagged fields) and `body` as given: the
        response frame body, or None if the broker closed the connection instead of answering."""
        client_id = self.client_id.encode()
        # Correlation id 0: the answer is read here, not matched with a request in flight.
        payload = (REQUEST_HEADER_V1.pack(api_key, version, 0) + struct.pack(">h", len(client_id)) + client_id
                   + (b"\0" if flexible else b"") + body)
        self.sock.sendall(SIZE.pack(len(payload)) + payload)
        return self.frame_or_none()

    def frame_or_none(self) -> bytes | None:
        """The next frame body, or None when the broker closed (or reset) the connection."""
        try:
            return bytes(self.read_frame())
        except BrokerUnreachable:
            return None


def metadata_controller(port: int, host: str = HOST) -> int:
    """The controller id a broker's Metadata v12 names (-1 before it knows one): a broker learns it
    from the controller's UpdateMetadata, a moment after it starts serving."""
    with WireClient(host, port) as wire:
        return wire.call(request_class(ApiKey.METADATA)(topics=[], allow_auto_topic_creation=False), 12).controller_id


def leader_epochs(port: int, topic: str, host: str = HOST) -> dict[int, int]:
    """Each partition's current leader epoch, as the broker's Metadata v12 gives it."""
    metadata = request_class(ApiKey.METADATA)
    request = metadata(topics=[metadata.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    with WireClient(host, port) as wire:
        return {p.partition_index: p.leader_epoch for p in wire.call(request, 12).topics[0].partitions}


def produce_one(host: str, port: int, topic: str, partition: int, value: bytes, acks: int = -1) -> tuple[int, int]:
    """(error code, base offset) of one record in a batch of its own (Produce v9)."""
    produce = request_class(ApiKey.PRODUCE)
    batch = records.build_batch([records.Record(0, 0, None, value, [])])
    request = produce(acks=acks, timeout_ms=5000, topic_data=[produce.TopicProduceData(
        name=topic, partition_data=[produce.PartitionProduceData(index=partition, records=batch)])])
    with WireClient(host, port) as client:
        answer = client.call(request, 9).responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def fetch_once(host: str, port: int, topic: str, partition: int, offset: int = 0,
               max_bytes: int = 16 << 20) -> tuple[int, bytes]:
    """(error code, the record batches' bytes as the broker sent them) of one Fetch (v12)."""
    fetch = request_class(ApiKey.FETCH)
    request = fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                    session_id=0, session_epoch=-1, topics=[fetch.FetchTopic(
                        topic=topic, partitions=[fetch.FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    with WireClient(host, port) as client:
        answer = client.call(request, 12).responses[0].partitions[0]
    return answer.error_code, bytes(answer.records or b"")


def values_by_offset(data: bytes) -> dict[int, bytes | None]:
    """{offset: value} of every record in the complete batches of `data`."""
    values = {}
    for position, header in records.iter_batch_headers(data):
        _, batch_records = records.decode_batch(data[position:position + header.size])
        values.update((header.record_offset(r), r.value) for r in batch_records)
    return values
