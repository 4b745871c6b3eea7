"""Who is on the other end of a connection, and what it may do.

The principal a connection acts as (`principal.py`), the SASL exchange of Kafka's
SaslServerAuthenticator with PLAIN and SCRAM (`authenticator.py`, `sasl.py`, `plain.py`, `scram.py`,
`jaas.py`), and Kafka's ACL authorizer with what the ACL APIs share (`authorizer.py`, `acl_admin.py`).
Listeners, TLS and connection limits are the network shell's (server/network/).
"""
