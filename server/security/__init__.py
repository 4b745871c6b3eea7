"""Who is on the other end of a connection, and how many may be there.

Listeners PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (`listeners.py` builds what each needs), TLS
contexts from Kafka's ssl.* configs (`tls.py`), the principal a connection acts as (`principal.py`),
the SASL exchange of Kafka's SaslServerAuthenticator with PLAIN and SCRAM (`authenticator.py`,
`plain.py`, `scram.py`, `jaas.py`), and Kafka's connection limits (`connection_quotas.py`).
"""
