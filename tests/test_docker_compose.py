"""docker-compose.yml stays in step with the broker: each Samsa service's command is a configuration
`samsa serve` accepts, the brokers form one cluster (distinct ids, one ZooKeeper, an inter-broker
listener the others can reach), and clients outside reach every broker where it advertises itself.
The `kraft` profile's Samsa brokers (process.roles=broker) likewise, under its three Kafka
controllers: one cluster id, the controllers' static quorum as their voters.
No Docker engine runs here; where the compose client is installed, `docker compose config` checks
the file's schema too."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from samsa.server.config.kafka_config import KafkaConfig

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def overrides(command: list[str]) -> list[str]:
    """The `--override key=value` pairs of a service's command, which must hold nothing else."""
    assert len(command) % 2 == 0, command
    pairs = list(zip(command[::2], command[1::2]))
    assert all(flag == "--override" for flag, _ in pairs), command
    return [value for _, value in pairs]


def brokers(compose: dict, profile: str | None = None) -> dict[str, KafkaConfig]:
    """The Samsa brokers of the default cluster (ZooKeeper's), or of a profile's."""
    return {
        name: KafkaConfig.load(None, overrides(service["command"]))
        for name, service in compose["services"].items()
        if "command" in service and service.get("build") == "."
        and service.get("profiles", [None]) == [profile]
    }


def test_three_brokers_on_one_zookeeper(compose):
    configs = brokers(compose)
    assert len(configs) == 3
    assert sorted(config.broker_id for config in configs.values()) == [1, 2, 3]
    connects = {config.get("zookeeper.connect") for config in configs.values()}
    assert len(connects) == 1
    (connect,) = connects
    host_port, _, chroot = str(connect).partition("/")
    host, _, port = host_port.partition(":")
    assert host in compose["services"] and port == "2181" and chroot
    for name, service in compose["services"].items():
        if name in configs:
            assert host in service["depends_on"]


@pytest.mark.parametrize("profile", [None, "kraft"])
def test_brokers_reach_each_other_and_clients_reach_them(compose, profile):
    for name, config in brokers(compose, profile).items():
        service = compose["services"][name]
        advertised = {endpoint.name: endpoint for endpoint in config.advertised_listeners}
        inter_broker = advertised[config.inter_broker_listener_name]
        # Other brokers connect by the service's name inside the compose network.
        assert inter_broker.host == name
        assert inter_broker.port in {endpoint.port for endpoint in config.listeners}
        external = [endpoint for endpoint in advertised.values() if endpoint.host == "localhost"]
        assert len(external) == 1
        assert f"{external[0].port}:{external[0].port}" in service["ports"]
        assert service["stop_signal"] == "SIGTERM"
        (log_dir,) = config.log_dirs
        assert any(volume.endswith(f":{log_dir}") for volume in service["volumes"])


@pytest.mark.parametrize("profile", [None, "kraft"])
def test_replicated_by_default(compose, profile):
    for config in brokers(compose, profile).values():
        assert config.get("default.replication.factor") == 3
        assert config.get("min.insync.replicas") == 2
        assert config.get("offsets.topic.replication.factor") == 3
        assert config.get("transaction.state.log.replication.factor") == 3


def test_single_broker_stays_one_command_away(compose):
    single = compose["services"]["samsa"]
    assert single["profiles"] == ["single"]
    assert single["build"] == "." and "9092:9092" in single["ports"]


def test_kraft_brokers_under_three_kafka_controllers(compose):
    services = compose["services"]
    controllers = {name: service for name, service in services.items() if name.startswith("kafka-controller-")}
    assert len(controllers) == 3
    configs = brokers(compose, "kraft")
    assert len(configs) == 3
    cluster_ids = {service["environment"]["CLUSTER_ID"] for service in controllers.values()}
    cluster_ids |= {services[name]["environment"]["CLUSTER_ID"] for name in configs}
    assert len(cluster_ids) == 1
    controller_ids = {int(service["environment"]["NODE_ID"]) for service in controllers.values()}
    assert sorted(controller_ids) == [1, 2, 3]
    for name, service in controllers.items():
        assert service["profiles"] == ["kraft"] and service["image"].startswith("apache/kafka:4.4")
        script = service["entrypoint"][-1]
        assert "process.roles=controller" in script and "listeners=CONTROLLER://0.0.0.0:9093" in script
        # Levels the Samsa brokers support, or the controller refuses their registration.
        assert "--feature share.version=1" in script
        assert f"kafka-controller-{service['environment']['NODE_ID']}" == name
    node_ids = set()
    for name, config in configs.items():
        service = services[name]
        assert config.kraft_broker and config.node_id not in controller_ids
        node_ids.add(config.node_id)
        assert {f"{host}:{port}" for host, port in config.quorum_voters.values()} == {
            f"{controller}:9093" for controller in controllers}
        assert sorted(config.quorum_voters) == sorted(controller_ids)
        assert sorted(service["depends_on"]) == sorted(controllers)
        # The log dir formatted first (once), then served, both with the service's overrides.
        entrypoint = " ".join(service["entrypoint"])
        assert 'samsa format --ignore-formatted --cluster-id "$$CLUSTER_ID" "$$@" && exec samsa serve "$$@"' in entrypoint
    assert len(node_ids) == 3


def compose_client() -> list[str] | None:
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) and subprocess.run(
            [*command, "version"], capture_output=True
        ).returncode == 0:
            return command
    return None


@pytest.mark.skipif(compose_client() is None, reason="no docker compose client on this machine")
def test_compose_accepts_the_file():
    command = compose_client()
    assert command is not None
    result = subprocess.run([*command, "-f", str(COMPOSE_FILE), "config", "--quiet"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
