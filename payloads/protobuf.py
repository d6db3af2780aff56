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

Values and schemas are anyone's (see :mod:`payloads.limits`). Protobuf's parser stops at 100 nested
messages and checks every length against the bytes. What it does not bound is width: every message
costs all its fields, parsed and rendered, however few bytes it takes (an empty one is 2), so when
the schema's widest message could make a value cost more than ``MAX_FIELDS_PER_BYTE`` fields a byte
(plus ``MAX_EMPTY_ITEMS``), the value's wire format is read first, without building anything, and one
past that is not parsed. The JSON it renders to nests at most ``MAX_DEPTH`` levels (``Any`` nested in
``Any`` is parsed afresh at each level). Whatever protobuf or ``json_format`` raises on a value (a
``RecursionError``, a timestamp out of range, an ``Any`` naming no known type) is a
:class:`~payloads.errors.ValueMismatch`, and on a schema a :class:`~payloads.errors.SchemaError`.
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

from payloads.errors import PayloadError, SchemaError, ValueMismatch
from payloads.libs import need
from payloads.limits import (MAX_DEPTH, MAX_EMPTY_ITEMS, MAX_FIELDS_PER_BYTE, MAX_SCHEMA_SET_BYTES, check_schema_text,
                             json_dumps)
from payloads.schema import Reference, Schema

