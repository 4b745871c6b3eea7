"""Records a metadata log Kafka 4.4's controller writes, for the unit tests that replay it
(tests/server/test_kraft_metadata_replay.py): one Kafka controller with two Samsa brokers (nodes 2
and 3) registered, then, through the controller's own APIs,

- before the snapshot: topics `orders` (3 partitions on [2, 3]) and `doomed`, a topic config set and
  one deleted, a broker-wide default, ACLs, a client quota, a SCRAM credential;
- the controller's snapshot (metadata.log.max.snapshot.interval.ms);
- after it: `orders` grows to 4 partitions, `doomed` is deleted, an ACL is deleted, the quota is
  removed, broker 3's controlled shutdown moves the leaders and shrinks the ISRs.

The controller is stopped cleanly and its `__cluster_metadata-0` (segments and snapshots) copied to
tests/storage/data/kraft_metadata_44. Run by hand from the repository root, with the worktree's
PYTHONPATH: `.venv/bin/python compat-tests/record_kraft_metadata.py`.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from compat_util import wait_for  # noqa: E402
from kafka_oracle import KafkaController  # noqa: E402
from kraft_nodes import CONTROLLER_FEATURES, KraftSamsaBroker  # noqa: E402

from samsa.client.blocking import BlockingConnection  # noqa: E402
from samsa.wire.errors import ErrorCode  # noqa: E402
from samsa.wire.protocol import ApiKey, request_class  # noqa: E402

TARGET = Path(__file__).parents[1] / "tests" / "storage" / "data" / "kraft_metadata_44"
CreateTopics = request_class(ApiKey.CREATE_TOPICS)
AlterConfigs = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
CreateAcls = request_class(ApiKey.CREATE_ACLS)
DeleteAcls = request_class(ApiKey.DELETE_ACLS)
AlterQuotas = request_class(ApiKey.ALTER_CLIENT_QUOTAS)
AlterScram = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)
DeleteTopics = request_class(ApiKey.DELETE_TOPICS)
TOPIC, BROKER, SET, DELETE = 2, 4, 0, 1


def call(controller: KafkaController, request, version: int):
    with BlockingConnection.connect(controller.host, controller.port) as connection:
        return connection.call(request, version)


def before_the_snapshot(controller: KafkaController) -> None:
    response = call(controller, CreateTopics(timeout_ms=30000, topics=[
        CreateTopics.CreatableTopic(name="orders", num_partitions=-1, replication_factor=-1, assignments=[
            CreateTopics.CreatableReplicaAssignment(partition_index=p, broker_ids=[2 + p % 2, 3 - p % 2])
            for p in range(3)], configs=[CreateTopics.CreatableTopicConfig(name="retention.ms", value="3600000")]),
        CreateTopics.CreatableTopic(name="doomed", num_partitions=1, replication_factor=1)]), 7)
    assert all(t.error_code == ErrorCode.NONE for t in response.topics), response
    response = call(controller, AlterConfigs(resources=[
        AlterConfigs.AlterConfigsResource(resource_type=TOPIC, resource_name="orders", configs=[
            AlterConfigs.AlterableConfig(name="cleanup.policy", config_operation=SET, value="compact"),
            AlterConfigs.AlterableConfig(name="retention.ms", config_operation=DELETE, value=None)]),
        AlterConfigs.AlterConfigsResource(resource_type=BROKER, resource_name="", configs=[
            AlterConfigs.AlterableConfig(name="log.retention.bytes", config_operation=SET, value="1073741824")])]), 1)
    assert all(r.error_code == ErrorCode.NONE for r in response.responses), response
    response = call(controller, CreateAcls(creations=[
        CreateAcls.AclCreation(resource_type=2, resource_name="orders", resource_pattern_type=3,
                               principal="User:alice", host="*", operation=3, permission_type=3),
        CreateAcls.AclCreation(resource_type=3, resource_name="billing-", resource_pattern_type=4,
                               principal="User:bob", host="*", operation=2, permission_type=3)]), 3)
    assert all(r.error_code == ErrorCode.NONE for r in response.results), response
    response = call(controller, AlterQuotas(entries=[AlterQuotas.EntryData(
        entity=[AlterQuotas.EntityData(entity_type="user", entity_name="alice")],
        ops=[AlterQuotas.OpData(key="producer_byte_rate", value=1024.0)])]), 1)
    assert all(e.error_code == ErrorCode.NONE for e in response.entries), response
    response = call(controller, AlterScram(upsertions=[AlterScram.ScramCredentialUpsertion(
        name="alice", mechanism=1, iterations=4096, salt=b"salt" * 4, salted_password=b"p" * 32)]), 0)
    assert all(r.error_code == ErrorCode.NONE for r in response.results), response


def after_the_snapshot(controller: KafkaController, brokers: list[KraftSamsaBroker]) -> None:
    response = call(controller, CreatePartitions(timeout_ms=30000, validate_only=False, topics=[
        CreatePartitions.CreatePartitionsTopic(name="orders", count=4, assignments=[
            CreatePartitions.CreatePartitionsAssignment(broker_ids=[3, 2])])]), 3)
    assert all(r.error_code == ErrorCode.NONE for r in response.results), response
    response = call(controller, DeleteTopics(timeout_ms=30000, topics=[DeleteTopics.DeleteTopicState(name="doomed")]), 6)
    assert all(r.error_code == ErrorCode.NONE for r in response.responses), response
    response = call(controller, DeleteAcls(filters=[DeleteAcls.DeleteAclsFilter(
        resource_type_filter=3, resource_name_filter="billing-", pattern_type_filter=4, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)]), 3)
    assert all(r.error_code == ErrorCode.NONE for r in response.filter_results), response
    response = call(controller, AlterQuotas(entries=[AlterQuotas.EntryData(
        entity=[AlterQuotas.EntityData(entity_type="user", entity_name="alice")],
        ops=[AlterQuotas.OpData(key="producer_byte_rate", value=0.0, remove=True)])]), 1)
    assert all(e.error_code == ErrorCode.NONE for e in response.entries), response
    assert brokers[1].stop(timeout=60) == 0  # broker 3's controlled shutdown: leaders move, ISRs shrink


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="record-kraft-"))
    controller = KafkaController(base / "controller", features=CONTROLLER_FEATURES, properties={
        "metadata.max.idle.interval.ms": 0,  # no NoOpRecords: a small log
        "metadata.log.max.snapshot.interval.ms": 8000,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    brokers = [KraftSamsaBroker(base / f"samsa{n}", controller, node_id=n) for n in (2, 3)]
    metadata_dir = controller.data_dir / "__cluster_metadata-0"
    try:
        controller.start()
        for broker in brokers:
            broker.start()
        time.sleep(9)  # the registrations' snapshot, if any, before the records of interest
        before = set(metadata_dir.glob("*.checkpoint"))
        before_the_snapshot(controller)
        wait_for(lambda: set(metadata_dir.glob("*.checkpoint")) - before, timeout=60, what="a snapshot")
        after_the_snapshot(controller, brokers)
        assert brokers[0].stop(timeout=60) == 0
        assert controller.stop(timeout=60) is not None  # exits 143 on SIGTERM, after a clean shutdown
    finally:
        for broker in brokers:
            broker.kill()
        controller.kill()
    shutil.rmtree(TARGET, ignore_errors=True)
    TARGET.mkdir(parents=True)
    for path in sorted(metadata_dir.iterdir()):
        if path.suffix in (".log", ".checkpoint"):
            shutil.copy(path, TARGET / path.name)
            print(TARGET / path.name, path.stat().st_size)
    shutil.rmtree(base)


if __name__ == "__main__":
    main()
