"""Secrets are redacted before any event leaves the dissector, unless asked not to.

A capture handed to a colleague or loaded into a shared Spark cluster must not
leak SASL passwords, SCRAM salts, delegation token HMACs or sensitive config
values. Redaction replaces the value with ``REDACTED`` and keeps what is not
secret (for SASL/PLAIN, the user name).
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

_SENSITIVE_CONFIG = re.compile(r"password|secret|jaas|credential|token|\.key$|private", re.I)

# api key -> field names whose values are secrets, wherever they sit in the body.
_SECRET_FIELDS: dict[int, frozenset[str]] = {
    36: frozenset({"auth_bytes"}),                         # SaslAuthenticate
    38: frozenset({"hmac"}),                               # CreateDelegationToken
    39: frozenset({"hmac"}),                               # RenewDelegationToken
    40: frozenset({"hmac"}),                               # ExpireDelegationToken
    41: frozenset({"hmac"}),                               # DescribeDelegationToken
    51: frozenset({"salt", "salted_password"}),            # AlterUserScramCredentials
}
# api keys whose bodies carry config name/value pairs.
_CONFIG_APIS = frozenset({19, 32, 33, 44, 74})  # CreateTopics, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, ListConfigResources


def plain_username(auth_bytes: bytes) -> str | None:
    """SASL/PLAIN is ``authzid NUL user NUL password``; the user is not secret."""
    parts = auth_bytes.split(b"\x00")
    if len(parts) != 3:
        return None
    return parts[1].decode("utf-8", "replace")


def _walk(value: Any, secret: frozenset[str], configs: bool) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item, secret, configs)
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if key in secret and item is not None:
            value[key] = REDACTED
        elif isinstance(item, (list, dict)):
            _walk(item, secret, configs)
    if configs:
        name = value.get("name") or value.get("config_name") or value.get("key")
        if isinstance(name, str) and "value" in value and value["value"] is not None:
            if _SENSITIVE_CONFIG.search(name) or value.get("is_sensitive") is True:
                value["value"] = REDACTED


def needs_redaction(api_key: int) -> bool:
    return api_key in _SECRET_FIELDS or api_key in _CONFIG_APIS


def redact(api_key: int, body: dict, sasl_mechanism: str | None = None) -> None:
    """Redact secrets in a decoded body, in place."""
    if api_key == 36 and sasl_mechanism == "PLAIN":
        auth = body.get("auth_bytes")
        if isinstance(auth, (bytes, bytearray)):
            user = plain_username(bytes(auth))
            if user is not None:
                body["sasl_plain_username"] = user
    _walk(body, _SECRET_FIELDS.get(api_key, frozenset()), api_key in _CONFIG_APIS)
