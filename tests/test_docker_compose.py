"""docker-compose.yml stays in step with the broker: each Samsa service's command is a configuration
`samsa serve` accepts, the brokers form one cluster (distinct ids, one ZooKeeper, an inter-broker
listener the others can reach), and clients outside reach every broker where it advertises itself.
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


def brokers(compose: dict) -> dict[str, KafkaConfig]:
    return {
        name: KafkaConfig.load(None, overrides(service["command"]))
        for name, service in compose["services"].items()
        if "command" in service and service.get("build") == "."
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


def test_brokers_reach_each_other_and_clients_reach_them(compose):
    for name, config in brokers(compose).items():
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


def test_replicated_by_default(compose):
    for config in brokers(compose).values():
        assert config.get("default.replication.factor") == 3
        assert config.get("min.insync.replicas") == 2
        assert config.get("offsets.topic.replication.factor") == 3
        assert config.get("transaction.state.log.replication.factor") == 3


def test_single_broker_stays_one_command_away(compose):
    single = compose["services"]["samsa"]
    assert single["profiles"] == ["single"]
    assert single["build"] == "." and "9092:9092" in single["ports"]


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
