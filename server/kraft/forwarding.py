"""The requests a KRaft cluster's broker forwards to the active controller (Kafka's ForwardingManager,
as KafkaApis.forwardToController uses it): the metadata changes, which only the controller makes,
and the requests only a controller answers (DescribeQuorum, the Raft voters, unregistering).

The client's request goes to the active controller whole, its header and body as the client sent
them, inside an Envelope (key 58) that carries the client's principal, serialized as
DefaultKafkaPrincipalBuilder does, and its address: the controller authorizes the client, not the
broker (it checks that the broker may CLUSTER_ACTION to send it an Envelope). The controller's
answer, its header and body inside the EnvelopeResponse, is relayed to the client with the
controller's throttle time (RequestHandlerHelper.sendForwardedResponse).

As Kafka's forwarding channel (NodeToControllerRequestThread, retryTimeoutMs 60 s), a lost
connection or a NOT_CONTROLLER answer (which the controller sets on the Envelope when the forwarded
request's answer carries it) sends the request again to the active controller as the quorum now
knows it, after Kafka's reconnect backoff; past 60 s the client gets REQUEST_TIMED_OUT. An Envelope answered UNSUPPORTED_VERSION
(a controller that does not serve the client's version) closes the client's connection; any other
Envelope error, or an answer that does not decode, is UNKNOWN_SERVER_ERROR (ForwardingManagerImpl).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, decode_response, encode_request, request_class, response_class
from ..context import CloseConnection
from ..security.principal import serialize_principal
from .controller_channel import ControllerApiVersions, ControllerChannel

if TYPE_CHECKING:
    from ...wire.codec import Message
    from ..context import KafkaPrincipal, RequestContext

log = logging.getLogger("samsa.kraft.forwarding")

EnvelopeRequest = request_class(ApiKey.ENVELOPE)
ENVELOPE_VERSION = 0
RETRY_TIMEOUT_MS = 60000  # BrokerServer's forwarding channel manager: retryTimeoutMs
# After a failed attempt, the next waits as Kafka's NetworkClient waits to reconnect: reconnect.backoff.ms,
# doubled after each failure up to reconnect.backoff.max.ms (their defaults). The quorum may name the
# dead controller as its leader again until it has elected another.
RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MAX_MS = 50, 1000
# Kafka's ApiKeys.forwardable: the APIs a controller accepts inside an Envelope, whose versions a
# forwarding broker advertises only as far as the active controller serves them
# (ApiVersionsResponse.intersectForwardableApis).
FORWARDABLE = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.ALTER_CONFIGS,
    ApiKey.CREATE_PARTITIONS, ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
    ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.ELECT_LEADERS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_QUORUM, ApiKey.UPDATE_FEATURES, ApiKey.UNREGISTER_BROKER,
    ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER,
})


def envelope(request_data: bytes, principal: KafkaPrincipal, client_host: str) -> Any:
    """ForwardingManagerUtil.buildEnvelopeRequest: the client's request (header and body), its
    principal as the principal builder serializes it, its address's bytes (4 or 16)."""
    return EnvelopeRequest(request_data=request_data, request_principal=serialize_principal(principal),
                           client_host_address=ipaddress.ip_address(client_host.split("%")[0]).packed)


def request_data(ctx: RequestContext, request: Message) -> bytes:
    """The client's request as an Envelope carries it: its header and body, no size prefix (Kafka
    forwards the buffer it received; Samsa encodes the decoded request again, the same bytes but for
    tagged fields it does not know)."""
    return bytes(encode_request(request, ctx.api_version, ctx.correlation_id, ctx.client_id)[4:])


