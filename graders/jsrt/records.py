"""Typed views of the JSONL records preprocessing reads: only the fields it uses, decoded in C.

A large run holds tens of thousands of token-usage, gateway and event lines, and building a
full Python dict for each cost more than everything preprocessing does with it (make bench).
The built-in graders read a few fields per record, so each line is decoded by msgspec into
a struct of those fields (the others are validated and skipped, not built); the line itself
is kept (``lazyjson``) for the rare reader of the whole record. A field absent from the line
reads as None, as ``record.get(field)`` does.

Decoding fails (and the batch takes the reference path, whose values are then viewed through
:func:`view`) whenever a line is not a record, a nested field read as a record is something
else, or a read value would differ from ``JSON.parse`` (see ``jsonio.parse_jsonl_records``).
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec


class TokenRecord(msgspec.Struct, gc=False):
    """A token-usage line (``api-proxy-logs/token-usage.jsonl``)."""

    input_tokens: Any = None
    output_tokens: Any = None
    duration_ms: Any = None
    model: Any = None


# JavaScript's safe integers: every operation on them is exact in doubles and in Python ints.
SafeInt = Annotated[int, msgspec.Meta(ge=-(2**53 - 1), le=2**53 - 1)]


class TokenInts(TokenRecord, gc=False):
    """A token-usage line whose counts are safe integers or strings, or absent (read as 0).

    Real logs hold little else (a string count is ``Number()``-converted, rarely); a block
    that decodes into these needs no per-value type tests for its ints, whose range msgspec
    checked (``preprocess.read_token_usage``). An absent count reads as 0, which every reader
    treats as it treats an absent one (``Number(undefined) || 0`` is 0, and 0 adds nothing to
    a sum or a peak); any other value fails the decode and the block is read as ``TokenRecord``.
    """

    input_tokens: SafeInt | str = 0
    output_tokens: SafeInt | str = 0
    duration_ms: SafeInt | str = 0
    model: str | None = None


class GatewayPayload(msgspec.Struct, gc=False):
    tool_name: Any = None


class GatewayRecord(msgspec.Struct, gc=False):
    """An MCP gateway line: the fields of the tool-call, request, retry and error filters."""

    type: Any = None
    event: Any = None
    method: Any = None
    tool_name: Any = None
    payload: GatewayPayload | None = None  # None also when the payload is not a record
    message: Any = None
    retry: Any = None
    level: Any = None


class EventData(msgspec.Struct, gc=False):
    """The ``data`` of a Copilot session event: what a native tool call is built from."""

    toolCallId: Any = None
    toolName: Any = None
    mcpServerName: Any = None
    mcpToolName: Any = None
    input: Any = None
    arguments: Any = None
    parameters: Any = None
    args: Any = None
    toolInput: Any = None
    command: Any = None
    success: Any = None
    error: Any = None


class EventRecord(msgspec.Struct, gc=False):
    """A line of ``copilot-session-state/…/events.jsonl``."""

    type: Any = None
    data: EventData | None = None  # None also when data is not a record
    timestamp: Any = None


# Structs whose decoded values are JSON.parse's even where a line holds an integer beyond
# 2**53 (which JavaScript reads as a double, and msgspec exactly): TokenInts holds only safe
# ints and strings; GatewayRecord's values are only compared with strings, True, None and 0
# (preprocess.read_gateway), which a double and the exact integer pass alike. Their blocks are
# not scanned for 16-digit runs (jsonio.parse_jsonl_records); the lines kept are, when loaded.
# A struct of a higher layer joins with :func:`digit_safe`.
DIGIT_SAFE: set[type[msgspec.Struct]] = {TokenInts, GatewayRecord}

R = TypeVar("R", bound=msgspec.Struct)
S = TypeVar("S", bound=type[msgspec.Struct])


def digit_safe(record_type: S) -> S:
    """Mark a struct as digit-safe (above): it holds only safe ints, strings and values never
    read as numbers."""
    DIGIT_SAFE.add(record_type)
    return record_type


_NESTED: dict[type[msgspec.Struct], dict[str, type[msgspec.Struct]]] = {
    GatewayRecord: {"payload": GatewayPayload},
    EventRecord: {"data": EventData},
}


def view(record_type: type[R], value: Any) -> R | None:
    """The struct of an already parsed value; None for a value that is not a record."""
    if type(value) is not dict:
        return None
    get = value.get
    nested = _NESTED.get(record_type, {})
    fields: dict[str, Any] = {}
    for name in record_type.__struct_fields__:
        v = get(name)
        inner = nested.get(name)
        if inner is not None:
            v = view(inner, v)
        fields[name] = v
    return record_type(**fields)


_DECODERS: dict[type[msgspec.Struct], msgspec.json.Decoder[Any]] = {}


def decoder(record_type: type[R]) -> msgspec.json.Decoder[R]:
    """One decoder per record type (building one costs more than decoding a line)."""
    dec = _DECODERS.get(record_type)
    if dec is None:
        dec = _DECODERS[record_type] = msgspec.json.Decoder(record_type)
    return dec
