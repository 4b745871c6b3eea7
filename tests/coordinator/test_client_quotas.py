"""Client quota configuration: AlterClientQuotas' checks and DescribeClientQuotas' filters."""

from __future__ import annotations

import pytest

from samsa.coordinator.client_quotas import (CLIENT_ID, IP, MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED, USER,
                                             QuotaRequestError, apply_changes, describe, plan_alteration,
                                             quota_entity)
from samsa.wire.errors import ErrorCode


def refused(parts, ops) -> str:
    with pytest.raises(QuotaRequestError) as e:
        plan_alteration(parts, ops)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    return str(e.value)


def test_an_alteration_names_its_entity_and_changes():
    entity, changes = plan_alteration([(USER, "alice"), (CLIENT_ID, None)],
                                      [("producer_byte_rate", 1024.0, False), ("request_percentage", 0, True)])
    assert entity == quota_entity(user="alice", client_id=None)
    assert changes == {"producer_byte_rate": 1024.0, "request_percentage": None}
    assert plan_alteration([(IP, "::1")], [("connection_creation_rate", 5, False)])[0] == quota_entity(ip="::1")


@pytest.mark.parametrize("parts, ops, message", [
    ([], [], "Invalid empty client quota entity"),
    ([(USER, "a"), (USER, "b")], [], "Invalid client quota entity, duplicate entity entry user"),
    ([("group", "g")], [], "Unhandled client quota entity type: group"),
    ([(CLIENT_ID, "")], [], "Empty client-id not supported"),
    ([(IP, "1.2.3.4"), (USER, "a")], [], "Invalid quota entity combination, IP entity should not be combined "
                                          "with User or ClientId"),
    ([(IP, "not-an-ip")], [], "not-an-ip is not a valid IP or resolvable host."),
    ([(USER, "a")], [("bogus_rate", 1.0, False)], "Invalid configuration key bogus_rate"),
    ([(USER, "a")], [("connection_creation_rate", 1.0, False)], "Invalid configuration key connection_creation_rate"),
    ([(IP, None)], [("producer_byte_rate", 1.0, False)], "Invalid configuration key producer_byte_rate"),
    ([(USER, "a")], [("producer_byte_rate", 0.0, False)], "Quota producer_byte_rate must be greater than 0"),
    ([(USER, "a")], [("producer_byte_rate", 1.5, False)], "producer_byte_rate cannot be a fractional value."),
    ([(USER, "a")], [("producer_byte_rate", 1e20, False)], "Proposed value for producer_byte_rate is too large for a LONG."),
    ([(USER, "a")], [("request_percentage", float("nan"), False)], "Invalid value nan for configuration request_percentage"),
    ([(USER, "a")], [("request_percentage", 1.0, False), ("request_percentage", 0, True)],
     "Duplicate quota key request_percentage not updating quota for this entity ClientQuotaEntity(user=a)"),
])
def test_alterations_kafka_refuses(parts, ops, message):
    assert refused(parts, ops) == message


def test_removing_every_key_removes_the_entity():
    quotas = {}
    entity = quota_entity(client_id="c")
    apply_changes(quotas, entity, {"producer_byte_rate": 5.0, "consumer_byte_rate": 6.0})
    apply_changes(quotas, entity, {"producer_byte_rate": None, "request_percentage": None})
    assert quotas == {entity: {"consumer_byte_rate": 6.0}}
    apply_changes(quotas, entity, {"consumer_byte_rate": None})
    assert quotas == {}


QUOTAS = {
    quota_entity(user="alice"): {"producer_byte_rate": 1.0},
    quota_entity(user="alice", client_id="app"): {"producer_byte_rate": 2.0},
    quota_entity(user="alice", client_id=None): {"producer_byte_rate": 3.0},
    quota_entity(user=None): {"producer_byte_rate": 4.0},
    quota_entity(client_id="app"): {"producer_byte_rate": 5.0},
    quota_entity(ip="10.0.0.1"): {"connection_creation_rate": 6.0},
}


def matched(components, strict=False) -> list[float]:
    return sorted(v for _, values in describe(QUOTAS, components, strict) for v in values.values())


def test_describe_filters():
    assert matched([]) == [1, 2, 3, 4, 5, 6]
    assert matched([], strict=True) == []
    assert matched([(USER, MATCH_EXACT, "alice")]) == [1, 2, 3]
    assert matched([(USER, MATCH_EXACT, "alice")], strict=True) == [1]
    assert matched([(USER, MATCH_DEFAULT, None)]) == [4]
    assert matched([(USER, MATCH_SPECIFIED, None)]) == [1, 2, 3, 4]
    assert matched([(USER, MATCH_EXACT, "alice"), (CLIENT_ID, MATCH_SPECIFIED, None)], strict=True) == [2, 3]
    assert matched([(USER, MATCH_EXACT, "alice"), (CLIENT_ID, MATCH_DEFAULT, None)]) == [3]
    assert matched([(CLIENT_ID, MATCH_EXACT, "app")]) == [2, 5]
    assert matched([(IP, MATCH_SPECIFIED, None)]) == [6]
    assert matched([(USER, MATCH_EXACT, "nobody")]) == []


@pytest.mark.parametrize("components, code, message", [
    ([("", MATCH_SPECIFIED, None)], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    ([(USER, MATCH_SPECIFIED, None), (USER, MATCH_DEFAULT, None)], ErrorCode.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", MATCH_SPECIFIED, None)], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([(USER, MATCH_EXACT, None)], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([(USER, MATCH_DEFAULT, "x")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([(USER, MATCH_SPECIFIED, "x")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([(USER, 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
    ([(IP, MATCH_SPECIFIED, None), (USER, MATCH_SPECIFIED, None)], ErrorCode.INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used with user or "
     "clientId filter component."),
])
def test_describe_filters_kafka_refuses(components, code, message):
    with pytest.raises(QuotaRequestError) as e:
        describe(QUOTAS, components, False)
    assert (e.value.code, str(e.value)) == (code, message)
