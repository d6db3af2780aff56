"""The libraries each schema format needs, imported on first use.

Framing needs none of them; decoding a value of a format needs that format's
library, and its absence is one line naming what to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from payloads.errors import MissingLibrary

EXTRA = "pip install 'kafka-dissect[payloads]'"
# format -> (module, distribution, what it is needed for)
NEEDS = {
    "avro": (("fastavro", "fastavro", "Avro values"),),
    "protobuf": (("google.protobuf", "protobuf", "Protobuf values"),
                 ("grpc_tools.protoc", "grpcio-tools", "compiling .proto schemas")),
    "json": (),
    "validate": (("jsonschema", "jsonschema", "--validate-json"), ("regex", "regex", "--validate-json")),
    "registry": (("confluent_kafka.schema_registry", "confluent-kafka", "--schema-registry"),),
}


def need(module: str, distribution: str, purpose: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingLibrary(f"{purpose} need the {distribution} package, which is not installed: "
                             f"{EXTRA} (or pip install {distribution})") from None


def check(fmt: str) -> None:
    """Raise :class:`MissingLibrary` if a library ``fmt`` needs is missing."""
    for module, distribution, purpose in NEEDS.get(fmt, ()):
        need(module, distribution, purpose)
