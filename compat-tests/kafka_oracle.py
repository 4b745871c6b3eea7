"""Apache Kafka as the compatibility tests' oracle: the real broker beside Samsa.

* `KafkaBroker`: Kafka 4.x in KRaft combined mode (process.roles=broker,controller), one node on
  127.0.0.1, its log dir formatted by `kafka-storage format --standalone` with a random cluster id
  before the first start.
* `KafkaController`: Kafka 4.x as a KRaft controller alone (process.roles=controller), the only
  voter or one of a static quorum; `KafkaKraftBroker`: Kafka 4.x as a broker alone
  (process.roles=broker) under such controllers, beside Samsa's KRaft brokers.
* `ZooKeeper`: a ZooKeeper server (the one Kafka 3.9 ships with) on 127.0.0.1.
* `ZkKafkaBroker`: Kafka 3.9 in ZooKeeper mode against a `ZooKeeper`.

Each is a `server_process.ServerProcess` like conftest's Samsa broker (bootstrap, port, data_dir,
start/stop/kill/restart, output), so a test uses either. The jars come from the cache that
`bash scripts/fetch-jars.sh kafka4 kafka39` fills (nothing downloads here). Logs (log4j to stdout)
go to `<base_dir>/broker.log`.

By hand (scripts/kafka-oracle.sh wraps this):

    python compat-tests/kafka_oracle.py start kafka4|kafka39 [--override key=value ...]
    python compat-tests/kafka_oracle.py stop kafka4|kafka39

`start` prints the bootstrap address; the servers run in $SAMSA_ORACLE_DIR/<profile> (default
/tmp/samsa-oracle-$USER/<profile>), wiped at the next start.
"""

from __future__ import annotations

import argparse
import base64
import getpass
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):  # run as a script or `python -m kafka_oracle` from compat-tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import class_sharing
from server_process import HOST, BrokerStartError, ServerProcess, free_port, write_properties

CACHE = Path(os.environ.get("SAMSA_CACHE") or Path.home() / ".cache" / "samsa")
# Small heap; C1 only and the serial collector: a test broker lives for seconds to minutes on a
# 2-core machine, where C2's compile threads and a parallel GC cost more than they return
# (Kafka 4.4 starts in about 5 s this way instead of 13).
JVM_OPTS = ["-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData",
            "-Djava.awt.headless=true"]
LOG_PATTERN = "[%d] %p %m (%c)%n"
# Every listener name Kafka maps by default, and the controller's.
SECURITY_PROTOCOL_MAP = ("CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                         "SASL_SSL:SASL_SSL")
# What a single node needs: internal topics with one replica.
SINGLE_NODE = {
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}


class OracleUnavailable(RuntimeError):
    pass


def java() -> str:
    found = os.environ.get("JAVA") or shutil.which("java")
    if not found:
        raise OracleUnavailable("no java on PATH: run `bash scripts/fetch-jars.sh` (it installs a JDK)")
    return found


def class_path(profile: str) -> str:
    """`DIR/*` for a profile of jars/pom.xml, from the cache fetch-jars.sh fills."""
    d = CACHE / profile
    if not (d / ".stamp").is_file() or not any(d.glob("*.jar")):
        raise OracleUnavailable(f"no jars in {d}: run `bash scripts/fetch-jars.sh {profile}`")
    return f"{d}/*"


def random_cluster_id() -> str:
    """Like Kafka's Uuid.randomUuid().toString(): url-safe base64 of 16 bytes, no padding, never
    starting with '-' (a command line would take it for an option)."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


class JavaServer(ServerProcess):
    """A server started as `java -cp PROFILE/* MAIN CONFIG` with its log4j config in base_dir."""

    profile = ""
    main_class = ""
    config_name = ""
    start_timeout = 90.0
    stop_timeout = 30.0
    graceful_teardown = False  # a test's Kafka is thrown away: a controlled shutdown only costs time

    def __init__(self, base_dir: Path, overrides: dict[str, object] | None = None,
                 properties: dict[str, object] | None = None):
        super().__init__(base_dir, overrides)
        self.properties = {str(k): str(v) for k, v in (properties or {}).items()}
        self.class_path = class_path(self.profile)
        self.config_path = self.base_dir / self.config_name
        # class_sharing's training run: each JVM writes the classes it loads into this dir (and
        # maps no archive, which is what is being made).
        self.class_lists: Path | None = None

    def settings(self) -> dict[str, str]:
        raise NotImplementedError

    def logging_options(self) -> list[str]:
        raise NotImplementedError

    def java_command(self, main_class: str, *args: str) -> list[str]:
        sharing = ([class_sharing.class_list_option(self.class_lists)] if self.class_lists is not None
                   else class_sharing.options(self.profile))
        # KAFKA_OPTS as Kafka's bin/kafka-run-class.sh passes it: JVM options, e.g. -D system properties.
        kafka_opts = shlex.split(self.env.get("KAFKA_OPTS", ""))
        return [java(), *JVM_OPTS, *sharing, *self.logging_options(), *kafka_opts, "-cp", self.class_path, main_class,
                *args]

    def prepare(self) -> None:
        write_properties(self.config_path, self.settings())

    def command(self) -> list[str]:
        return self.java_command(self.main_class, str(self.config_path))

    def run_storage_format(self, cmd: list[str]) -> None:
        """kafka-storage format (`cmd`), its output in the server's log."""
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== format: {' '.join(cmd)}\n".encode())
            log.flush()
            rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(self.base_dir), timeout=self.start_timeout).returncode
        if rc != 0:
            raise BrokerStartError(f"kafka-storage format exited with code {rc}\n{self.output_tail()}")


