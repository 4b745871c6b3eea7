"""A broker of a ZooKeeper cluster about to stop asks the controller to move its partitions' leaders
away first (Kafka 3.9's KafkaServer.controlledShutdown): ControlledShutdown v3 to the controller
named by the metadata cache, on the inter-broker listener, up to controlled.shutdown.max.retries
times, controlled.shutdown.retry.backoff.ms apart, until it answers with no partition left to move.
Meanwhile the broker serves as before: the controller's LeaderAndIsr makes it a follower of what it
led, its StopReplica stops what it followed. After the last attempt the broker stops anyway (an
unclean shutdown, in Kafka's words: the controller elects leaders once the broker is gone).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, request_class

if TYPE_CHECKING:
    from ..config.kafka_config import KafkaConfig
    from .membership import ZkMembership
    from .metadata_cache import ZkMetadataCache

log = logging.getLogger("samsa.broker")
ControlledShutdownRequest = request_class(ApiKey.CONTROLLED_SHUTDOWN)
CONTROLLED_SHUTDOWN_VERSION = 3  # what Kafka sends from inter.broker.protocol.version 2.4-IV1


async def controlled_shutdown(membership: ZkMembership, cache: ZkMetadataCache, config: KafkaConfig) -> bool:
    """Whether the controller moved every leader away."""
    retries = config.get_int("controlled.shutdown.max.retries")
    timeout_ms = config.get_int("controller.socket.timeout.ms")
    log.info("[KafkaServer id=%d] Starting controlled shutdown", membership.broker_id)
    for remaining in range(retries - 1, -1, -1):
        controller = cache.controller_endpoint(config.inter_broker_listener_name)
        if controller is None:
            log.info("No controller present in the metadata cache")
        elif await _ask(controller, membership, timeout_ms):
            return True
        if remaining > 0:
            await trio.sleep(config.get_int("controlled.shutdown.retry.backoff.ms") / 1000)
            log.info("Retrying controlled shutdown (%d retries remaining)", remaining)
    log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")
    return False


async def _ask(controller: tuple[str, int], membership: ZkMembership, timeout_ms: int) -> bool:
    request = ControlledShutdownRequest(broker_id=membership.broker_id, broker_epoch=membership.broker_epoch)
    started = trio.current_time()
    try:
        connection = await BrokerConnection.connect(*controller, f"broker-{membership.broker_id}-controlled-shutdown",
                                                    timeout_ms)
        try:
            response = await connection.call(request, CONTROLLED_SHUTDOWN_VERSION)
        finally:
            await connection.aclose()
    except BrokerUnreachable as e:
        log.warning("Error during controlled shutdown, possibly because leader movement took longer than the "
                    "configured controller.socket.timeout.ms: %s", e)
        return False
    elapsed_ms = (trio.current_time() - started) * 1000
    if response.error_code != ErrorCode.NONE:
        log.info("Controlled shutdown request returned after %.0fms with error %s", elapsed_ms,
                 ErrorCode(response.error_code).name)
        return False
    if response.remaining_partitions:
        log.info("Controlled shutdown request returned after %.0fms with partitions remaining to move: %s",
                 elapsed_ms, [f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions])
        return False
    log.info("Controlled shutdown request returned successfully after %.0fms", elapsed_ms)
    return True
