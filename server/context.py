"""What a handler knows about the request it answers (RequestContext), and what of the broker it
may use (BrokerServices: the collaborators Kafka hands its KafkaApis). Handlers reach broker state
through `ctx.services` only, so what they depend on is listed, and typed, here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..wire.protocol import request_class
from .metadata.cache import advertised_on
from .security.authorizer import (
    CLUSTER_NAME, AclOperation, ResourceType, audit_denied, host_address, supported_operations_bit_field,
)

if TYPE_CHECKING:
    import trio

    from ..coordinator.group_config import GroupConfigManager
    from ..wire.codec import Message
    from ..coordinator.producer_id_manager import ProducerIdManager
    from ..storage.log_manager import LogManager
    from .security.authorizer import StandardAuthorizer
    from .metrics.client_telemetry import ClientTelemetry
    from .config.kafka_config import KafkaConfig
    from .control_plane import Controller, ControlPlane
    from .features import BrokerFeatures
    from .handlers import ListenerType
    from .metadata.admin_manager import AdminManager
    from .replication.fetch_session import FetchSessionCache
    from .coordinators.group_service import GroupService
    from .metadata.cache import BrokerInfo, MetadataCache
    from .metadata.image import MetadataStore
    from .network.socket_server import Connection
    from .replication.replica_manager import ReplicaManager
    from .share.share_partition_manager import SharePartitionManager
    from .network.connection_quotas import ConnectionQuotas
    from .throttle import BrokerQuotas
    from .coordinators.txn_service import TxnService
    from .coordinators.share_service import ShareService
    from .share.persister import Persister
    from .security.delegation_tokens import DelegationTokens


class CloseConnection(Exception):
    """Raised by a handler to close the connection instead of answering (Kafka's
    RequestChannel.closeConnection), as for a failed acks=0 produce."""


class DelayedResponse:
    """What a handler returns instead of a response that waits on other brokers (Kafka's delayed
    operation whose completion sends it): an acks=all produce appended, waiting for its ISR.
    `complete` waits and gives the response. Meanwhile the connection may read its next acks=all
    produce (server/network/in_order_responses.py tells when)."""

    __slots__ = ("complete",)

    def __init__(self, complete: Callable[[], Awaitable[Message | None]]) -> None:
        self.complete = complete


@dataclass(frozen=True)
class KafkaPrincipal:
    """Who sent a request (Kafka's KafkaPrincipal): quotas and ACLs key on it."""

    principal_type: str
    name: str
    # Logged in with a delegation token; not part of equality, as in Kafka (KafkaPrincipal.equals).
    token_authenticated: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")  # an unauthenticated connection's principal


@dataclass(eq=False)
class BrokerServices:
    """The broker's state and services as handlers use them; the broker builds it once its logs and
    metadata are loaded."""

    config: KafkaConfig  # dynamic configs applied (it is updated in place)
    node_id: int
    cluster_id: str
    log_dirs: list[Path]
    log_manager: LogManager
    metadata: MetadataStore  # the broker's own image (server/metadata/image.py)
    # What handlers read of the cluster and how they change it, whichever the cluster mode: the
    # single broker's image and its own replicas, or a ZooKeeper cluster's controller and znodes.
    metadata_cache: MetadataCache
    admin: AdminManager
    listener_type: ListenerType  # which APIs are served (Kafka's ApiMessageType.ListenerType)
    features: BrokerFeatures  # the feature levels supported and finalized (server/features.py)
    replica_manager: ReplicaManager
    groups: GroupService  # the group coordinator's shell (Kafka's GroupCoordinator)
    group_configs: GroupConfigManager  # the groups' configs (GROUP resources) over the broker's defaults
    transactions: TxnService  # the transaction coordinator's shell (Kafka's TransactionCoordinator)
    share_coordinator: ShareService  # the share coordinator's shell (Kafka's ShareCoordinator)
    persister: Persister  # share partitions' state, kept by their share coordinators (Kafka's Persister)
    producer_ids: ProducerIdManager
    quotas: BrokerQuotas
    authorizer: StandardAuthorizer | None  # None: authorizer.class.name is empty
    fetch_sessions: FetchSessionCache
    disk_limiter: trio.CapacityLimiter  # fsync, retention, checkpoints: one at a time
    advertised: dict[str, BrokerInfo]  # by listener name, filled in once the listeners are bound
    client_telemetry: ClientTelemetry  # KIP-714: subscriptions, client sessions, pushed metrics
    connection_quotas: ConnectionQuotas  # the listeners' connection limits, reconfigured dynamically
    # The share partitions led here and the share sessions (Kafka's SharePartitionManager): ShareFetch, ShareAcknowledge.
    share_partitions: SharePartitionManager
    # Where a controller sends this broker LeaderAndIsr, UpdateMetadata and StopReplica, and where
    # this broker may be the controller (a ZooKeeper cluster): both None for a single broker.
    control_plane: ControlPlane | None = None
    controller: Controller | None = None
    # The cluster's delegation tokens as this broker knows them (KIP-48); SCRAM logins read them too.
    delegation_tokens: DelegationTokens | None = None

    def broker_info(self, listener: str) -> BrokerInfo:
        """This broker as advertised on `listener` (the first advertised listener otherwise)."""
        return advertised_on(self.advertised, listener)


@dataclass
class RequestContext:
    services: BrokerServices
    connection: "Connection"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    principal: KafkaPrincipal = ANONYMOUS
    request_size: int = 0  # bytes of the request frame
    # Quotas (server/throttle.py): when handling started, time spent parked in long polls, and
    # the throttle time once decided.
    started_ns: int = 0
    waited_ns: int = 0
    throttle_time_ms: int | None = None

    @property
    def listener(self) -> str:
        return self.connection.listener.listener

    # --- authorization (server/security/authorizer.py tells how handlers use these) ---

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME,
                  log_if_denied: bool = True) -> bool:
        """Whether the sender may do `operation` on the resource (Kafka's AuthHelper.authorize);
        always True without an authorizer."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return True
        principal, host = str(self.principal), host_address(self.connection.client_host)
        if authorizer.authorize(principal, host, operation, resource_type, name):
            return True
        if log_if_denied:
            audit_denied(principal, host, operation, resource_type, name,
                         request_class(self.api_key).__name__.removesuffix("Request"))
        return False

    def authorized(self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str],
                   log_if_denied: bool = True) -> set[str]:
        """The names among `names` the sender may do `operation` on (Kafka's filterByAuthorized)."""
        if self.services.authorizer is None:
            return set(names)
        return {name for name in set(names) if self.authorize(operation, resource_type, name, log_if_denied)}

    def authorize_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the sender may do `operation` on some resource of the type (Kafka's
        Authorizer.authorizeByResourceType); always True without an authorizer."""
        authorizer = self.services.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(
            str(self.principal), host_address(self.connection.client_host), operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """The bit field of a response's *_authorized_operations for the resource."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return supported_operations_bit_field(resource_type)
        return authorizer.authorized_operations(str(self.principal), host_address(self.connection.client_host),
                                                resource_type, name)
