"""The controller's requests as server/zookeeper/controller_channel.py builds them: every version it may
send decodes back to what the pure controller decided."""

import pytest

from samsa.coordinator.controller.actions import (LeaderAndIsrPartition, SendLeaderAndIsr, SendStopReplica,
                                                  SendUpdateMetadata, StopReplicaPartition, UpdateMetadataPartition)
from samsa.server.zookeeper.controller_channel import VERSIONS, _build
from samsa.wire.zk_data import topic_id_string, topic_uuid
from samsa.wire.protocol import ApiKey, decode_request, encode_request
from samsa.wire.zk_data import BrokerRegistration, EndPoint, PartitionState

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
BROKER = BrokerRegistration(2, (EndPoint("INTERNAL", "127.0.0.1", 9094, "SSL"),), rack="r1")
STATE = PartitionState(2, 7, (2, 3), 5, zk_version=11)


def roundtrip(message, api_key, version):
    frame = encode_request(message, version, 1, "controller-1")
    header, request = decode_request(memoryview(frame)[4:])
    assert header.request_api_key == api_key
    return request


def test_topic_ids_both_ways():
    assert topic_id_string(topic_uuid(TOPIC_ID)) == TOPIC_ID
    assert topic_uuid(None).int == 0


@pytest.mark.parametrize("version", range(VERSIONS[ApiKey.LEADER_AND_ISR][0], VERSIONS[ApiKey.LEADER_AND_ISR][1] + 1))
def test_leader_and_isr(version):
    action = SendLeaderAndIsr(3, 42, 1, 5, (LeaderAndIsrPartition("t", 0, STATE, (2, 3), (3,), (), True),),
                              {"t": TOPIC_ID}, (BROKER,))
    request = roundtrip(_build(action, version), ApiKey.LEADER_AND_ISR, version)
    assert (request.controller_id, request.controller_epoch) == (1, 5)
    (topic,) = request.topic_states
    (p,) = topic.partition_states
    assert (p.leader, p.leader_epoch, p.isr, p.replicas) == (2, 7, [2, 3], [2, 3])
    if version >= 1:
        assert p.partition_epoch == 11
    if version >= 2:
        assert request.broker_epoch == 42
    if version >= 5:
        assert topic_id_string(topic.topic_id) == TOPIC_ID
    assert [(b.broker_id, b.port) for b in request.live_leaders] == [(2, 9094)]


@pytest.mark.parametrize("version", range(VERSIONS[ApiKey.UPDATE_METADATA][0], VERSIONS[ApiKey.UPDATE_METADATA][1] + 1))
def test_update_metadata(version):
    action = SendUpdateMetadata(3, 42, 1, 5, (UpdateMetadataPartition("t", 0, STATE, (2, 3), (3,)),),
                                {"t": TOPIC_ID}, (BROKER,))
    request = roundtrip(_build(action, version), ApiKey.UPDATE_METADATA, version)
    (broker,) = request.live_brokers
    (endpoint,) = broker.endpoints
    assert (broker.id, broker.rack, endpoint.listener, endpoint.security_protocol) == (2, "r1", "INTERNAL", 1)
    (p,) = request.topic_states[0].partition_states
    assert (p.leader, p.zk_version, p.offline_replicas) == (2, 11, [3])


@pytest.mark.parametrize("version", range(VERSIONS[ApiKey.STOP_REPLICA][0], VERSIONS[ApiKey.STOP_REPLICA][1] + 1))
def test_stop_replica(version):
    action = SendStopReplica(3, 42, 1, 5, (StopReplicaPartition("t", 0, -2, True),))
    request = roundtrip(_build(action, version), ApiKey.STOP_REPLICA, version)
    (p,) = request.topic_states[0].partition_states
    assert (p.partition_index, p.leader_epoch, p.delete_partition) == (0, -2, True)