class Log4j2Server(JavaServer):
    """Kafka 4.x logs with log4j2."""

    def logging_options(self) -> list[str]:
        path = self.base_dir / "log4j2.properties"
        if not path.exists():
            path.write_text(
                "status = warn\n"
                "appender.out.type = Console\nappender.out.name = out\n"
                f"appender.out.layout.type = PatternLayout\nappender.out.layout.pattern = {LOG_PATTERN}\n"
                "rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = out\n"
                # The full config dump at every start: server.properties beside it says the same.
                "logger.config.name = org.apache.kafka.common.config.AbstractConfig\nlogger.config.level = WARN\n"
            )
        return [f"-Dlog4j2.configurationFile={path}"]


class Log4jServer(JavaServer):
    """Kafka 3.9 and its ZooKeeper log with log4j 1 (reload4j)."""

    def logging_options(self) -> list[str]:
        path = self.base_dir / "log4j.properties"
        if not path.exists():
            path.write_text(
                "log4j.rootLogger=INFO, out\n"
                "log4j.appender.out=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
                f"log4j.appender.out.layout.ConversionPattern={LOG_PATTERN}\n"
                "log4j.logger.org.apache.kafka.common.config.AbstractConfig=WARN\n"
                "log4j.logger.kafka.server.KafkaConfig=WARN\n"
            )
        return [f"-Dlog4j.configuration=file:{path}"]


