"""Where the broker's JWT validation gets its keys (KIP-768): the JWKS named by
sasl.oauthbearer.jwks.endpoint.url, as Kafka's VerificationKeyResolverFactory builds its resolver.

* a `file:` URL (JwksFileVerificationKeyResolver): the file read at startup, and again whenever its
  modification time changes (Kafka looks at each validation; Samsa each second, and at once when a
  token names a kid the set lacks). While the file cannot be read or parsed, every token is refused,
  as in Kafka.
* an `http:` or `https:` URL (RefreshingHttpsJwks): fetched at startup (a failure stops the broker),
  then every sasl.oauthbearer.jwks.endpoint.refresh.ms, each refresh retried with exponential
  backoff from sasl.oauthbearer.jwks.endpoint.retry.backoff.ms for at most
  sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms (a failed refresh keeps the keys it had); a
  token whose kid the set lacks brings the refresh forward, once a minute at most per kid.

The URL must be listed in Kafka's system property org.apache.kafka.sasl.oauthbearer.allowed.urls
(server/config/system_properties.py), empty by default. An https endpoint is verified with the
ssl.* options of the listener's OAuthBearerLoginModule JAAS config (JaasOptionsUtils: e.g.
ssl.truststore.location="ca.pem"), the system's CAs without them. The reading and fetching run in the trio
shell (a task per key set, started by the broker beside its listeners; HTTP through urllib in a
worker thread); validation itself is server/security/jwt_validator.py's, pure.
"""

from __future__ import annotations

import logging
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from ..clock import loop_ms
from ...client.tls import SslConfigError, client_context
from ..config.kafka_config import ConfigError, broker_definition, parse_config
from .jwt_validator import BrokerJwtOptions, JsonWebKeySet, UnresolvableKey, validate_jwt
from .oauthbearer import IllegalToken, ValidatedToken

log = logging.getLogger(__name__)

JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"
# How often the file of a file: URL is looked at for a change.
FILE_CHECK_INTERVAL_S = 1.0
# jose4j's Get: how long a fetch may take to connect and to read, and how large a JWKS may be.
HTTP_TIMEOUT_S = 20.0
HTTP_MAX_BYTES = 512 * 1024
# RefreshingHttpsJwks: an unknown kid brings a refresh forward at most once a minute; the last 16
# such kids are remembered, and a kid longer than 1000 characters is not.
MISSING_KEY_ID_CACHE_IN_FLIGHT_MS = 60_000
MISSING_KEY_ID_CACHE_MAX_ENTRIES = 16
MISSING_KEY_ID_MAX_KEY_LENGTH = 1000


class JwksUnavailable(Exception):
    """The JWKS could not be read, fetched or parsed."""


def validate_url(key: str, value: str, allowed_urls: str) -> urllib.parse.SplitResult:
    """ConfigurationUtils.validateUrl: an http, https or file URL that the allowed-URLs system
    property lists (exactly as written)."""
    url = urllib.parse.urlsplit(value.strip())
    if not url.scheme:
        raise ConfigError(key, f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a URL ({value}) that is "
                               "missing the protocol")
    if url.scheme.lower() not in ("http", "https", "file"):
        raise ConfigError(key, f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a URL ({value}) that "
                               f"contains an invalid protocol ({url.scheme}); only \"http\", \"https\", and \"file\" "
                               "protocol are supported")
    if value.strip() not in {allowed.strip() for allowed in allowed_urls.split(",")}:
        raise ConfigError(key, f"Invalid value {value.strip()} for configuration {key}: The URL cannot be accessed due "
                               "to restrictions. Update the system property "
                               "'org.apache.kafka.sasl.oauthbearer.allowed.urls' to allow the URL to be accessed.")
    return url