def relayed(envelope_response: Any, request: Message, api_key: int, version: int) -> Message | None:
    """The controller's answer to the forwarded request, as the client gets it: None when the
    controller does not serve its version (the client's connection is closed), the API's error
    response with UNKNOWN_SERVER_ERROR for any other Envelope error or an undecodable answer."""
    error = envelope_response.error_code
    if error == ErrorCode.UNSUPPORTED_VERSION:
        return None
    if error != ErrorCode.NONE or envelope_response.response_data is None:
        log.debug("Forwarded request %s failed with an error in the envelope response %s",
                  ApiKey(api_key).name, ErrorCode(error).name)
        return error_response(api_key, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    try:
        return decode_response(bytes(envelope_response.response_data), api_key, version)[1]
    except CodecError:
        log.error("Failed to parse response from envelope for request %s v%d", ApiKey(api_key).name, version,
                  exc_info=True)
        return error_response(api_key, request, ErrorCode.UNKNOWN_SERVER_ERROR)


class ForwardingManager:
    def __init__(self, channel: ControllerChannel) -> None:
        self._channel = channel  # the broker's "forwarding" channel to the active controller
        # The controller's versions last seen, and what forwardable_versions made of them.
        self._forwardable: tuple[ControllerApiVersions | None, Mapping[int, tuple[int, int] | None] | None] = (
            None, None)

    def forwardable_versions(self) -> Mapping[int, tuple[int, int] | None] | None:
        """The versions the active controller serves of each forwardable API (None: not served),
        once known (Kafka's controllerApiVersions); the same object until the controller's change."""
        known = self._channel.api_versions
        if known is not self._forwardable[0]:
            self._forwardable = known, (None if known is None else
                                        {api_key: known.versions.get(api_key) for api_key in FORWARDABLE})
        return self._forwardable[1]

    async def forward(self, ctx: RequestContext, request: Message) -> Message:
        """The active controller's answer to the client's request; CloseConnection when the
        controller does not serve its version."""
        wrapped = envelope(request_data(ctx, request), ctx.principal, ctx.connection.client_host)
        api_key, version = ctx.api_key, ctx.api_version
        backoff_ms = RECONNECT_BACKOFF_MS
        with trio.move_on_after(RETRY_TIMEOUT_MS / 1000):
            while True:
                answer = await self._channel.call(wrapped, ENVELOPE_VERSION)
                # No answer (no active controller known, connection lost) or NOT_CONTROLLER: the
                # channel has the quorum find the leader again; the request goes to it.
                if answer is None or answer.error_code == ErrorCode.NOT_CONTROLLER:
                    await trio.sleep(backoff_ms / 1000)
                    backoff_ms = min(2 * backoff_ms, RECONNECT_BACKOFF_MAX_MS)
                    continue
                response = relayed(answer, request, api_key, version)
                if response is None:
                    log.info("The client connection will be closed due to controller responded unsupported version "
                             "exception during %s forwarding. This could happen when the controller changed after "
                             "the connection was established.", ApiKey(api_key).name)
                    raise CloseConnection()
                # The controller's throttle time, not this broker's (sendForwardedResponse).
                ctx.throttle_time_ms = getattr(response, "throttle_time_ms", 0)
                return response
        log.debug("Forwarding of the request %s failed due to timeout exception", ApiKey(api_key).name)
        return error_response(api_key, request, ErrorCode.REQUEST_TIMED_OUT)


def error_response(api_key: int, request: Any, code: ErrorCode) -> Message:
    """The API's getErrorResponse: `code` on every item the request names, or at the top."""
    Response = response_class(api_key)
    message = code.message
    if api_key == ApiKey.CREATE_TOPICS:
        return Response(topics=[Response.CreatableTopicResult(name=t.name, error_code=code, error_message=message)
                                for t in request.topics])
    if api_key == ApiKey.DELETE_TOPICS:
        names = [t.name for t in request.topics] or list(request.topic_names)
        return Response(responses=[Response.DeletableTopicResult(name=name, error_code=code, error_message=message)
                                   for name in names])
    if api_key == ApiKey.CREATE_PARTITIONS:
        return Response(results=[Response.CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                                      error_message=message) for t in request.topics])
    if api_key == ApiKey.CREATE_ACLS:
        return Response(results=[Response.AclCreationResult(error_code=code, error_message=message)
                                 for _ in request.creations])
    if api_key == ApiKey.DELETE_ACLS:
        return Response(filter_results=[Response.DeleteAclsFilterResult(error_code=code, error_message=message)
                                        for _ in request.filters])
    if api_key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        return Response(responses=[Response.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources])
    if api_key == ApiKey.ALTER_CLIENT_QUOTAS:
        return Response(entries=[Response.EntryData(error_code=code, error_message=message, entity=[
            Response.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
            for entry in request.entries])
    if api_key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return Response(results=[Response.AlterUserScramCredentialsResult(user=user, error_code=code,
                                                                          error_message=message) for user in users])
    response = Response()
    response.error_code = code
    if "error_message" in response._fields:
        response.error_message = message
    return response
