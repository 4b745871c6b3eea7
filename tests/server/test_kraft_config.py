"""process.roles=broker: the configs of a KRaft cluster's broker, checked in Kafka's words, and
`samsa format` writing meta.properties as Kafka's `kafka-storage format` does for a broker."""

from __future__ import annotations

import pytest

from samsa.server.config.kafka_config import ConfigError, KafkaConfig
from samsa.server.metadata.format_storage import FormatError, format_kraft_broker
from samsa.storage.checkpoints import read_properties


def kraft_broker(tmp_path, **overrides) -> dict[str, str]:
    props = {"process.roles": "broker", "node.id": "3", "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
             "controller.listener.names": "CONTROLLER", "listeners": "PLAINTEXT://127.0.0.1:9092",
             "log.dirs": f"{tmp_path}/a,{tmp_path}/b"}
    props.update({key.replace("_", "."): value for key, value in overrides.items()})
    return {key: value for key, value in props.items() if value is not None}


def test_broker_role_alone_is_a_kraft_broker(tmp_path):
    config = KafkaConfig(kraft_broker(tmp_path))
    assert config.kraft_broker
    assert config.quorum_bootstrap_servers == (("127.0.0.1", 9093),)
    # Kafka's effective map: the controller listener is PLAINTEXT with the default map.
    assert config.controller_security_protocol == "PLAINTEXT"
    assert not KafkaConfig({"process.roles": "broker,controller", "log.dirs": str(tmp_path)}).kraft_broker
    assert not KafkaConfig({"log.dirs": str(tmp_path)}).kraft_broker


def test_quorum_voters_are_parsed(tmp_path):
    config = KafkaConfig(kraft_broker(tmp_path, controller_quorum_bootstrap_servers=None,
                                      controller_quorum_voters="1@127.0.0.1:9093,2@[::1]:9094"))
    assert config.quorum_voters == {1: ("127.0.0.1", 9093), 2: ("::1", 9094)}


@pytest.mark.parametrize("overrides, key, message", [
    ({"controller_quorum_bootstrap_servers": None}, "controller.quorum.bootstrap.servers",
     "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap "
     "controllers or controller.quorum.voters must contain a parseable set of controllers."),
    ({"controller_listener_names": None}, "controller.listener.names",
     "controller.listener.names must contain at least one value when running KRaft with just the broker role"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}, "controller.listener.names",
     "controller.listener.names must not contain a value appearing in the 'listeners' configuration when running "
     "KRaft with just the broker role"),
    ({"controller_quorum_voters": "3@127.0.0.1:9093"}, "controller.quorum.voters",
     "If process.roles contains just the 'broker' role, the node id 3 must not be included in the set of voters "
     "controller.quorum.voters={3}"),
    ({"process_roles": "controller"}, "process.roles", None),
    ({"zookeeper_connect": "127.0.0.1:2181"}, "zookeeper.connect", None),
])
def test_kraft_broker_configs_refused_as_kafka_refuses_them(tmp_path, overrides, key, message):
    with pytest.raises(ConfigError) as error:
        KafkaConfig(kraft_broker(tmp_path, **overrides))
    assert error.value.name == key
    if message is not None:
        assert error.value.message == message


def test_format_writes_kafkas_meta_properties(tmp_path):
    config = KafkaConfig(kraft_broker(tmp_path))
    lines = format_kraft_broker(config, "MkU3OEVBNTcwNTJENDM2Qk", None, [], False)
    assert lines == [f"Formatting metadata directory {tmp_path}/a with metadata.version 4.4-IV2.",
                     f"Formatting data directory {tmp_path}/b with metadata.version 4.4-IV2."]
    text = (tmp_path / "a" / "meta.properties").read_text().splitlines()
    # Kafka's key order (Properties.store of these four keys), after the blank and date comments.
    assert [line.split("=")[0] for line in text[2:]] == ["node.id", "directory.id", "version", "cluster.id"]
    a, b = read_properties(tmp_path / "a" / "meta.properties"), read_properties(tmp_path / "b" / "meta.properties")
    assert a["cluster.id"] == b["cluster.id"] == "MkU3OEVBNTcwNTJENDM2Qk" and a["node.id"] == "3"
    assert a["directory.id"] != b["directory.id"]
    with pytest.raises(FormatError, match="already formatted"):
        format_kraft_broker(config, "MkU3OEVBNTcwNTJENDM2Qk", None, [], False)
    assert format_kraft_broker(config, "MkU3OEVBNTcwNTJENDM2Qk", None, [], True) == [
        "All of the log directories are already formatted."]


def test_format_needs_a_cluster_id_and_no_controller_options(tmp_path):
    config = KafkaConfig(kraft_broker(tmp_path))
    with pytest.raises(FormatError, match="You must specify the cluster id."):
        format_kraft_broker(config, None, None, [], False)
    with pytest.raises(FormatError, match="--standalone formats a KRaft controller"):
        format_kraft_broker(config, "MkU3OEVBNTcwNTJENDM2Qk", None, [], False, controller_option="--standalone")
    assert format_kraft_broker(config, "MkU3OEVBNTcwNTJENDM2Qk", "4.0", [], False)[0].endswith(
        "with metadata.version 4.0-IV3.")