def with_controller(settings: dict[str, str], controller: str) -> dict[str, str]:
    """Add the controller's listener and its security protocol to whatever a test set."""
    if "CONTROLLER://" not in settings["listeners"]:
        settings["listeners"] += f",CONTROLLER://{controller}"
    if "CONTROLLER:" not in settings["listener.security.protocol.map"]:
        settings["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
    return settings


SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
# The node's own principal on its controller listener once an authorizer refuses by default: a
# PLAINTEXT controller listener would make it User:ANONYMOUS, which a test's ACLs may well refuse
# (or, made a super user, let through on the client listeners too).
CONTROLLER_USER, CONTROLLER_SECRET = "controller", "controller-secret"


def listener_protocols(settings: dict[str, str]) -> dict[str, str]:
    """{listener name: security protocol} of `listeners`."""
    protocol_of = dict(entry.split(":", 1) for entry in settings["listener.security.protocol.map"].split(","))
    names = [listener.split("://", 1)[0] for listener in settings["listeners"].split(",") if listener.strip()]
    return {name: protocol_of.get(name, name) for name in names}


def with_scram_logins(settings: dict[str, str]) -> dict[str, str]:
    """Kafka wants a JAAS login module for every SASL mechanism a listener enables, SCRAM's too
    (whose users live in the metadata, not in the JAAS config); Samsa needs none for SCRAM. Add
    ScramLoginModule where a test gave none."""
    mechanisms = [m.strip() for m in settings.get("sasl.enabled.mechanisms", "").split(",")]
    for name, protocol in listener_protocols(settings).items():
        if not protocol.startswith("SASL_"):
            continue
        for mechanism in (m for m in mechanisms if m.startswith("SCRAM-")):
            key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
            if key not in settings and "sasl.jaas.config" not in settings:
                settings[key] = SCRAM_LOGIN
    return settings


def with_controller_principal(settings: dict[str, str]) -> dict[str, str]:
    """With an authorizer that refuses what no ACL allows, the controller listener becomes
    SASL_PLAINTEXT (PLAIN, user `controller`, a super user): the node registers with and
    forwards requests to its own controller as that user, whatever the test's ACLs say."""
    if "authorizer.class.name" not in settings or settings.get("allow.everyone.if.no.acl.found") == "true":
        return settings
    settings["listener.security.protocol.map"] = ",".join(
        "CONTROLLER:SASL_PLAINTEXT" if entry.startswith("CONTROLLER:") else entry
        for entry in settings["listener.security.protocol.map"].split(","))
    settings["sasl.mechanism.controller.protocol"] = "PLAIN"
    settings["listener.name.controller.sasl.enabled.mechanisms"] = "PLAIN"
    settings["listener.name.controller.plain.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{CONTROLLER_USER}" password="{CONTROLLER_SECRET}" user_{CONTROLLER_USER}="{CONTROLLER_SECRET}";')
    supers = [u for u in settings.get("super.users", "").split(";") if u]
    settings["super.users"] = ";".join([*supers, f"User:{CONTROLLER_USER}"])
    return settings


class KafkaBroker(Log4j2Server):
    """Apache Kafka 4.x, KRaft combined mode, one node (node.id 0, like Samsa's broker)."""

    kind = "kafka"
    profile = "kafka4"
    main_class = "kafka.Kafka"
    config_name = "server.properties"
    started_re = re.compile(r"Kafka Server started")

    def __init__(self, base_dir: Path, overrides: dict[str, object] | None = None,
                 properties: dict[str, object] | None = None):
        super().__init__(base_dir, overrides, properties)
        self.controller_port = free_port()
        self.cluster_id = random_cluster_id()

    def settings(self) -> dict[str, str]:
        controller = f"{HOST}:{self.controller_port}"
        s = {
            "process.roles": "broker,controller",
            "node.id": "0",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": controller,
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "listener.security.protocol.map": SECURITY_PROTOCOL_MAP,
            "log.dirs": str(self.data_dir),
            **{k: str(v) for k, v in SINGLE_NODE.items()},
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **self.properties,
            **self.overrides,
        }
        return with_controller_principal(with_scram_logins(with_controller(s, controller)))

    def prepare(self) -> None:
        super().prepare()
        if not (self.data_dir / "meta.properties").exists():
            self.format_storage()

    def format_storage(self) -> None:
        """kafka-storage format --standalone: this node is the quorum's only voter."""
        self.run_storage_format(self.java_command("kafka.tools.StorageTool", "format", "--cluster-id", self.cluster_id,
                                                  "--config", str(self.config_path), "--standalone"))


class KafkaController(Log4j2Server):
    """Apache Kafka 4.x as a KRaft controller alone (process.roles=controller): the quorum's only
    voter (`kafka-storage format --standalone`), or one of a static quorum (`voters`: node id ->
    "host:port" of every controller, controller.quorum.voters; all formatted with the same
    `cluster_id`): the controller of Samsa brokers in KRaft broker mode. `features`: --feature
    NAME=LEVEL at format time (levels the brokers must support)."""

    kind = "kafka-controller"
    profile = "kafka4"
    main_class = "kafka.Kafka"
    config_name = "controller.properties"
    started_re = re.compile(r"Kafka Server started")

    def __init__(self, base_dir: Path, overrides: dict[str, object] | None = None,
                 properties: dict[str, object] | None = None, node_id: int = 1,
                 features: dict[str, int] | None = None, voters: dict[int, str] | None = None,
                 cluster_id: str | None = None, port: int | None = None):
        super().__init__(base_dir, overrides, properties)
        self.node_id = node_id
        self.cluster_id = cluster_id or random_cluster_id()
        self.features = dict(features or {})
        self.voters = voters
        if port is not None:
            self.port = port

    def settings(self) -> dict[str, str]:
        return {
            "process.roles": "controller",
            "node.id": str(self.node_id),
            "controller.listener.names": "CONTROLLER",
            "listeners": f"CONTROLLER://{self.host}:{self.port}",
            **({"controller.quorum.bootstrap.servers": self.bootstrap} if self.voters is None else
               {"controller.quorum.voters": ",".join(f"{n}@{address}" for n, address in sorted(self.voters.items()))}),
            "log.dirs": str(self.data_dir),
            **self.properties,
            **self.overrides,
        }

    def prepare(self) -> None:
        super().prepare()
        if not (self.data_dir / "meta.properties").exists():
            features = [arg for name, level in self.features.items() for arg in ("--feature", f"{name}={level}")]
            quorum = ["--standalone"] if self.voters is None else []  # a static quorum's voters are configured
            cmd = self.java_command("kafka.tools.StorageTool", "format", "--cluster-id", self.cluster_id,
                                    "--config", str(self.config_path), *quorum, *features)
            self.run_storage_format(cmd)


class KafkaKraftBroker(Log4j2Server):
    """Apache Kafka 4.x as a broker alone (process.roles=broker) under KafkaControllers, beside
    Samsa's KRaft brokers: `voters` as the controllers' (controller.quorum.voters), formatted with
    their `cluster_id` (kafka-storage format, no quorum options: a broker holds no voter set)."""

    kind = "kafka-broker"
    profile = "kafka4"
    main_class = "kafka.Kafka"
    config_name = "broker.properties"
    started_re = re.compile(r"Kafka Server started")

    def __init__(self, base_dir: Path, node_id: int, voters: dict[int, str], cluster_id: str,
                 overrides: dict[str, object] | None = None, properties: dict[str, object] | None = None):
        super().__init__(base_dir, overrides, properties)
        self.node_id = node_id
        self.voters = voters
        self.cluster_id = cluster_id

    def settings(self) -> dict[str, str]:
        return {
            "process.roles": "broker",
            "node.id": str(self.node_id),
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": ",".join(f"{n}@{address}" for n, address in sorted(self.voters.items())),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "listener.security.protocol.map": SECURITY_PROTOCOL_MAP,
            "log.dirs": str(self.data_dir),
            **self.properties,
            **self.overrides,
        }

    def prepare(self) -> None:
        super().prepare()
        if not (self.data_dir / "meta.properties").exists():
            cmd = self.java_command("kafka.tools.StorageTool", "format", "--cluster-id", self.cluster_id,
                                    "--config", str(self.config_path))
            self.run_storage_format(cmd)


class ZooKeeper(Log4jServer):
    """The ZooKeeper server on Kafka 3.9's class path, standalone."""

    kind = "zookeeper"
    profile = "kafka39"
    main_class = "org.apache.zookeeper.server.ZooKeeperServerMain"
    config_name = "zoo.cfg"
    started_re = re.compile(r"binding to port")

    def settings(self) -> dict[str, str]:
        return {
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "tickTime": "2000",
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok",
            **self.properties,
            **self.overrides,
        }

    def ready(self) -> bool:
        return self.four_letter_word("ruok") == "imok"

    def four_letter_word(self, word: str) -> str:
        try:
            with socket.create_connection((self.host, self.port), timeout=2) as s:
                s.sendall(word.encode())
                s.shutdown(socket.SHUT_WR)
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
                return reply.decode(errors="replace")
        except OSError:
            return ""

    @property
    def connect(self) -> str:
        return self.bootstrap


class ZkKafkaBroker(Log4jServer):
    """Apache Kafka 3.9 in ZooKeeper mode (broker.id 0 unless overridden)."""

    kind = "kafka39"
    profile = "kafka39"
    main_class = "kafka.Kafka"
    config_name = "server.properties"
    started_re = re.compile(r"\[KafkaServer id=\d+\] started")

    def __init__(self, base_dir: Path, zookeeper_connect: str, overrides: dict[str, object] | None = None,
                 properties: dict[str, object] | None = None):
        super().__init__(base_dir, overrides, properties)
        self.zookeeper_connect = zookeeper_connect

    def settings(self) -> dict[str, str]:
        return {
            "broker.id": "0",
            "zookeeper.connect": self.zookeeper_connect,
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **{k: str(v) for k, v in SINGLE_NODE.items()},
            **self.properties,
            **self.overrides,
        }


# -- by hand: start and stop in a directory that outlives this process ---------------------------

def state_dir(profile: str) -> Path:
    root = os.environ.get("SAMSA_ORACLE_DIR") or f"/tmp/samsa-oracle-{getpass.getuser()}"
    return Path(root) / profile


def server_alive(pid: int, base_dir: Path) -> bool:
    """pid runs a server of ours (not a recycled pid): its command line names base_dir."""
    try:
        return str(base_dir) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def start(profile: str, overrides: dict[str, str]) -> dict:
    root = state_dir(profile)
    state_file = root / "state.json"
    if state_file.exists():
        state = json.loads(state_file.read_text())
        if any(server_alive(p["pid"], Path(p["dir"])) for p in state["servers"]):
            raise SystemExit(f"{profile} already running at {state['bootstrap']} ({root}): stop it first")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    servers: list[ServerProcess] = []
    try:
        if profile == "kafka4":
            servers.append(KafkaBroker(root / "kafka", overrides).start())
        elif profile == "kafka39":
            zk = ZooKeeper(root / "zookeeper").start()
            servers.append(zk)
            servers.append(ZkKafkaBroker(root / "kafka", zk.connect, overrides).start())
        else:
            raise SystemExit(f"unknown profile {profile!r}: kafka4 or kafka39")
    except BaseException:
        for s in reversed(servers):
            s.kill()
        raise
    state = {"bootstrap": servers[-1].bootstrap,
             "servers": [{"kind": s.kind, "pid": s.proc.pid, "dir": str(s.base_dir), "address": s.bootstrap,
                          "log": str(s.log_path)} for s in servers]}
    state_file.write_text(json.dumps(state, indent=1))
    return state


def stop(profile: str, timeout: float = 30.0) -> None:
    state_file = state_dir(profile) / "state.json"
    if not state_file.exists():
        print(f"{profile}: not started here ({state_file} missing)", file=sys.stderr)
        return
    for server in reversed(json.loads(state_file.read_text())["servers"]):  # the broker before ZooKeeper
        pid, base_dir = server["pid"], Path(server["dir"])
        if not server_alive(pid, base_dir):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while server_alive(pid, base_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        if server_alive(pid, base_dir):
            os.kill(pid, signal.SIGKILL)
        print(f"{profile}: stopped {server['kind']} (pid {pid}); logs in {server['log']}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka-oracle", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["start", "stop"])
    ap.add_argument("profile", choices=["kafka4", "kafka39"])
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for server.properties (start only)")
    args = ap.parse_args(argv)
    if args.action == "stop":
        stop(args.profile)
        return 0
    overrides = dict(o.split("=", 1) for o in args.override)
    try:
        state = start(args.profile, overrides)
    except (OracleUnavailable, BrokerStartError) as e:
        print(f"kafka-oracle: {e}", file=sys.stderr)
        return 1
    for s in state["servers"]:
        print(f"{args.profile}: {s['kind']} at {s['address']} (pid {s['pid']}), log {s['log']}", file=sys.stderr)
    print(state["bootstrap"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
