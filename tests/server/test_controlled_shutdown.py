"""server/zookeeper/controlled_shutdown.py against a fake controller on a real socket: ControlledShutdown v3
with the broker's id and epoch, retried while partitions remain to move, given up after
controlled.shutdown.max.retries attempts. compat-tests/test_zookeeper_cluster.py has Kafka 3.9's
controller answer it."""

from __future__ import annotations

import struct

import trio
from loopback import broker_config

from samsa.server.zookeeper.controlled_shutdown import controlled_shutdown
from samsa.server.zookeeper.membership import ZkMembership
from samsa.server.metadata.cache import AliveBroker
from samsa.server.zookeeper.metadata_cache import ZkMetadataCache
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, decode_request, encode_response, response_class

ControlledShutdownResponse = response_class(ApiKey.CONTROLLED_SHUTDOWN)
Remaining = ControlledShutdownResponse.RemainingPartition


class Local:
    cluster_id = "cluster-1"


async def fake_controller(answers: list, received: list, stream: trio.SocketStream) -> None:
    """Answer each request with the next of `answers`, noting (version, request)."""
    buffer = bytearray()
    while answers:
        while len(buffer) < 4 or len(buffer) < 4 + struct.unpack_from(">i", buffer)[0]:
            chunk = await stream.receive_some(1 << 16)
            if not chunk:
                return
            buffer += chunk
        size = struct.unpack_from(">i", buffer)[0]
        header, request = decode_request(memoryview(bytes(buffer[4:4 + size])))
        del buffer[:4 + size]
        received.append((header.request_api_version, request))
        await stream.send_all(encode_response(answers.pop(0), header.request_api_version, header.correlation_id))


def run(tmp_path, answers: list, retries: int) -> tuple[bool, list]:
    received: list = []

    async def main():
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(trio.serve_tcp, lambda s: fake_controller(answers, received, s), 0)
            port = listeners[0].socket.getsockname()[1]
            cache = ZkMetadataCache(1, Local())
            cache.controller_id = 0
            cache.alive_brokers = {0: AliveBroker(0, {"PLAINTEXT": ("127.0.0.1", port)})}
            config = broker_config(tmp_path, controlled_shutdown_max_retries=retries,
                                   controlled_shutdown_retry_backoff_ms=10)
            membership = ZkMembership(client=None, broker_id=1, cluster_id="cluster-1", broker_epoch=77)
            done = await controlled_shutdown(membership, cache, config)
            nursery.cancel_scope.cancel()
        return done

    return trio.run(main), received


def test_retried_until_no_partition_remains(tmp_path):
    answers = [ControlledShutdownResponse(error_code=ErrorCode.NONE,
                                          remaining_partitions=[Remaining(topic_name="t", partition_index=0)]),
               ControlledShutdownResponse(error_code=ErrorCode.NONE, remaining_partitions=[])]
    done, received = run(tmp_path, answers, retries=3)
    assert done
    assert [(version, r.broker_id, r.broker_epoch) for version, r in received] == [(3, 1, 77), (3, 1, 77)]


def test_given_up_after_the_last_attempt(tmp_path):
    answers = [ControlledShutdownResponse(error_code=ErrorCode.STALE_BROKER_EPOCH) for _ in range(3)]
    done, received = run(tmp_path, answers, retries=2)
    assert not done
    assert len(received) == 2
