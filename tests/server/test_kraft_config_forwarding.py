"""AlterConfigs and IncrementalAlterConfigs on a broker that forwards to a controller
(server/config/config_admin.py, as KafkaApis.handleIncrementalAlterConfigsRequest): the broker's own
checks (ConfigAdminManager.preprocess) answer some resources, a BROKER_LOGGER is set here, and the
rest go to the controller in one request whose answers take their places in the response."""

from __future__ import annotations

from types import SimpleNamespace

import trio

from samsa.server.config.config_admin import alter_configs
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class, response_class

Request = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
Response = response_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET = 0


class Controller:
    """What the controller answers: each resource it was sent, in order, with `code`."""

    def __init__(self, code: ErrorCode = ErrorCode.NONE) -> None:
        self.code = code
        self.sent: list = []
        self.forwards_to_controller = True

    async def forward(self, ctx, request):
        self.sent.append(request)
        return Response(responses=[Response.AlterConfigsResourceResponse(
            error_code=self.code, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources])


def resource(kind: int, name: str, *configs: tuple[str, str | None]):
    return Request.AlterConfigsResource(resource_type=kind, resource_name=name, configs=[
        Request.AlterableConfig(name=key, config_operation=SET, value=value) for key, value in configs])


def answer(controller: Controller, *resources, validate_only: bool = False):
    ctx = SimpleNamespace(services=SimpleNamespace(node_id=2, admin=controller), authorize=lambda *args: True)
    request = Request(resources=list(resources), validate_only=validate_only)
    response = trio.run(alter_configs, ctx, request, Response, True)
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in response.responses]


def test_the_broker_answers_its_checks_and_the_controller_the_rest_in_the_requests_order():
    controller = Controller(ErrorCode.POLICY_VIOLATION)
    answered = answer(controller,
                      resource(BROKER, "3", ("log.cleaner.threads", "2")),
                      resource(TOPIC, "t", ("retention.ms", "1")),
                      resource(TOPIC, "twice", ("retention.ms", "1")),
                      resource(BROKER_LOGGER, "2", ("root", "INFO")),
                      resource(TOPIC, "twice", ("retention.ms", "2")),
                      resource(TOPIC, "keys", ("retention.ms", "1"), ("retention.ms", "2")),
                      resource(BROKER, "", ("log.cleaner.threads", "2")),
                      resource(99, "x"),
                      validate_only=True)
    assert answered == [
        (BROKER, "3", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 2, but received 3"),
        (TOPIC, "t", ErrorCode.POLICY_VIOLATION, None),
        (TOPIC, "twice", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."),
        (BROKER_LOGGER, "2", ErrorCode.NONE, None),
        (TOPIC, "twice", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."),
        (TOPIC, "keys", ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
        (BROKER, "", ErrorCode.POLICY_VIOLATION, None),
        (99, "x", ErrorCode.INVALID_REQUEST, "Unknown resource type 99"),
    ]
    (sent,) = controller.sent
    assert [(r.resource_type, r.resource_name) for r in sent.resources] == [(TOPIC, "t"), (BROKER, "")]
    assert sent.validate_only


def test_nothing_left_to_forward_sends_nothing():
    controller = Controller()
    assert answer(controller, resource(BROKER_LOGGER, "2", ("root", "INFO")), validate_only=True) == [
        (BROKER_LOGGER, "2", ErrorCode.NONE, None)]
    assert controller.sent == []
