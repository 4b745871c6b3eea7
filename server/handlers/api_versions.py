"""ApiVersions (key 18), v0-5: every API this broker serves with the versions its handler declares
(server/handlers/__init__.py), nothing taken from the schemas. Follows KafkaApis.handleApiVersionsRequest
and ApiVersionsRequest.isValid; a version above ours gets v0 with UNSUPPORTED_VERSION (KIP-511).
v5 (KIP-1242) names the cluster and node the client means to reach (both or neither, else
INVALID_REQUEST); when they are not this broker's, REBOOTSTRAP_REQUIRED: the client's bootstrap
address now leads to another cluster or broker, and it must look the cluster up again.
v3+ lists the supported and finalized features (KIP-584) as Kafka 4.4 does, but only at levels Samsa
implements, and the epoch of the finalized ones, which UpdateFeatures moves (server/features.py).
Deviations: kraft.version, streams.version and eligible.leader.replicas.version are supported at
level 0 only and not finalized (Kafka 4.4: finalized at 1, 1, 1): Samsa has no KRaft quorum
(KIP-853), no streams groups (KIP-1071) and no eligible leader replicas (KIP-966); share.version goes
up to 1 (share groups, KIP-932), not 2 (their dead-letter queues). A ZooKeeper cluster finalizes
transaction.version 1 and serves the transaction APIs up to Kafka 3.9's versions (no KIP-890 part 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...wire.errors import ErrorCode
from ..features import BrokerFeatures
from ...wire.protocol import ApiKey, response_class
from . import HANDLERS, ListenerType, handler

if TYPE_CHECKING:
    from ...wire.codec import Message

ApiVersionsResponse = response_class(ApiKey.API_VERSIONS)
# Kafka's ApiVersionsRequest.isValid: software name and version are [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def supported_features(features: BrokerFeatures):
    Key = ApiVersionsResponse.SupportedFeatureKey
    return [Key(name=name, min_version=low, max_version=high) for name, (low, high) in features.supported.items()]


def finalized_features(features: BrokerFeatures):
    Key = ApiVersionsResponse.FinalizedFeatureKey
    return [Key(name=name, max_version_level=level, min_version_level=level)
            for name, level in features.finalized.items() if level > 0]


def api_keys(listener_type: ListenerType = ListenerType.BROKER, forwards: bool = False,
             controller: Mapping[int, tuple[int, int] | None] | None = None):
    """What this broker serves; the inter-broker APIs only in a ZooKeeper cluster, the KRaft-mode
    ones (client telemetry) only outside one, those only a controller answers only where forwarded
    to one (`forwards`), those forwarded no wider than the active controller serves them
    (`controller`: AdminManager.controller_versions). Those of a feature whatever its level, as Kafka 4.4."""
    Key = ApiVersionsResponse.ApiVersion
    listed = []
    for h in sorted(HANDLERS.values(), key=lambda h: h.api_key):
        if not h.served(listener_type, forwards):
            continue
        low, high = h.min_version, h.max_version_for(listener_type)
        if controller is not None and h.api_key in controller:
            theirs = controller[h.api_key]
            if theirs is None or max(low, theirs[0]) > min(high, theirs[1]):
                continue
            low, high = max(low, theirs[0]), min(high, theirs[1])
        listed.append(Key(api_key=h.api_key, min_version=low, max_version=high))
    return listed


# The lists every ApiVersions response carries, made once: building them was most of the handler's
# time, which a client flooding the broker with ApiVersions requests multiplies (issue 17). Keyed by
# the number of handlers too, so that a handler registered later is listed, by the features' epoch,
# which each change of a finalized level moves, and by the active controller's versions (the same
# object until they change: keyed by its id, and kept in the value so that the id is not reused).
# Encoding only reads them.
_listed: dict[tuple, tuple[list, list, list, object]] = {}


def _listings(listener_type: ListenerType, features: BrokerFeatures, forwards: bool = False,
              controller: Mapping[int, tuple[int, int] | None] | None = None) -> tuple[list, list, list, object]:
    key = (listener_type, features, features.epoch, len(HANDLERS), forwards, id(controller))
    listed = _listed.get(key)
    if listed is None:
        for stale in [k for k in _listed if k[1] is features and (k[2] != features.epoch or k[4:] != key[4:])]:
            del _listed[stale]
        listed = _listed[key] = (api_keys(listener_type, forwards, controller), supported_features(features),
                                 finalized_features(features), controller)
    return listed


def unsupported_version_response() -> Message:
    """KIP-511: a client newer than us gets v0 with UNSUPPORTED_VERSION and our ApiVersions range."""
    ours = HANDLERS[ApiKey.API_VERSIONS]
    Key = ApiVersionsResponse.ApiVersion
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[Key(api_key=ApiKey.API_VERSIONS, min_version=ours.min_version, max_version=ours.max_version)],
    )


def valid(request, version: int) -> bool:
    """Kafka's ApiVersionsRequest.isValid."""
    if version >= 5 and (request.cluster_id is None) != (request.node_id == -1):
        return False
    return version < 3 or bool(_SOFTWARE.fullmatch(request.client_software_name)
                               and _SOFTWARE.fullmatch(request.client_software_version))


@handler(ApiKey.API_VERSIONS, 0, 5)
async def handle(ctx, request):
    if not valid(request, ctx.api_version):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    services = ctx.services
    if ctx.api_version >= 5 and request.cluster_id is not None and (
            request.cluster_id != services.cluster_id or request.node_id != services.node_id):
        return ApiVersionsResponse(error_code=ErrorCode.REBOOTSTRAP_REQUIRED)
    if ctx.api_version >= 3:
        ctx.connection.client_software_name = request.client_software_name
        ctx.connection.client_software_version = request.client_software_version
    admin = services.admin
    listed_api_keys, supported, finalized, _ = _listings(services.listener_type, services.features,
                                                         admin.forwards_to_controller, admin.controller_versions())
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=listed_api_keys, throttle_time_ms=0,
                               supported_features=supported, finalized_features_epoch=ctx.services.features.epoch,
                               finalized_features=finalized)
