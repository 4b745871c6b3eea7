"""DescribeUserScramCredentials (key 50), v0: which SCRAM mechanisms each user has, with iterations
(never salts or keys). Follows KafkaApis.handleDescribeUserScramCredentialsRequest and
ScramImage.describe: DESCRIBE on the cluster; a user asked for twice is DUPLICATE_RESOURCE, an
unknown one RESOURCE_NOT_FOUND.
Deviations: none known.
"""

from __future__ import annotations

from ...client.scram import ScramMechanism
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, DESCRIBE
from . import handler

Response = response_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
Result = Response.DescribeUserScramCredentialsResult
CredentialInfo = Response.CredentialInfo


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
async def handle(ctx, request):
    if not ctx.authorize(DESCRIBE, CLUSTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return Response(throttle_time_ms=0, error_code=code, error_message=code.message, results=[])
    stored = ctx.services.metadata_cache.scram_credentials
    if not request.users:  # null or empty: every user
        wanted = {user: False for user in stored}
    else:
        wanted = {}
        for user in request.users:
            wanted[user.name] = user.name in wanted  # True: asked for twice
    results = []
    for user, duplicate in wanted.items():
        if duplicate:
            results.append(Result(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=
                                  f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"))
            continue
        infos = [CredentialInfo(mechanism=mechanism.type_id, iterations=stored[user][mechanism.mechanism_name]["iterations"])
                 for mechanism in ScramMechanism if mechanism.mechanism_name in stored.get(user, {})]
        if infos:
            results.append(Result(user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos))
        else:
            results.append(Result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message=
                                  f"Attempt to describe a user credential that does not exist: {user}"))
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="", results=results)
