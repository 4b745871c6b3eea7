import sys
from pathlib import Path

# The test modules import their helpers (loopback, security_helpers, tls_certs) as top-level
# modules (pytest runs in importlib mode).
sys.path.insert(0, str(Path(__file__).resolve().parent))
