"""Protobuf values: the ``.proto`` text compiled at run time, the message read by ``protobuf``.

A registry serves a Protobuf schema as ``.proto`` text (or, asked for ``format=serialized``, as a
base64 ``FileDescriptorProto``, which is also what confluent-kafka's Python serializer registers).
Text is compiled by ``protoc`` — the one bundled with ``grpcio-tools`` — into a descriptor set,
together with the schemas it references (by their import names) and Protobuf's well-known types;
the set is loaded into a descriptor pool of its own, and the message the value's indexes name is
read and rendered with Protobuf's canonical JSON mapping (``json_format``): field names as in the
``.proto``, every field including those at their default, enums by name, 64-bit integers as
strings, ``bytes`` as base64, and the well-known types as that mapping writes them (``Timestamp``
RFC 3339, ``Duration`` ``"1.5s"``, wrappers as their value, ``Struct`` as an object, ``Any`` with
``@type``).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from payloads.errors import SchemaError, ValueMismatch
from payloads.libs import need
from payloads.schema import Reference, Schema

Resolve = Callable[[Reference], Schema]
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_MAIN = "kdissect_schema.proto"
_BUILTIN = ("google/protobuf/",)                 # shipped with protoc: never a registry reference
PROTOC_TIMEOUT = 60


def _is_serialized(text: str) -> bool:
    return bool(_BASE64.fullmatch(text)) and "=" not in text.rstrip("=")


def _protoc_includes() -> str:
    need("grpc_tools.protoc", "grpcio-tools", "compiling .proto schemas")
    import grpc_tools
    return str(Path(grpc_tools.__file__).parent / "_proto")


def _compile_text(files: dict[str, str], main: str) -> bytes:
    """``protoc --include_imports --descriptor_set_out`` over ``files`` (import name -> text)."""
    include = _protoc_includes()
    with tempfile.TemporaryDirectory(prefix="kdissect-proto-") as tmp:
        root = Path(tmp) / "src"
        for name, text in files.items():
            path = root / name
            if not path.resolve().is_relative_to(root.resolve()):
                raise SchemaError(f"reference name {name!r} leaves the schema folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        out = Path(tmp) / "set.pb"
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{root}", f"-I{include}", "--include_imports",
               f"--descriptor_set_out={out}", main]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROTOC_TIMEOUT,
                                  env={**os.environ, "PYTHONWARNINGS": "ignore"})
        except subprocess.TimeoutExpired:
            raise SchemaError(f"protoc took more than {PROTOC_TIMEOUT} s") from None
        if proc.returncode != 0:
            text = " ".join(line.replace(str(root) + os.sep, "") for line in proc.stderr.strip().splitlines()[:3])
            raise SchemaError(f"protoc: {text or 'failed'}")
        return out.read_bytes()


class ProtobufDecoder:
    format = "protobuf"

    def __init__(self, schema: Schema, resolve: Resolve) -> None:
        need("google.protobuf", "protobuf", "Protobuf values")
        from google.protobuf import descriptor_pb2, descriptor_pool

        self.pool = descriptor_pool.DescriptorPool()
        if _is_serialized(schema.text):
            protos = self._serialized(schema, resolve, descriptor_pb2)
            for proto in protos:
                self._add(proto.SerializeToString())
            main = protos[-1].name
        else:
            files = {_MAIN: schema.text}
            self._texts(schema, resolve, files, 0)
            fds = descriptor_pb2.FileDescriptorSet()
            fds.ParseFromString(_compile_text(files, _MAIN))
            for proto in fds.file:
                self._add(proto.SerializeToString())
            main = _MAIN
        self.file = self.pool.FindFileByName(main)
        self._classes: dict[tuple[int, ...], Any] = {}

    def _add(self, serialized: bytes) -> None:
        try:
            self.pool.AddSerializedFile(serialized)
        except Exception as exc:  # noqa: BLE001 - protobuf raises TypeError or its own errors
            raise SchemaError(f"descriptor not accepted: {exc}") from None

    def _texts(self, schema: Schema, resolve: Resolve, files: dict[str, str], depth: int) -> None:
        if depth > 32:
            raise SchemaError("Protobuf references nested more than 32 deep")
        for ref in schema.references:
            if ref.name in files or ref.name.startswith(_BUILTIN):
                continue
            child = resolve(ref)
            if _is_serialized(child.text):
                raise SchemaError(f"reference {ref.name}: a serialized descriptor under a .proto text schema")
            files[ref.name] = child.text
            self._texts(child, resolve, files, depth + 1)

    def _serialized(self, schema: Schema, resolve: Resolve, descriptor_pb2: Any, name: str = _MAIN,
                    seen: set[str] | None = None) -> list[Any]:
        """The FileDescriptorProtos of a base64 schema and its references, dependencies first."""
        seen = set() if seen is None else seen
        proto = descriptor_pb2.FileDescriptorProto()
        try:
            proto.ParseFromString(base64.b64decode(schema.text, validate=False))
        except (binascii.Error, ValueError, Exception) as exc:  # noqa: BLE001 - DecodeError
            raise SchemaError(f"not a base64 FileDescriptorProto: {exc}") from None
        proto.name = name
        out = []
        refs = {r.name: r for r in schema.references}
        for dep in proto.dependency:
            if dep in seen:
                continue
            seen.add(dep)
            if dep.startswith(_BUILTIN):
                out.append(_well_known(dep, descriptor_pb2))
            elif dep in refs:
                out += self._serialized(resolve(refs[dep]), resolve, descriptor_pb2, dep, seen)
            else:
                raise SchemaError(f"import {dep!r} is neither a reference nor a well-known type")
        out.append(proto)
        return out

    def message_class(self, indexes: list[int]) -> Any:
        key = tuple(indexes)
        cls = self._classes.get(key)
        if cls is None:
            from google.protobuf import message_factory
            descs = list(self.file.message_types_by_name.values())
            desc = None
            for depth, i in enumerate(indexes):
                if i >= len(descs):
                    raise ValueMismatch(f"message index {i} at depth {depth}: the schema has {len(descs)} there")
                desc = descs[i]
                descs = list(desc.nested_types)
            cls = self._classes[key] = message_factory.GetMessageClass(desc)
        return cls

    def decode(self, data: bytes, start: int, indexes: list[int] | None) -> bytes:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        msg = self.message_class(indexes or [0])()
        try:
            msg.ParseFromString(data[start:])
        except DecodeError as exc:
            raise ValueMismatch(f"{msg.DESCRIPTOR.full_name}: {exc}") from None
        unknown = _unknown_fields(msg)
        if unknown:
            raise ValueMismatch(f"{msg.DESCRIPTOR.full_name}: field number{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(map(str, unknown[:5]))} not in the schema")
        try:
            value = json_format.MessageToDict(msg, preserving_proto_field_name=True,
                                              always_print_fields_with_no_presence=True,
                                              descriptor_pool=self.pool)
        except Exception as exc:  # noqa: BLE001 - json_format raises on values it cannot map
            raise ValueMismatch(f"{msg.DESCRIPTOR.full_name}: {exc}") from None
        return orjson.dumps(value)


def _unknown_fields(msg: Any) -> list[int]:
    """Field numbers of the message (top level) that its schema does not have."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:
        return []
    return sorted({f.field_number for f in UnknownFieldSet(msg)})


def _well_known(name: str, descriptor_pb2: Any) -> Any:
    """The FileDescriptorProto of a well-known type, from the protobuf package itself."""
    import importlib
    module = "google.protobuf." + name[len("google/protobuf/"):-len(".proto")].replace("/", ".") + "_pb2"
    try:
        mod = importlib.import_module(module)
    except ImportError:
        raise SchemaError(f"import {name!r}: not a well-known type this protobuf has") from None
    proto = descriptor_pb2.FileDescriptorProto()
    proto.ParseFromString(mod.DESCRIPTOR.serialized_pb)
    return proto
