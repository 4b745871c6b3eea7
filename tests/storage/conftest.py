import sys
from pathlib import Path

import pytest

# The test modules import their helpers as a top-level module (pytest runs in importlib mode).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_helpers import Clock  # noqa: E402


@pytest.fixture
def clock() -> Clock:
    return Clock()
