"""Capture the request frames that real Kafka clients send, as byte vectors for tests/wire.

    python tools/capture_vectors.py [OUTPUT_DIR]   (default: tests/wire/vectors)

A loopback capture server, built on our codec, answers ApiVersions, Metadata (one broker: itself)
and Produce (success) well enough for a client to produce, and records every request frame. For
each client (librdkafka through confluent-kafka, kafka-python) and each compression codec it
produces the same few records and writes, into OUTPUT_DIR/<client>-<codec>/:
    NN-<Api>-v<version>.hex   one request frame (size prefix excluded), in the order received
    sent.json                 what was produced, the client and its version, and the frame list
"""

from __future__ import annotations

import json
import shutil
import socket
import socketserver
import struct
import sys
import threading
import uuid
from importlib import metadata
from pathlib import Path

from samsa.wire.protocol import ApiKey, decode_request, encode_response, request_class, response_class

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "tests" / "wire" / "vectors"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TOPIC = "vectors"
PARTITION = 0
NODE_ID = 0
TOPIC_ID = uuid.UUID("6a1b3c5d-0000-4000-8000-00000000a1b2")
# Fixed, so that the sidecar can say exactly what each batch must hold.
RECORDS = [
    {"key": "key-0", "value": "value-0 " * 32, "timestamp": 1_700_000_000_000, "headers": [["trace", "t-0"]]},
    {"key": None, "value": "value-1 " * 32, "timestamp": 1_700_000_000_001, "headers": []},
    {"key": "key-2", "value": None, "timestamp": 1_700_000_000_002, "headers": [["a", "1"], ["b", ""]]},
]
# Fetch and FindCoordinator are advertised, never served: librdkafka infers its features from them
# (message format v2 and zstd from Fetch, lz4 from FindCoordinator).
ADVERTISED = (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.FIND_COORDINATOR)


class CaptureServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), CaptureHandler)
        self.frames: list[tuple[int, int, bytes]] = []  # (api key, version, frame)
        self.lock = threading.Lock()
        self.next_offset = 0

    @property
    def port(self) -> int:
        return self.server_address[1]


class CaptureHandler(socketserver.BaseRequestHandler):
    server: CaptureServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        while (size_bytes := read_exactly(sock, 4)) is not None:
            frame = read_exactly(sock, struct.unpack(">i", size_bytes)[0])
            if frame is None:
                return
            header, request = decode_request(frame)
            key, version = header.request_api_key, header.request_api_version
            with self.server.lock:
                self.server.frames.append((key, version, frame))
                response = answer(self.server, key, request)
            if response is not None:  # acks=0 produce requests get no response
                sock.sendall(encode_response(response, version, header.correlation_id))


def read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def answer(server: CaptureServer, key: int, request):
    if key == ApiKey.API_VERSIONS:
        cls = response_class(key)
        return cls(api_keys=[cls.ApiVersion(api_key=k, min_version=request_class(k).VALID_VERSIONS[0],
                                            max_version=request_class(k).VALID_VERSIONS[1]) for k in ADVERTISED])
    if key == ApiKey.METADATA:
        cls = response_class(key)
        partition = cls.MetadataResponsePartition(partition_index=PARTITION, leader_id=NODE_ID, leader_epoch=0,
                                                  replica_nodes=[NODE_ID], isr_nodes=[NODE_ID])
        topic = cls.MetadataResponseTopic(name=TOPIC, topic_id=TOPIC_ID, partitions=[partition])
        broker = cls.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=server.port)
        # As Kafka does: null asks for every topic, an empty list for none (brokers only).
        wanted = request.topics is None or any(t.name == TOPIC for t in request.topics)
        return cls(brokers=[broker], cluster_id="capture", controller_id=NODE_ID, topics=[topic] if wanted else [])
    if key == ApiKey.PRODUCE:
        if request.acks == 0:
            return None
        cls = response_class(key)
        topics = []
        for topic in request.topic_data:
            partitions = []
            for data in topic.partition_data:
                partitions.append(cls.PartitionProduceResponse(index=data.index, base_offset=server.next_offset))
                server.next_offset += 100
            topics.append(cls.TopicProduceResponse(name=topic.name, partition_responses=partitions))
        return cls(responses=topics)
    raise RuntimeError(f"the capture server does not serve api key {key}")


def encoded(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def produce_librdkafka(port: int, codec: str) -> str:
    import confluent_kafka

    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{port}", "compression.type": codec, "linger.ms": 50,
        "enable.idempotence": False, "client.id": "vectors-librdkafka", "socket.timeout.ms": 5000,
        "message.timeout.ms": 10000,
    })
    for record in RECORDS:
        producer.produce(TOPIC, partition=PARTITION, key=encoded(record["key"]), value=encoded(record["value"]),
                         timestamp=record["timestamp"],
                         headers=[(name, encoded(value)) for name, value in record["headers"]])
    if producer.flush(15) != 0:
        raise RuntimeError("librdkafka did not deliver the records")
    return f"librdkafka {confluent_kafka.libversion()[0]} (confluent-kafka {metadata.version('confluent-kafka')})"


def produce_kafka_python(port: int, codec: str) -> str:
    import kafka

    producer = kafka.KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}", compression_type=None if codec == "none" else codec,
        linger_ms=50, client_id="vectors-kafka-python", request_timeout_ms=10000, enable_idempotence=False,
    )
    futures = [producer.send(TOPIC, partition=PARTITION, key=encoded(r["key"]), value=encoded(r["value"]),
                             timestamp_ms=r["timestamp"],
                             headers=[(name, encoded(value)) for name, value in r["headers"]])
               for r in RECORDS]
    producer.flush(15)
    for future in futures:
        future.get(timeout=1)
    producer.close(5)
    return f"kafka-python {metadata.version('kafka-python')}"


CLIENTS = {"librdkafka": produce_librdkafka, "kafka-python": produce_kafka_python}


def capture(client: str, codec: str, output: Path) -> None:
    server = CaptureServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client_version = CLIENTS[client](server.port, codec)
    finally:
        server.shutdown()
        server.server_close()
    directory = output / f"{client}-{codec}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    frames = []
    for n, (key, version, frame) in enumerate(server.frames):
        name = f"{n:02d}-{ApiKey(key).name.title().replace('_', '')}-v{version}.hex"
        (directory / name).write_text(frame.hex() + "\n")
        frames.append({"file": name, "api_key": key, "api_version": version})
    sidecar = {"client": client_version, "compression": codec, "topic": TOPIC, "partition": PARTITION,
               "records": RECORDS, "frames": frames}
    (directory / "sent.json").write_text(json.dumps(sidecar, indent=2) + "\n")
    print(f"{directory.relative_to(output.parent)}: {len(frames)} frames from {client_version}")


def main(argv: list[str]) -> None:
    output = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUTPUT
    for client in CLIENTS:
        for codec in CODECS:
            capture(client, codec, output)


if __name__ == "__main__":
    main(sys.argv)
