"""server/zookeeper/membership.py and the ZooKeeper side of `samsa serve`, without a ZooKeeper: the broker id
rules of Kafka's KafkaServer, meta.properties, the registration version, and the exit after
zookeeper.connection.timeout.ms when nothing answers (compat-tests/test_zookeeper_cluster.py runs
brokers against a real ZooKeeper and Kafka 3.9)."""

from __future__ import annotations

import socket
import time

import pytest
import trio

from samsa.server.main import main
from samsa.server.config.kafka_config import ConfigError, KafkaConfig
from samsa.server.zookeeper.membership import (
    InconsistentBrokerIdException, _broker_id, _check_broker_id_config, _write_meta_properties, broker_registration,
    registration_version,
)
from samsa.server.zookeeper.zk_client import ZkConnect
from samsa.storage.checkpoints import read_properties
from samsa.wire import zk_data


class SequenceOnly:
    """The one KafkaZkClient call broker id generation makes."""

    def __init__(self) -> None:
        self.versions = iter(range(1, 100))

    async def generate_broker_sequence_id(self) -> int:
        return next(self.versions)


def broker_id(props: dict[str, str], stored: dict) -> int:
    return trio.run(_broker_id, KafkaConfig(props), SequenceOnly(), stored)


def test_broker_id_configured_stored_or_generated(tmp_path):
    assert broker_id({"broker.id": "3"}, {}) == 3
    assert broker_id({}, {tmp_path: {"broker.id": "7", "version": "0"}}) == 7
    assert broker_id({}, {}) == 1001  # reserved.broker.max.id + the first /brokers/seqid version
    assert broker_id({"reserved.broker.max.id": "50"}, {}) == 51
    assert broker_id({"broker.id.generation.enable": "false"}, {}) == 0  # Samsa's default broker.id
    with pytest.raises(InconsistentBrokerIdException, match="doesn't match stored broker.id"):
        broker_id({"broker.id": "3"}, {tmp_path: {"broker.id": "4"}})


def test_a_configured_broker_id_stays_below_the_generated_ones():
    with pytest.raises(ConfigError, match="reserved.broker.max.id"):
        _check_broker_id_config(KafkaConfig({"broker.id": "1001"}))
    _check_broker_id_config(KafkaConfig({"broker.id": "1001", "broker.id.generation.enable": "false"}))


def test_meta_properties_as_a_zookeeper_mode_broker_writes_them(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    _write_meta_properties(dirs, {}, 1001, "fu3BtO7JSRqtd49UEojohQ")
    for d in dirs:
        text = (d / "meta.properties").read_text()
        assert text.splitlines()[2:] == ["broker.id=1001", "version=0", "cluster.id=fu3BtO7JSRqtd49UEojohQ"]
        assert read_properties(d / "meta.properties") == {
            "broker.id": "1001", "version": "0", "cluster.id": "fu3BtO7JSRqtd49UEojohQ"}


def test_registration_version_follows_inter_broker_protocol_version():
    assert registration_version("3.9") == registration_version("3.9-IV0") == registration_version("2.7-IV0") == 5
    assert registration_version("2.6") == registration_version("0.10.0-IV1") == 4
    assert registration_version("0.10.0-IV0") == registration_version("0.9.0") == 2


def test_registration_of_the_advertised_listeners():
    config = KafkaConfig({"broker.rack": "r1", "inter.broker.protocol.version": "2.6"})
    reg = broker_registration(config, 5, [zk_data.EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT")])
    assert (reg.broker_id, reg.rack, reg.version, reg.jmx_port, reg.features) == (5, "r1", 4, -1, {})
    assert abs(reg.timestamp - time.time() * 1000) < 60_000


def test_zookeeper_connect_with_chroot():
    assert ZkConnect.parse("a:1,b:2/kafka/one") == ZkConnect("a:1,b:2", "/kafka/one")
    assert ZkConnect.parse("a:1") == ZkConnect("a:1", "")
    assert str(ZkConnect.parse("a:1/k/")) == "a:1/k"


def test_unreachable_zookeeper_exits_1_after_the_connection_timeout(tmp_path, capsys):
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        started = time.monotonic()
        rc = main(["serve", "--override", f"zookeeper.connect=127.0.0.1:{port}/samsa",
                   "--override", "zookeeper.connection.timeout.ms=500", "--override", f"log.dirs={tmp_path}",
                   "--override", "listeners=PLAINTEXT://127.0.0.1:0"])
    assert rc == 1
    assert time.monotonic() - started >= 0.5
    assert (f"samsa: Timed out waiting for connection to ZooKeeper at 127.0.0.1:{port}/samsa after 500 ms "
            "(zookeeper.connection.timeout.ms)") in capsys.readouterr().err
    assert not (tmp_path / "meta.properties").exists()  # nothing written before the cluster is known
