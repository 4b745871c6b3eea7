"""Replication: the partitions this broker holds (ReplicaManager, Partition), the follower's fetchers,
the purgatory of parked produces and fetches, fetch sessions, AlterPartition and log dir failures."""
