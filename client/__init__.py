"""A raw Kafka protocol client: what every part of Samsa that talks to a broker uses (the broker's
connections to other brokers, the `samsa` tool commands, the unit and compatibility tests).

It connects (PLAINTEXT, SSL, SASL PLAIN and SCRAM), frames requests with their correlation ids,
encodes each with the generated codec of `wire/` and decodes its response. Nothing more: which
broker to ask, at which version, and what an error code means to the caller are the caller's.

    framing.py     no I/O: correlation ids, requests in flight, frames read into reused memory
    connection.py  the trio transport (BrokerConnection), on the framing
    blocking.py    a blocking socket transport on the same framing (the compatibility tests')
    sasl.py        SASL PLAIN and SCRAM logins over a BrokerConnection
    scram.py       SCRAM's mechanisms and formulas, for both sides, and the client's exchange
    tls.py         TLS contexts from Kafka's ssl.* configs, for both sides
    jaas.py        sasl.jaas.config values
    errors.py      what a connection raises

It imports nothing of Samsa's but `wire/` (tests/test_layering.py): the broker imports it, not the
other way round.
"""