Resolve = Callable[[Reference], Schema]
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_MAIN = "kdissect_schema.proto"
_BUILTIN = ("google/protobuf/",)                 # shipped with protoc: never a registry reference
PROTOC_TIMEOUT = 60
MAX_REFERENCE_DEPTH = 32
_ANY = "google.protobuf.Any"
_TYPE_GROUP, _TYPE_MESSAGE = 10, 11              # FieldDescriptor.TYPE_GROUP, TYPE_MESSAGE


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
        try:
            self._compile(schema, resolve)
        except PayloadError:
            raise
        except RecursionError:
            raise SchemaError("Protobuf schema nested too deep to load") from None
        except Exception as exc:  # noqa: BLE001 - whatever protobuf raises on a descriptor it does not take
            raise SchemaError(f"Protobuf schema not loaded: {type(exc).__name__}: {_line(exc)}") from None
        self._classes: dict[tuple[int, ...], Any] = {}
        self._wide: int | None = None

    def _compile(self, schema: Schema, resolve: Resolve) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool
        from google.protobuf.message import DecodeError

        check_schema_text("protobuf", schema.text)
        self._total = len(schema.text)
        self.pool = descriptor_pool.DescriptorPool()
        if _is_serialized(schema.text):
            protos = self._serialized(schema, resolve, descriptor_pb2)
            for proto in protos:
                self._add(proto.SerializeToString())
            self._files = [proto.name for proto in protos]
            main = protos[-1].name
        else:
            files = {_MAIN: schema.text}
            self._texts(schema, resolve, files, 0)
            fds = descriptor_pb2.FileDescriptorSet()
            try:
                fds.ParseFromString(_compile_text(files, _MAIN))
            except DecodeError as exc:
                raise SchemaError(f"protoc's descriptor set does not load: {exc}") from None
            for proto in fds.file:
                self._add(proto.SerializeToString())
            self._files = [proto.name for proto in fds.file]
            main = _MAIN
        self.file = self.pool.FindFileByName(main)

    def _count(self, child: Schema) -> None:
        """A referenced schema's text, held to the budgets alone and with the others."""
        check_schema_text("protobuf", child.text)
        self._total += len(child.text)
        if self._total > MAX_SCHEMA_SET_BYTES:
            raise SchemaError(f"Protobuf schema with its references past {MAX_SCHEMA_SET_BYTES} characters")

    def _add(self, serialized: bytes) -> None:
        try:
            self.pool.AddSerializedFile(serialized)
        except Exception as exc:  # noqa: BLE001 - protobuf raises TypeError or its own errors
            raise SchemaError(f"descriptor not accepted: {exc}") from None

    def _texts(self, schema: Schema, resolve: Resolve, files: dict[str, str], depth: int) -> None:
        if depth > MAX_REFERENCE_DEPTH:
            raise SchemaError(f"Protobuf references nested more than {MAX_REFERENCE_DEPTH} deep")
        for ref in schema.references:
            if ref.name in files or ref.name.startswith(_BUILTIN):
                continue
            child = resolve(ref)
            self._count(child)
            if _is_serialized(child.text):
                raise SchemaError(f"reference {ref.name}: a serialized descriptor under a .proto text schema")
            files[ref.name] = child.text
            self._texts(child, resolve, files, depth + 1)

    def _serialized(self, schema: Schema, resolve: Resolve, descriptor_pb2: Any, name: str = _MAIN,
                    seen: set[str] | None = None, depth: int = 0) -> list[Any]:
        """The FileDescriptorProtos of a base64 schema and its references, dependencies first."""
        if depth > MAX_REFERENCE_DEPTH:
            raise SchemaError(f"Protobuf references nested more than {MAX_REFERENCE_DEPTH} deep")
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
                child = resolve(refs[dep])
                self._count(child)
                out += self._serialized(child, resolve, descriptor_pb2, dep, seen, depth + 1)
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
            try:
                cls = message_factory.GetMessageClass(desc)
            except Exception as exc:  # noqa: BLE001 - a descriptor protobuf loaded but builds no class of
                raise SchemaError(f"message {desc.full_name}: no class: {_line(exc)}") from None
            self._classes[key] = cls
        return cls

    def decode(self, data: bytes, start: int, indexes: list[int] | None) -> bytes:
        """The message at ``data[start:]`` as JSON; ValueMismatch for whatever does not decode, or is
        past the budgets; SchemaError when the message the indexes name has no class."""
        try:
            return self._decode(data, start, indexes)
        except PayloadError:
            raise
        except RecursionError:
            raise ValueMismatch("nested too deep to render (Python's recursion limit)") from None
        except MemoryError:
            raise ValueMismatch("out of memory rendering the value") from None
        except Exception as exc:  # noqa: BLE001 - protobuf's and json_format's own errors on odd values
            raise ValueMismatch(f"{type(exc).__name__}: {_line(exc)}") from None

    def _decode(self, data: bytes, start: int, indexes: list[int] | None) -> bytes:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        msg = self.message_class(indexes or [0])()
        body = data[start:]
        # A message of a wide type costs its fields when parsed and rendered, whatever its bytes: an empty
        # one is 2 bytes. When the widest type times the messages the bytes could hold is past the budget,
        # the wire is read first, and a value that would cost more is not parsed.
        n = len(body)
        budget = MAX_FIELDS_PER_BYTE * n + MAX_EMPTY_ITEMS
        if (n // 2 + 1) * self._widest() + n > budget:
            weight = self._weight(body, msg.DESCRIPTOR, budget)
            if weight > budget:
                raise ValueMismatch(f"{msg.DESCRIPTOR.full_name}: its messages have more than {budget} fields "
                                    f"in {n} bytes (at most {MAX_FIELDS_PER_BYTE} a byte plus {MAX_EMPTY_ITEMS}: "
                                    "a field at its default costs no byte, but is parsed and rendered)")
        try:
            msg.ParseFromString(body)
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
        except RecursionError:
            raise ValueMismatch(f"{msg.DESCRIPTOR.full_name}: nested too deep to render "
                                "(Python's recursion limit)") from None
        except Exception as exc:  # noqa: BLE001 - json_format raises on values it cannot map
            raise ValueMismatch(f"{msg.DESCRIPTOR.full_name}: {_line(exc)}") from None
        try:
            return json_dumps(value)
        except ValueMismatch as exc:
            raise ValueMismatch(f"{msg.DESCRIPTOR.full_name}: {exc}") from None

    def _widest(self) -> int:
        """The most fields + 1 of a message type in the pool (any of them can be in an ``Any``)."""
        if self._wide is None:
            widest, todo = 1, []
            for name in self._files:
                todo.extend(self.pool.FindFileByName(name).message_types_by_name.values())
            while todo:
                d = todo.pop()
                widest = max(widest, len(d.fields) + 1)
                todo.extend(d.nested_types)
            self._wide = widest
        return self._wide

    def _weight(self, buf: bytes, desc: Any, budget: int) -> int:
        """The cost of parsing and rendering the message ``desc`` in ``buf``, read from the wire
        without building anything: its bytes, plus for each message in it (the top one, sub-messages,
        map entries, groups, the message an ``Any`` holds) its fields and one. Stops past ``budget``.
        Wire format that does not read ends the count: the parser says what is wrong with it."""
        weight = len(buf) + len(desc.fields) + 1
        fields = desc.fields_by_number
        end = len(buf)
        group = 0
        resume = end
        stack: list[tuple[int, Any, int, int]] = []      # the enclosing messages: (end, fields, group, resume)
        pos = 0
        while True:
            if pos >= end:
                if group or not stack or pos > end:
                    return weight                  # a group cut short, the end, or a field past its message
                pos = resume
                end, fields, group, resume = stack.pop()
                continue
            key, pos = _wire_varint(buf, pos)
            if key < 0:
                return weight
            wt = key & 7
            if wt == 0:
                _, pos = _wire_varint(buf, pos)
                if pos < 0:
                    return weight
            elif wt == 1:
                pos += 8
            elif wt == 5:
                pos += 4
            elif wt == 2:
                length, pos = _wire_varint(buf, pos)
                if pos < 0 or pos + length > end:
                    return weight
                fd = fields.get(key >> 3)
                sub = fd.message_type if fd is not None and fd.type == _TYPE_MESSAGE else None
                if sub is None:
                    pos += length
                    continue
                inner_at, inner_end, inner = pos, pos + length, sub
                if sub.full_name == _ANY:
                    weight += len(sub.fields) + 1
                    inner_at, inner_end, inner = self._any_value(buf, pos, pos + length)
                    if inner is None:
                        pos += length
                        continue
                weight += len(inner.fields) + 1
                if weight > budget:
                    return weight
                if len(stack) >= MAX_DEPTH:
                    raise ValueMismatch(f"{desc.full_name}: nested more than {MAX_DEPTH} levels deep")
                stack.append((end, fields, group, resume))
                end, fields, group, resume, pos = inner_end, inner.fields_by_number, 0, pos + length, inner_at
            elif wt == 3:
                fd = fields.get(key >> 3)
                inner = fd.message_type if fd is not None and fd.type == _TYPE_GROUP else None
                weight += len(inner.fields) + 1 if inner is not None else 1
                if weight > budget:
                    return weight
                if len(stack) >= MAX_DEPTH:
                    raise ValueMismatch(f"{desc.full_name}: nested more than {MAX_DEPTH} levels deep")
                stack.append((end, fields, group, resume))
                fields, group = (inner.fields_by_number if inner is not None else {}), key >> 3
            elif wt == 4:
                if not group or key >> 3 != group:
                    return weight
                end, fields, group, resume = stack.pop()       # a group ends at its end tag
            else:
                return weight

    def _any_value(self, buf: bytes, pos: int, end: int) -> tuple[int, int, Any]:
        """Where the message an ``Any`` at ``buf[pos:end]`` holds is, and its type (None if not known)."""
        url = b""
        at = stop = pos
        while pos < end:
            key, pos = _wire_varint(buf, pos)
            if key < 0:
                break
            wt = key & 7
            if wt == 0:
                _, pos = _wire_varint(buf, pos)
            elif wt == 1:
                pos += 8
            elif wt == 5:
                pos += 4
            elif wt == 2:
                length, pos = _wire_varint(buf, pos)
                if pos < 0 or pos + length > end:
                    break
                if key >> 3 == 1:
                    url = bytes(buf[pos:pos + length])
                elif key >> 3 == 2:
                    at, stop = pos, pos + length
                pos += length
            else:
                break
            if pos < 0:
                break
        try:
            return at, stop, self.pool.FindMessageTypeByName(url.decode().rpartition("/")[2])
        except Exception:  # noqa: BLE001 - not UTF-8, or no such type: json_format will say so
            return at, stop, None


def _wire_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A varint at ``pos`` and the position after it; (-1, -1) when cut short or past 10 bytes."""
    value = shift = 0
    n = len(buf)
    while pos < n and shift < 70:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return -1, -1


def _line(exc: BaseException) -> str:
    """An exception's message on one line, of a readable length."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


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
