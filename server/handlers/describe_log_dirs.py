"""DescribeLogDirs (key 35), v0-5: each log dir with the size of the partitions in it, (v4) its
total and usable bytes, and (v5, KIP-1066) whether it is cordoned (`cordoned.log.dirs`, "*" for all). Follows KafkaApis.handleDescribeLogDirsRequest and ReplicaManager.describeLogDirs:
DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED from v3, an empty answer before). A log dir
that failed (storage/log_dir_failure_channel.py) is answered with KAFKA_STORAGE_ERROR alone.
A replica moving to another log dir (AlterReplicaLogDirs) is listed there too, is_future_key set,
its offset_lag how far its log end offset is behind the current replica's.
Deviations: a current replica's offset_lag is always 0 (its high watermark is never behind what
this broker holds: Kafka's can be for a follower); v0 is served as in Kafka 3.9 (Kafka 4.0
removed it, KIP-896).
"""

from __future__ import annotations

import os
from pathlib import Path

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, DESCRIBE
from . import handler

DescribeLogDirsResponse = response_class(ApiKey.DESCRIBE_LOG_DIRS)
Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicEntry = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionEntry = DescribeLogDirsResponse.DescribeLogDirsPartition


def cordoned_log_dirs(config, log_dirs) -> set:
    """The log dirs `cordoned.log.dirs` names, as Kafka's AbstractKafkaConfig.cordonedLogDirs ("*": all)."""
    named = config.get("cordoned.log.dirs")
    if "*" in named:
        return set(log_dirs)
    return {Path(d).resolve() for d in named}


@handler(ApiKey.DESCRIBE_LOG_DIRS, 0, 5)
async def handle(ctx, request):
    services = ctx.services
    if not ctx.authorize(DESCRIBE, CLUSTER):  # v0-2 have no error code: nothing to describe
        return DescribeLogDirsResponse(throttle_time_ms=0, results=[], error_code=(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED if ctx.api_version >= 3 else ErrorCode.NONE))
    if request.topics is None:
        wanted = {(t, p) for (t, p) in services.replica_manager.partitions}
    else:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    results = []
    cordoned = cordoned_log_dirs(services.config, services.log_dirs)
    offline = services.log_manager.failure_channel.offline_log_dirs
    for log_dir in services.log_dirs:
        if log_dir in offline:  # Kafka: "Log directory ... is offline", no partitions, no sizes
            results.append(Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(log_dir), topics=[]))
            continue
        by_topic: dict[str, list] = {}
        for (topic, index), partition in sorted(services.replica_manager.partitions.items()):
            if (topic, index) not in wanted or partition.is_offline:
                continue
            current = partition.log
            if current.dir.parent == log_dir:
                by_topic.setdefault(topic, []).append(PartitionEntry(
                    partition_index=index, partition_size=current.size,
                    offset_lag=0, is_future_key=False))
            future = services.log_manager.get_future_log(topic, index)
            if future is not None and future.dir.parent == log_dir and not future.is_offline:
                by_topic.setdefault(topic, []).append(PartitionEntry(
                    partition_index=index, partition_size=future.size,
                    offset_lag=current.log_end_offset - future.log_end_offset, is_future_key=True))
        stats = os.statvfs(log_dir)
        results.append(Result(error_code=ErrorCode.NONE, log_dir=str(log_dir),
                              topics=[TopicEntry(name=t, partitions=ps) for t, ps in by_topic.items()],
                              total_bytes=stats.f_blocks * stats.f_frsize, usable_bytes=stats.f_bavail * stats.f_frsize,
                              is_cordoned=log_dir in cordoned))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
