"""Known quirks of real Kafka peers: anomalies that are true of the bytes but no fault of the traffic.

A quirk keeps its anomaly (the bytes are what they are; Wireshark flags the same frames) and adds who
sends them and why, so that a reader of a healthy capture can tell a client's habit from a fault. Each
entry is recognised from the message itself and, for a client, from the software it named in its
ApiVersions request; nothing is assumed from ports or client ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

API_VERSIONS = 18
METADATA = 3
SHARE_GROUP_HEARTBEAT = 76
UNSUPPORTED_VERSION = 35


@dataclass(frozen=True, slots=True)
class Quirk:
    of: str           # who sends such bytes: a client library (with its version when known) or a broker
    reason: str       # what they are, and why they do no harm


def client_software(body: dict[str, Any] | None) -> str | None:
    """``name version`` from an ApiVersions v3+ request body, else None."""
    if not body:
        return None
    name, version = body.get("client_software_name"), body.get("client_software_version")
    if not isinstance(name, str) or not name:
        return None
    return f"{name} {version}" if isinstance(version, str) and version else name


def _librdkafka(software: str | None) -> str | None:
    """librdkafka, and its version, from the software a client named: librdkafka itself or a binding
    naming it in its version (confluent-kafka-python's ``2.16.1-rdkafka-2.16.0``)."""
    if software is None:
        return None
    name, _, version = software.partition(" ")
    if name == "librdkafka":
        return f"librdkafka {version}".strip()
    at = version.find("rdkafka-")
    if at >= 0:
        return f"librdkafka {version[at + 8:]} ({name})"
    return None


def trailing_bytes(api_key: int, version: int, kind: str, extra: int, body: dict[str, Any] | None,
                   software: str | None) -> Quirk | None:
    """The quirk behind ``extra`` bytes left after a decoded body, if it is a known one. ``kind``:
    ``request`` or ``response``; ``software``: what the connection's client named itself."""
    if kind == "request":
        lib = _librdkafka(software)
        if lib is not None and api_key == METADATA and version >= 12 and extra == 3:
            return Quirk(lib, "librdkafka writes 3 bytes past the end of its Metadata v12+ request body; "
                              "brokers ignore them")
        return None
    if body is None:
        return None
    if (api_key == API_VERSIONS and version >= 3 and extra == 5 and body.get("error_code") == UNSUPPORTED_VERSION
            and not body.get("api_keys")):
        return Quirk("librdkafka mock cluster",
                     "its UNSUPPORTED_VERSION answer to ApiVersions v3+ counts its one api_keys entry as 0 in "
                     "the compact array's length, so the entry (ApiVersions' own range) is left over; the "
                     "client asks again with ApiVersions v0")
    if api_key == SHARE_GROUP_HEARTBEAT and extra == 1:
        # Seen on every ShareGroupHeartbeat answer of librdkafka 2.16's mock, with or without an assignment.
        return Quirk("librdkafka mock cluster", "its ShareGroupHeartbeat responses end with one zero byte "
                                                "more than the body's tagged-field sections hold")
    cluster = body.get("cluster_id")
    if api_key == METADATA and extra == 1 and isinstance(cluster, str) and cluster.startswith("mockCluster"):
        return Quirk("librdkafka mock cluster", "it writes one byte past the end of its Metadata responses")
    return None


def control_batch_crc(only_control: bool) -> Quirk | None:
    """A CRC mismatch on batches that are all control batches (transaction markers)."""
    if not only_control:
        return None
    return Quirk("librdkafka mock cluster",
                 "its transaction markers (control batches) carry a CRC that does not match their bytes; "
                 "librdkafka does not check CRCs by default (check.crcs), so its clients read them")


def as_extra(found: Quirk | None) -> dict[str, Any]:
    """An anomaly's ``extra`` naming the known quirk behind it, if any."""
    return {} if found is None else {"quirk": found}
