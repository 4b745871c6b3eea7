"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM credentials, with the
checks and messages of Kafka's ScramControlManager (ControllerApis.handleAlterUserScramCredentials):
ALTER on the cluster; every accepted change of the request is stored at once in the metadata image;
a user named twice in one request gets DUPLICATE_RESOURCE.
In a ZooKeeper cluster each user's credentials go to /config/users/<user> (Kafka's credential
string under the mechanism's name, beside the user's quotas) with a /config/changes notification,
as Kafka 3.9's ZkAdminManager.alterUserScramCredentials writes them.
Deviations: none known.
"""

from __future__ import annotations

from typing import Any

from ...client.scram import MAX_ITERATIONS, ScramMechanism
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import ALTER, CLUSTER
from ..security.scram import ScramCredential
from . import handler

Response = response_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
Result = Response.AlterUserScramCredentialsResult
_Error = tuple[ErrorCode, str]  # an alteration's error code and message
_TWICE: _Error = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")


def _mechanism(name: str, mechanism_type: int) -> ScramMechanism | _Error:
    """The alteration's mechanism, or why its user name or mechanism is unacceptable."""
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanism = ScramMechanism.from_type(mechanism_type)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return mechanism


def _check_deletion(stored, deletion) -> ScramMechanism | _Error:
    """The mechanism whose credential the deletion removes, or why it cannot."""
    mechanism = _mechanism(deletion.name, deletion.mechanism)
    if isinstance(mechanism, ScramMechanism) and mechanism.mechanism_name not in stored.get(deletion.name, {}):
        return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    return mechanism


def _check_upsertion(upsertion) -> ScramMechanism | _Error:
    """The mechanism of the credential the upsertion stores, or why it cannot."""
    mechanism = _mechanism(upsertion.name, upsertion.mechanism)
    if not isinstance(mechanism, ScramMechanism):
        return mechanism
    if upsertion.iterations < mechanism.min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not upsertion.salt or not upsertion.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return mechanism


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, forwarded=True)
async def handle(ctx, request):
    if not ctx.authorize(ALTER, CLUSTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return Response(throttle_time_ms=0, results=[Result(user=user, error_code=code, error_message=code.message)
                                                     for user in users])
    services = ctx.services
    stored = services.metadata_cache.scram_credentials
    # The accepted alterations by user name: a deletion's mechanism, an upsertion and its mechanism.
    deletions: dict[str, ScramMechanism] = {}
    upsertions: dict[str, tuple[Any, ScramMechanism]] = {}
    errors: dict[str, _Error] = {}
    for deletion in request.deletions:
        if deletion.name in errors:
            continue
        if deletions.pop(deletion.name, None) is not None:
            errors[deletion.name] = _TWICE
        elif isinstance(checked := _check_deletion(stored, deletion), ScramMechanism):
            deletions[deletion.name] = checked
        else:
            errors[deletion.name] = checked
    for upsertion in request.upsertions:
        if upsertion.name in errors:
            continue
        if deletions.pop(upsertion.name, None) is not None or upsertions.pop(upsertion.name, None) is not None:
            errors[upsertion.name] = _TWICE
        elif isinstance(checked := _check_upsertion(upsertion), ScramMechanism):
            upsertions[upsertion.name] = upsertion, checked
        else:
            errors[upsertion.name] = checked

    if deletions or upsertions:
        await services.admin.alter_scram_credentials(services, deletions, {
            name: (mechanism, ScramCredential.from_salted_password(mechanism, upsertion.salt,
                                                                   upsertion.salted_password, upsertion.iterations))
            for name, (upsertion, mechanism) in upsertions.items()})

    results = [Result(user=name, error_code=ErrorCode.NONE, error_message=None) for name in (*deletions, *upsertions)]
    results += [Result(user=name, error_code=code, error_message=message) for name, (code, message) in errors.items()]
    return Response(throttle_time_ms=0, results=results)
