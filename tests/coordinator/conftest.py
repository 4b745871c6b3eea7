import sys
from pathlib import Path

# The test modules import their helpers as a top-level module (pytest runs in importlib mode).
sys.path.insert(0, str(Path(__file__).resolve().parent))
