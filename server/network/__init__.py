"""The network shell: listeners, connections and their frames, TLS, connection limits."""
