"""Kafka's kafka-streams-groups.sh (StreamsGroupCommand, from the Kafka 4.4 jars) against Samsa and
Kafka 4.4 at once, as test_share_groups_tool.py runs kafka-share-groups.sh: a streams group (KIP-1071)
with one member, driven by raw StreamsGroupHeartbeats as a Kafka Streams client sends them (a count by
key: a repartition topic and a changelog topic the broker creates), then --list and --describe (and
--describe --topology: KIP-1331's description, which neither broker stores without a plugin); the
normalized transcripts must be equal.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BrokerPool, broker_kinds
from server_process import HOST
from test_kafka_tools import Tools, assert_same, log4j2, normalize  # noqa: F401 (log4j2: a fixture)
from wire_client import WireClient

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Heartbeat = request_class(ApiKey.STREAMS_GROUP_HEARTBEAT)
FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
GROUP, SOURCE = "tools-streams", "tools-streams-in"
MEMBER, PROCESS = "tools-streams-member-1", "00000000-0000-0000-0000-000000000001"


def topology():
    H = Heartbeat
    return H.Topology(epoch=0, subtopologies=[
        H.Subtopology(subtopology_id="0", source_topics=[SOURCE], repartition_sink_topics=[f"{GROUP}-rep"]),
        H.Subtopology(subtopology_id="1", repartition_source_topics=[H.TopicInfo(name=f"{GROUP}-rep")],
                      state_changelog_topics=[H.TopicInfo(name=f"{GROUP}-store-changelog", topic_configs=[
                          H.KeyValue("cleanup.policy", "compact")])])])


def stable_member(port: int, stop: threading.Event, stable: threading.Event, timeout_s: float = 60) -> None:
    """Heartbeat as a Streams client until the member runs every task of a ready topology (then
    `stable` is set), and on, every second, until `stop` (its session must outlive the tools)."""
    with WireClient(HOST, port) as client:
        deadline = time.monotonic() + timeout_s
        while client.call(FindCoordinator(key_type=0, coordinator_keys=[GROUP]), 4).coordinators[0].error_code:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.2)
        epoch, owned = 0, {}
        while True:
            tasks = [Heartbeat.TaskIds(subtopology_id=s, partitions=ps) for s, ps in sorted(owned.items())]
            request = Heartbeat(group_id=GROUP, member_id=MEMBER, member_epoch=epoch, rebalance_timeout_ms=30000,
                                process_id=PROCESS, topology=topology() if epoch == 0 else None,
                                active_tasks=tasks, standby_tasks=[], warmup_tasks=[],
                                client_tags=[] if epoch == 0 else None)
            response = client.call(request, 1)
            if response.error_code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                                       ErrorCode.COORDINATOR_NOT_AVAILABLE):
                time.sleep(0.2)
                continue
            assert response.error_code == ErrorCode.NONE, response
            epoch = response.member_epoch
            if response.active_tasks is not None:
                owned = {t.subtopology_id: list(t.partitions) for t in response.active_tasks}
            if not response.status and sum(map(len, owned.values())) == 4:
                stable.set()
            if stop.wait(1.0 if stable.is_set() else 0.5):
                return
            assert stable.is_set() or time.monotonic() < deadline, f"the member is not stable: {response}"


def streams_groups_scenario(t: Tools, port: int) -> None:
    t.run("kafka-topics", "--create", "--topic", SOURCE, "--partitions", "2", record=False)
    stop, stable = threading.Event(), threading.Event()
    with ThreadPoolExecutor(1) as ex:
        member = ex.submit(stable_member, port, stop, stable)
        while not stable.wait(0.5):
            if member.done():
                member.result()  # its failure
        try:
            describe(t)
        finally:
            stop.set()
        member.result()
    t.run("kafka-streams-groups", "--describe", "--group", "no-such-group", errors=True)


def describe(t: Tools) -> None:
    g = ["--group", GROUP]
    t.run("kafka-streams-groups", "--list")
    t.run("kafka-streams-groups", "--list", "--state", "Stable")
    t.run("kafka-streams-groups", "--describe", *g, "--state")
    t.run("kafka-streams-groups", "--describe", *g, "--state", "--verbose")
    t.run("kafka-streams-groups", "--describe", *g, "--members")
    t.run("kafka-streams-groups", "--describe", *g, "--members", "--verbose")
    t.run("kafka-streams-groups", "--describe", *g)
    t.run("kafka-streams-groups", "--describe", *g, "--offsets", "--verbose")
    # KIP-1331: no description plugin (Kafka's default), so none is stored.
    t.run("kafka-streams-groups", "--describe", *g, "--topology", errors=True)
    t.run("kafka-topics", "--describe", "--topic", f"{GROUP}-rep")


@pytest.fixture
def streams_pair(tmp_path_factory):
    kinds = broker_kinds()
    if "kafka" not in kinds:
        pytest.skip("compares Samsa's output with Kafka's: needs kafka in SAMSA_COMPAT_BROKERS")
    pools = [BrokerPool(tmp_path_factory, kind, kind) for kind in kinds]
    try:
        yield {kind: pool() for kind, pool in zip(kinds, pools)}
    finally:
        for pool in pools:
            pool.close()


def test_kafka_streams_groups_tool(streams_pair, tmp_path, log4j2):  # noqa: F811
    def one(kind: str) -> str:
        b = streams_pair[kind]
        work = tmp_path / kind
        work.mkdir()
        tools = Tools(b.bootstrap, work, log4j2)
        streams_groups_scenario(tools, b.port)
        (work / "stderr.txt").write_text("\n".join(tools.stderr))
        return "\n".join(normalize(t, b.bootstrap, b.data_dir) for t in tools.transcript)

    with ThreadPoolExecutor(len(streams_pair)) as ex:
        out = dict(zip(streams_pair, ex.map(one, streams_pair)))
    for kind, transcript in out.items():
        (tmp_path / kind / "transcript.txt").write_text(transcript)
    assert f"{GROUP} Stable" in out["kafka"]
    if "samsa" in out:
        assert_same(out, tmp_path)
