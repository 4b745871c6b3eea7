"""AlterReplicaLogDirs (key 34), v1-2: move partitions' replicas on this broker to other log
directories (KafkaApis.handleAlterReplicaLogDirsRequest, ReplicaManager.alterReplicaLogDirs in
server/replication/replica_manager.py; the copy and the swap in replica_alter_log_dirs.py and
storage/). ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition asked
about. A partition named twice takes the last directory, as Kafka's map of the request does.
Deviations: topics are answered in the order the request names them (Kafka's follow its hash
maps); v0 is not served (Kafka 4.0 removed it, KIP-896). The copy is throttled by
replica.alter.log.dirs.io.max.bytes.per.second, as Kafka's.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import ALTER, CLUSTER
from . import handler

AlterReplicaLogDirsResponse = response_class(ApiKey.ALTER_REPLICA_LOG_DIRS)
TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult


@handler(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2)
async def handle(ctx, request):
    if not ctx.authorize(ALTER, CLUSTER):  # AlterReplicaLogDirsRequest.getErrorResponse: each as asked
        return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
            TopicResult(topic_name=t.name, partitions=[
                PartitionResult(partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                for p in t.partitions])
            for d in request.dirs for t in d.topics])
    partition_dirs = {(t.name, p): d.path for d in request.dirs for t in d.topics for p in t.partitions}
    topics = ctx.services.metadata_cache.topics

    def known(topic: str, index: int) -> bool:
        found = topics.get(topic)
        return found is not None and 0 <= index < found.num_partitions

    errors = ctx.services.replica_manager.alter_replica_log_dirs(partition_dirs, known)
    by_topic: dict[str, list] = {}
    for (topic, index), code in errors.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=index, error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        TopicResult(topic_name=topic, partitions=partitions) for topic, partitions in by_topic.items()])
