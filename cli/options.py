"""Argument types the commands share (a module without `run`, so not a command itself)."""

from __future__ import annotations

import argparse


def key_value(text: str) -> tuple[str, str]:
    """argparse type of `KEY=VALUE` (the value may hold '=' and may be empty, as Kafka's tools read it)."""
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value