class JwksSource:
    """The current key set of one JWKS URL, and the task that keeps it current (`run`)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.keys: JsonWebKeySet | None = None
        self.error: str | None = None  # why there are no keys (a file that cannot be read or parsed)
        self._wake = trio.Event()
        self.changed = trio.Event()  # set (and replaced) whenever the keys change

    def _set_keys(self, keys: JsonWebKeySet | None, error: str | None = None) -> None:
        self.keys, self.error = keys, error
        self.changed.set()
        self.changed = trio.Event()

    def validate(self, token: str, options: BrokerJwtOptions, now_ms: int) -> ValidatedToken:
        """The token validated against the current keys (OAuthBearerValidatorCallbackHandler's
        handling: a refused token is logged, the client sees invalid_token)."""
        try:
            if self.keys is None:
                raise IllegalToken(f"Could not validate the access token: no JWKS from {self.location}: {self.error}")
            return validate_jwt(token, self.keys, options, now_ms)
        except UnresolvableKey as error:
            self.key_missing(error.kid)
            log.warning("%s", error)
            raise
        except IllegalToken as error:
            log.warning("%s", error)
            raise

    def key_missing(self, kid: str | None) -> None:
        """A token named a key the set lacks."""

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        raise NotImplementedError


class JwksFile(JwksSource):
    def __init__(self, key: str, url: urllib.parse.SplitResult) -> None:
        super().__init__(url.geturl())
        # The URL's raw path, not percent-decoded, as Kafka takes it (URI.getRawPath).
        path = os.path.abspath(url.path)
        self.path = path
        if not os.path.exists(path):
            raise ConfigError(key, f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a file ({path}) that "
                                   "doesn't exist")
        if not os.access(path, os.R_OK):
            raise ConfigError(key, f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a file ({path}) that "
                                   "doesn't have read permission")
        if os.path.isdir(path):
            raise ConfigError(key, f"The OAuth configuration option {JWKS_ENDPOINT_URL} references a directory "
                                   f"({path}), not a file")
        modified, keys, error = self._read()
        if keys is None:
            raise ConfigError(key, f"Invalid value {path} for configuration {JWKS_ENDPOINT_URL}: {error}")
        self._modified = modified
        self._set_keys(keys)

    def _modified_ns(self) -> int:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return 0  # as Java's File.lastModified of a missing file

    def _read(self) -> tuple[int, JsonWebKeySet | None, str | None]:
        """(modification time, keys or None, why not): blocking, in a worker thread once serving."""
        modified = self._modified_ns()
        try:
            with open(self.path, encoding="utf-8") as file:
                return modified, JsonWebKeySet.from_json(file.read()), None
        except (OSError, UnicodeDecodeError, ValueError) as error:
            return modified, None, str(error)

    def key_missing(self, kid: str | None) -> None:
        self._wake.set()  # the file may have just changed: look now

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            with trio.move_on_after(FILE_CHECK_INTERVAL_S):
                await self._wake.wait()
            self._wake = trio.Event()
            if await trio.to_thread.run_sync(self._modified_ns) == self._modified:
                continue
            self._modified, keys, error = await trio.to_thread.run_sync(self._read)
            self._set_keys(keys, error)
            if keys is None:
                log.error("Error reading the JWKS of %s (every token is refused until it reads): %s",
                          self.location, error)
            else:
                log.info("Reloaded the JWKS of %s: %r", self.location, keys)


class JaasSslConfigs:
    """The ssl.* options of the listener's OAuthBearerLoginModule, typed and defaulted as Kafka's
    client SSL configs (JaasOptionsUtils.getSslClientConfig), for client/tls.py. A store's type
    defaults to PKCS12 for a .p12/.pfx file and to PEM otherwise (not Java's JKS)."""

    _STORE_TYPES = {"ssl.keystore.type": "ssl.keystore.location", "ssl.truststore.type": "ssl.truststore.location"}

    def __init__(self, jaas_key: str, options: Mapping[str, str]) -> None:
        self.jaas_key = jaas_key
        self.options = options

    def key(self, name: str) -> str:
        return f"{self.jaas_key} ({name})"

    def get(self, name: str) -> Any:
        if name in self._STORE_TYPES and name not in self.options:
            location = str(self.options.get(self._STORE_TYPES[name], "")).lower()
            return "PKCS12" if location.endswith((".p12", ".pfx")) else "PEM"
        definition = broker_definition(name)
        if definition is None:
            return self.options.get(name)
        if name in self.options:
            return parse_config(self.key(name), definition, self.options[name])
        return definition.default


def https_context(jaas_key: str, options: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context an https JWKS endpoint is fetched with; ConfigError if the options cannot
    be used."""
    try:
        return client_context(JaasSslConfigs(jaas_key, options))
    except SslConfigError as error:
        raise ConfigError(jaas_key, f"{error.key}: {error}") from None


def fetch_url(url: str, context: ssl.SSLContext | None = None) -> str:
    """The JWKS at an http(s) URL (blocking: run in a worker thread)."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S, context=context) as response:
            body = response.read(HTTP_MAX_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise JwksUnavailable(f"Could not refresh JWKS from {url}: {error}") from None
    if len(body) > HTTP_MAX_BYTES:
        raise JwksUnavailable(f"The JWKS from {url} is larger than {HTTP_MAX_BYTES} bytes")
    return body.decode("utf-8", "replace")


def fetcher(context: ssl.SSLContext | None) -> Callable[[str], Awaitable[str]]:
    """fetch_url in a worker thread, with the TLS context of an https endpoint."""
    async def fetch(url: str) -> str:
        # Abandoned if cancelled: a broker shutting down does not wait for the endpoint's timeout.
        return await trio.to_thread.run_sync(fetch_url, url, context, abandon_on_cancel=True)

    return fetch


class JwksEndpoint(JwksSource):
    def __init__(self, key: str, url: urllib.parse.SplitResult, refresh_ms: int, retry_backoff_ms: int,
                 retry_backoff_max_ms: int, fetch: Callable[[str], Awaitable[str]] | None = None,
                 clock: Callable[[], int] = loop_ms) -> None:
        super().__init__(url.geturl())
        if refresh_ms <= 0:
            raise ConfigError(key, "JWKS validation key refresh configuration value retryWaitMs value must be positive")
        if retry_backoff_ms < 0 or retry_backoff_max_ms < 0:
            raise ConfigError(key, "retryBackoffMs and retryBackoffMaxMs values must be non-negative")
        if retry_backoff_max_ms < retry_backoff_ms:
            raise ConfigError(key, f"retryBackoffMaxMs value ({retry_backoff_max_ms}) is less than retryBackoffMs "
                                   f"value ({retry_backoff_ms})")
        self.key = key
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._fetch = fetch or fetcher(None)
        self._clock = clock
        self._missing: OrderedDict[str, int] = OrderedDict()  # kid: when it may bring a refresh forward again

    async def _fetch_keys(self) -> JsonWebKeySet:
        text = await self._fetch(self.location)
        try:
            return JsonWebKeySet.from_json(text)
        except ValueError as error:
            raise JwksUnavailable(f"Could not refresh JWKS from {self.location}: {error}") from None

    async def _fetch_with_retries(self) -> JsonWebKeySet:
        """Kafka's Retry: attempts until one succeeds, waiting retry.backoff.ms, then twice that,
        and so on, for at most retry.backoff.max.ms in all."""
        end_ms = self._clock() + self.retry_backoff_max_ms
        attempt = 0
        first_error: JwksUnavailable | None = None
        while self._clock() <= end_ms:
            attempt += 1
            try:
                return await self._fetch_keys()
            except JwksUnavailable as error:
                first_error = first_error or error
                wait_ms = min(self.retry_backoff_ms * 2 ** (attempt - 1), end_ms - self._clock())
                if wait_ms <= 0:
                    break
                log.warning("Attempt %d to refresh the JWKS of %s failed; sleeping %d ms before retrying: %s",
                            attempt, self.location, wait_ms, error)
                await trio.sleep(wait_ms / 1000)
        raise first_error or JwksUnavailable("Exhausted all retry attempts")

    def key_missing(self, kid: str | None) -> None:
        """RefreshingHttpsJwks.maybeExpediteRefresh."""
        if kid is None or len(kid) > MISSING_KEY_ID_MAX_KEY_LENGTH:
            return
        now = self._clock()
        next_check = self._missing.get(kid)
        if next_check is not None and next_check > now:
            self._missing.move_to_end(kid)
            return
        self._missing[kid] = now + MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
        self._missing.move_to_end(kid)
        while len(self._missing) > MISSING_KEY_ID_CACHE_MAX_ENTRIES:
            self._missing.popitem(last=False)
        self._wake.set()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:  # RefreshingHttpsJwks.init: one attempt, and the broker does not start without it
            self._set_keys(await self._fetch_keys())
        except JwksUnavailable as error:
            raise ConfigError(self.key, str(error)) from None
        log.info("JWKS validation key refresh of %s started with a refresh interval of %d ms", self.location,
                 self.refresh_ms)
        task_status.started()
        next_refresh = trio.current_time() + self.refresh_ms / 1000
        while True:
            with trio.move_on_at(next_refresh):
                await self._wake.wait()
            if trio.current_time() >= next_refresh:
                next_refresh = trio.current_time() + self.refresh_ms / 1000
            self._wake = trio.Event()
            try:
                keys = await self._fetch_with_retries()
            except JwksUnavailable as error:
                log.warning("OAuth JWKS refresh of %s encountered an error; not updating local JWKS cache: %s",
                            self.location, error)
                continue
            for jwk in keys.keys:
                self._missing.pop(jwk.param("kid"), None)
            self._set_keys(keys)
            log.info("OAuth JWKS refresh of %s complete", self.location)
