"""Feature levels (server/features.py): what is finalized decides which APIs are served."""

from samsa.server.features import SHARE_GROUPS, BrokerFeatures
from samsa.server.handlers import Handler, ListenerType


async def _handle(ctx, request):
    return None


def test_share_version_is_finalized_only_with_unstable_feature_versions():
    stable = BrokerFeatures.create()
    assert stable.level("share.version") == 0 and stable.supported["share.version"] == (0, 0)
    unstable = BrokerFeatures.create(unstable_enabled=True)
    assert unstable.level("share.version") == 1 and unstable.supported["share.version"] == (0, 1)
    assert unstable.level("group.version") == stable.level("group.version") == 1


def test_an_api_of_a_feature_is_served_only_while_the_feature_is_finalized():
    api = Handler(76, 1, 1, _handle, feature=SHARE_GROUPS)
    assert not api.served(ListenerType.BROKER, BrokerFeatures.create())
    assert api.served(ListenerType.BROKER, BrokerFeatures.create(unstable_enabled=True))
    assert Handler(0, 0, 11, _handle).served(ListenerType.BROKER, BrokerFeatures.create())
