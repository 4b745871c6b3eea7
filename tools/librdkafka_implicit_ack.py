"""A reproducer, run by hand (not a test: it serves librdkafka from a stand-in leader, and the suite
runs real brokers only): what librdkafka reports delivered without an offset, against a leader that
behaves as Kafka 3.9's. It is why compat-tests/history.py counts some acknowledged writes unconfirmed,
not lost.

    .venv/bin/python tools/librdkafka_implicit_ack.py    # exit 0: reproduced, as librdkafka 2.16 does

librdkafka's idempotent producer has up to five requests in flight per partition. When one is
answered after an earlier one failed, it reports the earlier one's records delivered, with offset
-1 ("implicitly acked by subsequent batch success", rd_kafka_handle_idempotent_Produce_success),
also where the earlier one was refused (NOT_LEADER_OR_FOLLOWER: not persisted) and queued to be sent
again. That inference assumes the leader refuses a sequence that does not follow on; Kafka's leader
takes any first sequence from a producer it has no state for (ProducerAppendInfo.checkSequence), so a
leader that refuses a new producer's first requests and takes the next (it became leader meanwhile)
writes the later records and never the earlier ones, which the application was told were delivered.
The stand-in leader here does just that, so the reproducer does not depend on catching the race.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
from pathlib import Path

import confluent_kafka

from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, decode_request, encode_response, response_class

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "compat-tests"))
from history import History  # noqa: E402

TOPIC = "t"
PRODUCER_ID = 7
REFUSED = 3  # the first requests, refused while the leader is not yet leader
T = 30


class StandInLeader:
    """One broker leading one partition. It reads REFUSED + 1 Produce requests before answering any
    (a new producer's first requests, in flight together), refuses the first REFUSED with
    NOT_LEADER_OR_FOLLOWER and from then on appends as Kafka 3.9's leader does: any first sequence
    from a producer it has no state for, then only the next sequence (else
    OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    def __init__(self) -> None:
        self.log: list[bytes] = []
        self.refused_values: list[bytes] = []
        self.last_sequence: dict[int, int] = {}
        self.refused = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self.server.getsockname()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        held: list = []  # Produce requests read, not yet answered
        with connection:
            while True:
                size = connection.recv(4, socket.MSG_WAITALL)
                if len(size) < 4:
                    return
                received = decode_request(connection.recv(struct.unpack(">i", size)[0], socket.MSG_WAITALL))
                if received[0].request_api_key == ApiKey.PRODUCE and self.refused < REFUSED:
                    held.append(received)
                    if len(held) <= REFUSED:
                        continue
                for header, request in held or [received]:
                    answer, version = self._answer(header, request)
                    connection.sendall(encode_response(answer, version, header.correlation_id))
                held.clear()

    def _answer(self, header, request):
        key, version = header.request_api_key, header.request_api_version
        response = response_class(key)
        if key == ApiKey.API_VERSIONS:
            supported = {ApiKey.PRODUCE: (3, 9), ApiKey.FETCH: (4, 11), ApiKey.METADATA: (0, 9),
                         ApiKey.API_VERSIONS: (0, 3), ApiKey.INIT_PRODUCER_ID: (0, 4)}
            return response(error_code=0, throttle_time_ms=0, api_keys=[
                response.ApiVersion(api_key=k, min_version=low, max_version=high)
                for k, (low, high) in supported.items()]), min(version, 3)
        if key == ApiKey.METADATA:
            return response(throttle_time_ms=0, cluster_id="fake", controller_id=1, brokers=[
                response.MetadataResponseBroker(node_id=1, host=self.host, port=self.port, rack=None)], topics=[
                response.MetadataResponseTopic(error_code=0, name=TOPIC, is_internal=False, partitions=[
                    response.MetadataResponsePartition(error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
                                                       replica_nodes=[1], isr_nodes=[1], offline_replicas=[])])]), version
        if key == ApiKey.INIT_PRODUCER_ID:
            return response(throttle_time_ms=0, error_code=0, producer_id=PRODUCER_ID, producer_epoch=0), version
        assert key == ApiKey.PRODUCE, key
        batch, written = records.decode_batch(bytes(request.topic_data[0].partition_data[0].records))
        base_offset = -1
        if self.refused < REFUSED:
            self.refused += 1
            self.refused_values.extend(r.value for r in written)
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif (batch.producer_id in self.last_sequence
              and batch.base_sequence != self.last_sequence[batch.producer_id] + 1):
            error = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        else:
            error, base_offset = ErrorCode.NONE, len(self.log)
            self.log.extend(r.value for r in written)
            self.last_sequence[batch.producer_id] = batch.base_sequence + batch.records_count - 1
        return response(throttle_time_ms=0, responses=[response.TopicProduceResponse(name=TOPIC, partition_responses=[
            response.PartitionProduceResponse(index=0, error_code=error, base_offset=base_offset, log_append_time_ms=-1,
                                              log_start_offset=0, record_errors=[], error_message=None)])]), version


def main() -> int:
    leader = StandInLeader()
    history = History()

    def delivered(err, message) -> None:
        if err is None:
            history.record_ack(0, message.offset(), message.value())
        else:
            history.record_failure(0, message.value(), str(err))

    producer = confluent_kafka.Producer({"bootstrap.servers": f"{leader.host}:{leader.port}",
                                         "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                         "retry.backoff.ms": 50})
    try:
        producer.poll(1.0)  # the producer id first, so that each value goes out in a request of its own
        for i in range(10):
            value = b"v%d" % i
            history.record_sent(0, value)
            producer.produce(TOPIC, value, partition=0, on_delivery=delivered)
            producer.poll(0.02)
        assert producer.flush(T) == 0
    finally:
        leader.close()

    # The values of the first requests (one each, unless the client put some together).
    refused = leader.refused_values
    reported_without_offset = [v for _, o, v, _ in history.acked if o is None]
    anomalies = history.check({0: list(enumerate(leader.log))})
    print(f"refused (never written): {[v.decode() for v in refused]}")
    print(f"written: {[v.decode() for v in leader.log]}")
    print(f"reported delivered without an offset: {[v.decode() for v in reported_without_offset]}")
    print(f"history.py: {anomalies.summary()}; unconfirmed {anomalies.unconfirmed}")
    reproduced = (bool(refused) and leader.log == [b"v%d" % i for i in range(len(refused), 10)]
                  and reported_without_offset == refused and not history.failed and not anomalies
                  and anomalies.unconfirmed == [(0, v) for v in refused])
    print("reproduced: librdkafka reported never-written records delivered" if reproduced else "not reproduced")
    return 0 if reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
