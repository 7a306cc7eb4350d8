"""What counts as a secret in a config: the one home for the key rules and for hiding values.

Three rules, used by every read the API answers, by status traces and by the logs:

- ``looks_secret(key)``: a key whose value is a secret whatever the plugin's definition says
  (passwords, secrets, JAAS configs, tokens, credentials, private keys, Schema Registry's basic-auth
  user info, Kafka's PEM key material).
- ``redact_url_credentials(text)``: the password of every ``scheme://user:password@host`` (and of
  ``password=`` URL parameters) replaced by ``HIDDEN``, wherever it appears in ``text``.
- ``masked_config(config, secret_keys)``: a whole config with both applied.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Final

__all__ = ["HIDDEN", "looks_secret", "masked_config", "redact_url_credentials"]

# Kafka masks password values with this literal.
HIDDEN: Final = "[hidden]"

# Words that make a key's value a secret wherever they appear in the key. Kafka client keys typed
# PASSWORD (ssl.key.password, ssl.keystore.key, ssl.keystore.certificate.chain,
# ssl.truststore.certificates, sasl.jaas.config, sasl.oauthbearer.client.secret, librdkafka's
# ssl.key.pem and sasl.password) are all caught by it, with or without a client override prefix.
_SECRET_KEY: Final = re.compile(
    r"password|passwd|passphrase|secret|credential|token|jaas\.config|basic\.auth\.user\.info"
    r"|private\.key|api\.?key|ssl\.key\.pem|ssl\.(keystore|truststore)\.(key|certificate\.chain|certificates)"
    r"|(^|[._-])pwd$",
    re.IGNORECASE,
)
# A last segment that makes the value a locator or a setting about the secret, not the secret itself
# (sasl.oauthbearer.token.endpoint.url, auth.tokens.file, password.encoder.cipher.algorithm).
_NOT_A_VALUE: Final = frozenset(
    {
        "url",
        "urls",
        "uri",
        "endpoint",
        "file",
        "files",
        "location",
        "path",
        "paths",
        "dir",
        "type",
        "class",
        "mechanism",
        "algorithm",
        "enable",
        "enabled",
        "ms",
    }
)

# scheme://user:password@host — the password runs to the authority's last "@" (an unencoded "@" in a
# password is still hidden). jdbc:postgresql://… matches from "postgresql://".
_URL_CREDENTIALS: Final = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@?#\"']*:)[^\s/?#\"']*(?=@)",
)
# password=… as a URL or JDBC parameter: after "?", "&" or ";" (jdbc:sqlserver://h;password=x).
_URL_PASSWORD_PARAMETER: Final = re.compile(
    r"(?P<head>[?&;]\s*(?:password|passwd|pwd|secret|[a-z_.]*token|[a-z_.]*secret)\s*=)[^&;\s\"']*",
    re.IGNORECASE,
)
# Oracle's thin-driver form, jdbc:oracle:thin:user/password@host.
_ORACLE_CREDENTIALS: Final = re.compile(
    r"(?P<head>jdbc:oracle:[A-Za-z]+:[^/@\s:\"']+/)[^@\s\"']+(?=@)", re.IGNORECASE
)


def looks_secret(key: str) -> bool:
    """Whether a key's value is a secret: never shown in a read, a log or a status, and never sent
    where it is not needed."""
    last = key.rsplit(".", 1)[-1].lower()
    return last not in _NOT_A_VALUE and _SECRET_KEY.search(key) is not None


def _hide(match: re.Match[str]) -> str:
    hidden = match.group(0)[len(match.group("head")) :]
    if hidden.startswith("${") and hidden.endswith("}") and "}" not in hidden[:-1]:
        return match.group(0)  # a config provider reference (${env:DB_PASSWORD}) is no secret
    return match.group("head") + HIDDEN


def redact_url_credentials(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host``, of every
    ``jdbc:oracle:thin:user/password@host`` and of every ``password=`` URL parameter replaced by
    ``HIDDEN``; the user name and the rest are kept."""
    if "@" in text:
        text = _URL_CREDENTIALS.sub(_hide, text)
        text = _ORACLE_CREDENTIALS.sub(_hide, text)
    if "=" in text:
        text = _URL_PASSWORD_PARAMETER.sub(_hide, text)
    return text


def masked_config(config: Mapping[str, str], secret_keys: Collection[str] = ()) -> dict[str, str]:
    """``config`` with the values of ``secret_keys`` and of keys that look secret replaced by
    ``HIDDEN``, and URL credentials inside the other values redacted."""
    return {
        key: HIDDEN if key in secret_keys or looks_secret(key) else redact_url_credentials(value)
        for key, value in config.items()
    }
