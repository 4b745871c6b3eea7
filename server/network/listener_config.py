"""A listener's view of the broker config, as Kafka's ListenerName.configPrefix gives it."""

from __future__ import annotations


class ListenerConfig:
    """`listener.name.<listener>.<config>` overrides `<config>` for one listener; SASL configs may be
    narrowed further to one mechanism with `listener.name.<listener>.<mechanism>.<config>`. Listener
    and mechanism names are lower case in the prefix, as in Kafka."""

    def __init__(self, config, listener: str) -> None:
        self.config = config
        self.listener = listener
        self.prefix = f"listener.name.{listener.lower()}."

    def key(self, name: str, mechanism: str | None = None) -> str:
        """The config key that supplies `name` for this listener (and mechanism)."""
        candidates = [self.prefix + name]
        if mechanism is not None:
            candidates.insert(0, f"{self.prefix}{mechanism.lower()}.{name}")
        for key in candidates:
            if self.is_set(key):
                return key
        return name

    def get(self, name: str, mechanism: str | None = None):
        return self.config.get(self.key(name, mechanism))

    def is_set(self, key: str) -> bool:
        try:
            self.config.get(key)
        except KeyError:
            return False
        return True
