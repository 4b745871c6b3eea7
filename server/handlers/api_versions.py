"""ApiVersions (key 18), v0-4: every API this broker serves with the versions its handler declares
(server/handlers/__init__.py), nothing taken from the schemas. Follows KafkaApis.handleApiVersionsRequest
and ApiVersionsRequest.isValid; a version above ours gets v0 with UNSUPPORTED_VERSION (KIP-511).
Deviations: v3+ lists no supported or finalized features (KIP-584), where Kafka lists metadata.version
and the other feature levels.
"""

from __future__ import annotations

import re

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from . import HANDLERS, handler

ApiVersionsResponse = response_class(ApiKey.API_VERSIONS)
# Kafka's ApiVersionsRequest.isValid: software name and version are [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_keys(cluster_mode: bool = False):
    """What this broker serves; the inter-broker APIs only in a ZooKeeper cluster."""
    Key = ApiVersionsResponse.ApiVersion
    return [Key(api_key=h.api_key, min_version=h.min_version, max_version=h.max_version)
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key) if cluster_mode or not h.cluster_only]


def unsupported_version_response() -> object:
    """KIP-511: a client newer than us gets v0 with UNSUPPORTED_VERSION and our ApiVersions range."""
    ours = HANDLERS[ApiKey.API_VERSIONS]
    Key = ApiVersionsResponse.ApiVersion
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[Key(api_key=ApiKey.API_VERSIONS, min_version=ours.min_version, max_version=ours.max_version)],
    )


@handler(ApiKey.API_VERSIONS, 0, 4)
async def handle(ctx, request):
    if ctx.api_version >= 3 and not (_SOFTWARE.fullmatch(request.client_software_name)
                                     and _SOFTWARE.fullmatch(request.client_software_version)):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=api_keys(ctx.services.zookeeper is not None),
                               throttle_time_ms=0)
