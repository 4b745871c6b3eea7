"""What a KRaft cluster's broker sends the active controller for a client's request, and what it
relays back (server/kraft/forwarding.py): the principal as DefaultKafkaPrincipalBuilder serializes
it, the Envelope around the client's request, the controller's answer unwrapped, and the retries
Kafka's forwarding channel makes (a lost connection, NOT_CONTROLLER)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio
from trio.testing import MockClock

from samsa.server.context import CloseConnection, KafkaPrincipal, RequestContext
from samsa.server.handlers import load_handlers
from samsa.server.kraft.forwarding import ForwardingManager, envelope, error_response, relayed, request_data
from samsa.server.security.principal import deserialize_principal, serialize_principal
from samsa.wire.errors import ErrorCode
from samsa.wire.exceptions import CodecError
from samsa.wire.protocol import ApiKey, decode_request, encode_response, request_class, response_class

CreateTopics = request_class(ApiKey.CREATE_TOPICS)
CreateTopicsResponse = response_class(ApiKey.CREATE_TOPICS)
EnvelopeResponse = response_class(ApiKey.ENVELOPE)
ALICE = KafkaPrincipal("User", "alice")


def test_the_principal_is_serialized_as_kafkas_default_principal_builder_does():
    # MessageUtil.toVersionPrefixedBytes(0, DefaultPrincipalData): the version, then compact
    # strings (length + 1), the boolean and no tagged fields.
    assert serialize_principal(ALICE) == b"\x00\x00\x05User\x06alice\x00\x00"
    token = KafkaPrincipal("User", "bob", token_authenticated=True)
    back = deserialize_principal(serialize_principal(token))
    assert back == token and back.token_authenticated
    assert deserialize_principal(serialize_principal(ALICE)) == ALICE


def test_another_principal_version_is_refused():
    with pytest.raises(CodecError, match="version 1"):
        deserialize_principal(b"\x00\x01" + serialize_principal(ALICE)[2:])
    with pytest.raises(CodecError):
        deserialize_principal(b"\x00")


def _ctx(api_key=ApiKey.CREATE_TOPICS, version=7, host="127.0.0.1") -> RequestContext:
    return RequestContext(services=None, connection=SimpleNamespace(client_host=host),  # type: ignore[arg-type]
                          api_key=api_key, api_version=version, correlation_id=41, client_id="adminclient-1",
                          principal=ALICE)


def _create_topics():
    return CreateTopics(topics=[CreateTopics.CreatableTopic(name="t", num_partitions=3, replication_factor=1)],
                        timeout_ms=1000)


def test_the_envelope_carries_the_clients_request_principal_and_address():
    request = _create_topics()
    wrapped = envelope(request_data(_ctx(), request), ALICE, "127.0.0.1")
    header, inner = decode_request(memoryview(wrapped.request_data))
    assert (header.request_api_key, header.request_api_version) == (ApiKey.CREATE_TOPICS, 7)
    assert (header.correlation_id, header.client_id) == (41, "adminclient-1")
    assert [(t.name, t.num_partitions) for t in inner.topics] == [("t", 3)]
    assert deserialize_principal(wrapped.request_principal) == ALICE
    assert wrapped.client_host_address == bytes([127, 0, 0, 1])
    assert len(envelope(b"", ALICE, "::1").client_host_address) == 16
    wrapped.encode(0)  # an Envelope v0 as the controller decodes it


def _answer(response, version=7, correlation_id=41):
    return EnvelopeResponse(error_code=ErrorCode.NONE,
                            response_data=bytes(encode_response(response, version, correlation_id)[4:]))


def test_the_controllers_answer_is_unwrapped():
    answer = CreateTopicsResponse(throttle_time_ms=5, topics=[CreateTopicsResponse.CreatableTopicResult(
        name="t", error_code=ErrorCode.TOPIC_ALREADY_EXISTS, error_message="Topic 't' already exists.")])
    response = relayed(_answer(answer), _create_topics(), ApiKey.CREATE_TOPICS, 7)
    assert response.throttle_time_ms == 5
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("t", ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")]


def test_an_envelope_error_or_an_undecodable_answer_is_an_unknown_server_error():
    refused = EnvelopeResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    garbled = EnvelopeResponse(error_code=ErrorCode.NONE, response_data=b"\x00\x00\x00\x29\xff")
    for answer in (refused, garbled):
        response = relayed(answer, _create_topics(), ApiKey.CREATE_TOPICS, 7)
        assert [(t.name, t.error_code) for t in response.topics] == [("t", ErrorCode.UNKNOWN_SERVER_ERROR)]
    unsupported = EnvelopeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    assert relayed(unsupported, _create_topics(), ApiKey.CREATE_TOPICS, 7) is None  # the connection is closed


@pytest.mark.parametrize("api_key", sorted(k for k, h in load_handlers().items() if h.forwarded))
def test_every_forwarded_api_has_an_error_response_it_can_encode(api_key):
    handler = load_handlers()[api_key]
    request = request_class(api_key)()
    response = error_response(api_key, request, ErrorCode.REQUEST_TIMED_OUT)
    response.encode(handler.max_version)
    if "error_code" in response._fields:
        assert response.error_code == ErrorCode.REQUEST_TIMED_OUT


class _Channel:
    """The forwarding channel's answers, one per call: None for a lost connection."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.sent = []

    async def call(self, request, version):
        self.sent.append(request)
        return self.answers.pop(0)


def test_a_lost_connection_or_not_controller_sends_the_request_again():
    answer = CreateTopicsResponse(throttle_time_ms=7, topics=[CreateTopicsResponse.CreatableTopicResult(name="t")])
    channel = _Channel(None, EnvelopeResponse(error_code=ErrorCode.NOT_CONTROLLER), _answer(answer))
    ctx = _ctx()
    response = trio.run(ForwardingManager(channel).forward, ctx, _create_topics(),  # type: ignore[arg-type]
                        clock=MockClock(autojump_threshold=0))
    assert len(channel.sent) == 3 and channel.sent[0] is channel.sent[2]
    assert [t.name for t in response.topics] == ["t"]
    assert ctx.throttle_time_ms == 7  # the controller's throttle, not this broker's


def test_an_unsupported_version_closes_the_clients_connection():
    channel = _Channel(EnvelopeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION))
    with pytest.raises(CloseConnection):
        trio.run(ForwardingManager(channel).forward, _ctx(), _create_topics())  # type: ignore[arg-type]


def test_a_controller_never_found_times_out():
    class NoController:
        async def call(self, request, version):
            await trio.sleep(30)  # the channel's wait for a leader, in vain
            return None

    response = trio.run(ForwardingManager(NoController()).forward, _ctx(), _create_topics(),  # type: ignore[arg-type]
                        clock=MockClock(autojump_threshold=0))
    assert [(t.name, t.error_code) for t in response.topics] == [("t", ErrorCode.REQUEST_TIMED_OUT)]
