"""A single broker made to answer as a broker of a ZooKeeper cluster, for the handlers of the
controller's requests: its membership (with `client` standing in for ZooKeeper where a test needs
only a few reads), the metadata cache UpdateMetadata fills, the ZooKeeper-mode control plane and
admin manager, and the ZooKeeper-mode API listing."""

from __future__ import annotations

from samsa.server.handlers import ListenerType
from samsa.server.zookeeper.admin_manager import ZkAdminManager
from samsa.server.zookeeper.control_plane import ZkControlPlane
from samsa.server.zookeeper.membership import ZkMembership
from samsa.server.zookeeper.metadata_cache import ZkMetadataCache


def as_cluster_member(broker, client, broker_epoch: int) -> ZkMetadataCache:
    broker.zookeeper = ZkMembership(client=client, broker_id=broker.node_id, cluster_id=broker.cluster_id,
                                    broker_epoch=broker_epoch)
    cache = ZkMetadataCache(broker.node_id, broker.services.metadata)
    services = broker.services
    services.metadata_cache = cache
    services.admin = ZkAdminManager(client, cache, shared=None)
    services.control_plane = ZkControlPlane(broker.zookeeper, cache)
    services.listener_type = ListenerType.ZK_BROKER
    return cache
