"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM credentials, with the
checks and messages of Kafka's ScramControlManager (ControllerApis.handleAlterUserScramCredentials):
ALTER on the cluster; every accepted change of the request is stored at once in the metadata image;
a user named twice in one request gets DUPLICATE_RESOURCE.
Deviations: none known.
"""

from __future__ import annotations

import copy

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..authorizer import ALTER, CLUSTER
from ..security.scram import MAX_ITERATIONS, ScramCredential, ScramMechanism
from . import handler

Response = response_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
Result = Response.AlterUserScramCredentialsResult
_TWICE = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")


def _check_name_and_mechanism(name: str, mechanism: ScramMechanism | None):
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_deletion(stored, deletion):
    mechanism = ScramMechanism.from_type(deletion.mechanism)
    error = _check_name_and_mechanism(deletion.name, mechanism)
    if error is None and mechanism.mechanism_name not in stored.get(deletion.name, {}):
        error = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    return error


def _check_upsertion(upsertion):
    mechanism = ScramMechanism.from_type(upsertion.mechanism)
    error = _check_name_and_mechanism(upsertion.name, mechanism)
    if error is None:
        if upsertion.iterations < mechanism.min_iterations:
            error = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        elif upsertion.iterations > MAX_ITERATIONS:
            error = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        elif not upsertion.salt or not upsertion.salted_password:
            error = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return error


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
async def handle(ctx, request):
    if not ctx.authorize(ALTER, CLUSTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return Response(throttle_time_ms=0, results=[Result(user=user, error_code=code, error_message=code.message)
                                                     for user in users])
    metadata = ctx.services.metadata
    stored = metadata.scram_credentials
    deletions, upsertions, errors = {}, {}, {}
    for deletion in request.deletions:
        if deletion.name in errors:
            continue
        if deletions.pop(deletion.name, None) is not None:
            errors[deletion.name] = _TWICE
        elif error := _check_deletion(stored, deletion):
            errors[deletion.name] = error
        else:
            deletions[deletion.name] = deletion
    for upsertion in request.upsertions:
        if upsertion.name in errors:
            continue
        if deletions.pop(upsertion.name, None) is not None or upsertions.pop(upsertion.name, None) is not None:
            errors[upsertion.name] = _TWICE
        elif error := _check_upsertion(upsertion):
            errors[upsertion.name] = error
        else:
            upsertions[upsertion.name] = upsertion

    if deletions or upsertions:
        updated = copy.deepcopy(stored)
        for name, deletion in deletions.items():
            mechanisms = updated[name]
            del mechanisms[ScramMechanism.from_type(deletion.mechanism).mechanism_name]
            if not mechanisms:
                del updated[name]
        for name, upsertion in upsertions.items():
            mechanism = ScramMechanism.from_type(upsertion.mechanism)
            credential = ScramCredential.from_salted_password(mechanism, upsertion.salt, upsertion.salted_password,
                                                              upsertion.iterations)
            updated.setdefault(name, {})[mechanism.mechanism_name] = credential.to_json()
        metadata.set_scram_credentials(updated)

    results = [Result(user=name, error_code=ErrorCode.NONE, error_message=None) for name in (*deletions, *upsertions)]
    results += [Result(user=name, error_code=code, error_message=message) for name, (code, message) in errors.items()]
    return Response(throttle_time_ms=0, results=results)
