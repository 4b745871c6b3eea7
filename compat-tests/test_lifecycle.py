"""The `samsa serve` command line contract: the "started" line, exit 0 on SIGTERM/SIGINT after
flushing (a clean restart keeps records, topics, partitions and topic configs), exit 2 on a bad
config, a server.properties file with --override taking precedence."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from compat_util import confluent_admin, confluent_consume_all, create_topic, wait_for
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource, ResourceType

pytestmark = [pytest.mark.skipif(bool(os.environ.get("SAMSA_COMPAT_BROKER_CMD")),
                                 reason="tests samsa's own command line"),
              pytest.mark.samsa_only("the `samsa serve` command line (Kafka's is kafka-server-start)")]
T = 15


def test_sigterm_exits_zero_and_clean_restart_keeps_everything(broker_factory, topic_name):
    b = broker_factory()
    assert "started" in b.output()
    create_topic(b.bootstrap, topic_name, partitions=2, config={"retention.ms": "12345678"})
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 20, "compression.type": "gzip"})
    for i in range(200):
        p.produce(topic_name, b"rec-%d" % i, key=b"%d" % i, partition=i % 2)
    assert p.flush(T) == 0

    assert b.stop() == 0, "exit code after SIGTERM"
    b.start()
    admin = confluent_admin(b.bootstrap)
    md = admin.list_topics(topic=topic_name, timeout=5).topics[topic_name]
    assert md.error is None and sorted(md.partitions) == [0, 1]
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    entries = admin.describe_configs([res], request_timeout=T)[res].result(T)
    assert entries["retention.ms"].value == "12345678"
    got = confluent_consume_all(b.bootstrap, topic_name, {0: 100, 1: 100})
    assert [m.value() for m in got[0]] == [b"rec-%d" % i for i in range(0, 200, 2)]
    assert [m.value() for m in got[1]] == [b"rec-%d" % i for i in range(1, 200, 2)]


def test_sigint_exits_zero(broker_factory):
    b = broker_factory()
    b.proc.send_signal(signal.SIGINT)
    assert b.proc.wait(15) == 0


def serve_cmd(*args):
    return [sys.executable, "-m", "samsa.server.main", "serve", *args]


@pytest.mark.parametrize("bad", ["num.partitions=lots", "listeners=PLAINTEXT://127.0.0.1:notaport",
                                 "message.max.bytes=-5x"])
def test_bad_config_exits_2(tmp_path, bad):
    cmd = serve_cmd("--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path}",
                    "--override", bad)
    p = subprocess.run(cmd, capture_output=True, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])


def test_missing_properties_file_fails(tmp_path):
    p = subprocess.run(serve_cmd(str(tmp_path / "nope.properties")), capture_output=True, timeout=30)
    assert p.returncode != 0


# pip puts the console script beside the interpreter it installs into (the venv's bin/), which need
# not be on PATH.
SAMSA_SCRIPT = os.path.join(os.path.dirname(sys.executable), "samsa")


@pytest.mark.skipif(not os.path.exists(SAMSA_SCRIPT) and shutil.which("samsa") is None,
                    reason="samsa console script not installed")
def test_console_script(tmp_path):
    script = SAMSA_SCRIPT if os.path.exists(SAMSA_SCRIPT) else "samsa"
    p = subprocess.run([script, "serve", "--override", "num.partitions=lots", "--override",
                        f"log.dirs={tmp_path}"], capture_output=True, timeout=30)
    assert p.returncode == 2, (p.stdout[-2000:], p.stderr[-2000:])


def test_properties_file_with_overrides(broker_factory, topic_name):
    b = broker_factory(properties={"num.partitions": 2, "auto.create.topics.enable": "false",
                                   "log.retention.hours": 100},
                       overrides={"auto.create.topics.enable": "true"})
    p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 10000})
    p.produce(topic_name, b"x", partition=1)
    assert p.flush(T) == 0
    admin = confluent_admin(b.bootstrap)
    md = wait_for(lambda: admin.list_topics(topic=topic_name, timeout=5).topics[topic_name], T)
    assert sorted(md.partitions) == [0, 1], "num.partitions from the file"
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    entries = admin.describe_configs([res], request_timeout=T)[res].result(T)
    assert entries["retention.ms"].value == str(100 * 3600 * 1000), "log.retention.hours from the file"
