"""PostgreSQL type OIDs and value codecs (text and binary) for the wire server.

Results are encoded per column from the declared PostgreSQL OID, so a column described at Describe time is
encoded the same way at Execute time whatever Arrow type the engine hands back.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import struct
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa

BOOL, BYTEA, INT8, INT2, INT4, TEXT, OID, JSON_, FLOAT4, FLOAT8 = 16, 17, 20, 21, 23, 25, 26, 114, 700, 701
UNKNOWN, VARCHAR, BPCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ = 705, 1043, 1042, 1082, 1083, 1114, 1184
INTERVAL, NUMERIC, UUID_, JSONB, NAME, CHAR = 1186, 1700, 2950, 3802, 19, 18

#: name, typlen and array OID of the types this server ever reports.
TYPE_INFO: dict[int, tuple[str, int, int]] = {
    BOOL: ("bool", 1, 1000), BYTEA: ("bytea", -1, 1001), CHAR: ("char", 1, 1002), NAME: ("name", 64, 1003),
    INT8: ("int8", 8, 1016), INT2: ("int2", 2, 1005), INT4: ("int4", 4, 1007), TEXT: ("text", -1, 1009),
    OID: ("oid", 4, 1028), JSON_: ("json", -1, 199), FLOAT4: ("float4", 4, 1021), FLOAT8: ("float8", 8, 1022),
    UNKNOWN: ("unknown", -2, 0), BPCHAR: ("bpchar", -1, 1014), VARCHAR: ("varchar", -1, 1015),
    DATE: ("date", 4, 1182), TIME: ("time", 8, 1183), TIMESTAMP: ("timestamp", 8, 1115),
    TIMESTAMPTZ: ("timestamptz", 8, 1185), INTERVAL: ("interval", 16, 1187), NUMERIC: ("numeric", -1, 1231),
    UUID_: ("uuid", 16, 2951), JSONB: ("jsonb", -1, 3807),
}

#: array OID -> element OID (one-dimensional arrays of the types above)
ARRAY_OF: dict[int, int] = {arr: elem for elem, (_name, _size, arr) in TYPE_INFO.items() if arr}

_DUCK_TO_OID = {
    "BOOLEAN": BOOL, "BOOL": BOOL, "TINYINT": INT2, "SMALLINT": INT2, "UTINYINT": INT2, "INTEGER": INT4,
    "INT": INT4, "USMALLINT": INT4, "BIGINT": INT8, "UINTEGER": INT8, "UBIGINT": NUMERIC, "HUGEINT": NUMERIC,
    "UHUGEINT": NUMERIC, "FLOAT": FLOAT4, "REAL": FLOAT4, "DOUBLE": FLOAT8, "VARCHAR": TEXT, "TEXT": TEXT,
    "STRING": TEXT, "BLOB": BYTEA, "DATE": DATE, "TIME": TIME, "TIMESTAMP": TIMESTAMP,
    "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ, "TIMESTAMPTZ": TIMESTAMPTZ, "INTERVAL": INTERVAL, "UUID": UUID_,
    "JSON": JSON_, "TIMESTAMP_NS": TIMESTAMP, "TIMESTAMP_MS": TIMESTAMP, "TIMESTAMP_S": TIMESTAMP,
}


def oid_for_duckdb(type_name: str) -> int:
    """The PostgreSQL OID used to report a DuckDB column type (unknown types are sent as text)."""
    name = str(type_name).upper().strip()
    if name.startswith("DECIMAL") or name.startswith("NUMERIC"):
        return NUMERIC
    return _DUCK_TO_OID.get(name, TEXT)


def oid_for_arrow(t: pa.DataType) -> int:
    """The PostgreSQL OID used to report an Arrow column type (a list of a scalar type is that type's array,
    e.g. pg_proc.proargnames as text[]; anything else unknown is text)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        elem = t.value_type
        nested = pa.types.is_list(elem) or pa.types.is_large_list(elem) or pa.types.is_fixed_size_list(elem)
        return TEXT if nested else TYPE_INFO.get(oid_for_arrow(elem), ("", 0, TEXT))[2] or TEXT
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t):
        return INT2
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return INT4
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return INT8
    if pa.types.is_uint64(t) or pa.types.is_decimal(t):
        return NUMERIC
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return FLOAT4
    if pa.types.is_floating(t):
        return FLOAT8
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_timestamp(t):
        return TIMESTAMPTZ if t.tz else TIMESTAMP
    if pa.types.is_time(t):
        return TIME
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return BYTEA
    return TEXT


def type_size(oid: int) -> int:
    return TYPE_INFO.get(oid, ("", -1, 0))[1]


# ---------------------------------------------------------------- results: Python value -> bytes

def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(float(v))


def _text(oid: int, v: Any) -> str:
    if isinstance(v, bool):
        return "t" if v else "f"
    if oid in (FLOAT4, FLOAT8):
        return _float_text(float(v))
    if oid in (INT2, INT4, INT8, OID) and isinstance(v, (int, float, decimal.Decimal)):
        return str(int(v))
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, dt.datetime):
        s = v.isoformat(sep=" ")
        return s[:-3] if v.tzinfo is not None and s.endswith(":00") else s
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return f"{v.days} days {v.seconds} seconds {v.microseconds} microseconds"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, (list, tuple)):
        elem = ARRAY_OF.get(oid, TEXT)
        return "{" + ",".join("NULL" if x is None else _array_item(_text(elem, x)) for x in v) + "}"
    if isinstance(v, dict):
        return json.dumps(v, default=str)
    return str(v)


def _array_item(s: str) -> str:
    if s == "" or re.search(r'[{},"\\\s]', s) or s.upper() == "NULL":
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


_PG_EPOCH = dt.datetime(2000, 1, 1)
_PG_EPOCH_DATE = dt.date(2000, 1, 1)


def _numeric_binary(v: decimal.Decimal) -> bytes:
    if not v.is_finite():
        return struct.pack("!hhHH", 0, 0, 0xC000, 0)
    sign, digits, exp = v.as_tuple()
    assert isinstance(exp, int)
    dscale = max(0, -exp)
    frac4 = (dscale + 3) // 4 * 4
    n = int("".join(map(str, digits)) or "0") * 10 ** (exp + frac4)
    groups: list[int] = []
    while n:
        groups.append(n % 10000)
        n //= 10000
    groups.reverse()
    weight = len(groups) - frac4 // 4 - 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHH{len(groups)}H", len(groups), weight, 0x4000 if sign else 0, dscale, *groups)


def _binary(oid: int, v: Any) -> bytes:
    if oid in ARRAY_OF and isinstance(v, (list, tuple)):  # one dimension, lower bound 1
        elem = ARRAY_OF[oid]
        if not v:
            return struct.pack("!iii", 0, 0, elem)
        parts = [struct.pack("!iiiii", 1, int(any(x is None for x in v)), elem, len(v), 1)]
        for x in v:
            data = b"" if x is None else _binary(elem, x)
            parts.append(b"\xff\xff\xff\xff" if x is None else struct.pack("!i", len(data)) + data)
        return b"".join(parts)
    if oid == BOOL:
        return b"\x01" if v else b"\x00"
    if oid == INT2:
        return struct.pack("!h", int(v))
    if oid in (INT4, OID):
        return struct.pack("!i", int(v))
    if oid == INT8:
        return struct.pack("!q", int(v))
    if oid == FLOAT4:
        return struct.pack("!f", float(v))
    if oid == FLOAT8:
        return struct.pack("!d", float(v))
    if oid == NUMERIC:
        return _numeric_binary(v if isinstance(v, decimal.Decimal) else decimal.Decimal(repr(v)))
    if oid == DATE:
        return struct.pack("!i", (v - _PG_EPOCH_DATE).days)
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        delta = v - _PG_EPOCH
        return struct.pack("!q", (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)
    if oid == TIME:
        return struct.pack("!q", ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond)
    if oid == UUID_:
        return (v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))).bytes
    if oid == BYTEA:
        return bytes(v)
    if oid == JSONB:
        return b"\x01" + _text(oid, v).encode()
    return _text(oid, v).encode()


def encoder(oid: int, binary: bool) -> Callable[[Any], bytes]:
    """A function turning one non-NULL value into its wire bytes for this OID and format."""
    if binary:
        return lambda v: _binary(oid, v)
    return lambda v: _text(oid, v).encode()


# ---------------------------------------------------------------- parameters: bytes -> SQL literal

def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_INT_OIDS = {INT2: "!h", INT4: "!i", INT8: "!q", OID: "!I"}


def decode_param_binary(oid: int, data: bytes) -> Any:
    """Decode a binary-format parameter into a Python value."""
    if oid in _INT_OIDS:
        return struct.unpack(_INT_OIDS[oid], data)[0]
    if oid == FLOAT4:
        return struct.unpack("!f", data)[0]
    if oid == FLOAT8:
        return struct.unpack("!d", data)[0]
    if oid == BOOL:
        return data != b"\x00"
    if oid == DATE:
        return _PG_EPOCH_DATE + dt.timedelta(days=struct.unpack("!i", data)[0])
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        value = _PG_EPOCH + dt.timedelta(microseconds=struct.unpack("!q", data)[0])
        return value.replace(tzinfo=dt.UTC) if oid == TIMESTAMPTZ else value
    if oid == UUID_:
        return uuid.UUID(bytes=data)
    if oid == BYTEA:
        return bytes(data)
    if oid == NUMERIC:
        ndigits, weight, sign, dscale = struct.unpack("!hhHH", data[:8])
        digits = struct.unpack(f"!{ndigits}H", data[8:8 + 2 * ndigits])
        if sign == 0xC000:
            return decimal.Decimal("NaN")
        n = 0
        for d in digits:
            n = n * 10000 + d
        exponent = (weight - len(digits) + 1) * 4
        value = decimal.Decimal((1 if sign == 0x4000 else 0, tuple(int(c) for c in str(n)), exponent))
        return value.quantize(decimal.Decimal((0, (1,), -dscale))) if exponent < -dscale else value
    if oid == JSONB:
        return data[1:].decode()
    return data.decode()


def to_literal(oid: int, value: Any, text_format: bool) -> str:
    """Render one bound parameter as a SQL literal that cannot change the statement's structure."""
    if value is None:
        return "NULL"
    if text_format:
        s = value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
        if oid in (INT2, INT4, INT8, OID, FLOAT4, FLOAT8, NUMERIC):
            if s in ("NaN", "Infinity", "-Infinity"):
                return f"{_quote(s)}::DOUBLE"
            if not _NUMBER.fullmatch(s):
                raise ValueError(f"invalid numeric parameter for type {TYPE_INFO[oid][0]}")
            return s
        if oid == BOOL:
            return "TRUE" if s.lower() in ("t", "true", "1", "yes", "on", "y") else "FALSE"
        if oid in (0, UNKNOWN) and _NUMBER.fullmatch(s):
            return s  # untyped numbers (e.g. ε from pg8000) stay numbers, as PostgreSQL would resolve them
        cast = {DATE: "DATE", TIMESTAMP: "TIMESTAMP", TIMESTAMPTZ: "TIMESTAMPTZ", TIME: "TIME",
                UUID_: "UUID", INTERVAL: "INTERVAL"}.get(oid)
        return f"{_quote(s)}::{cast}" if cast else _quote(s)
    return python_literal(value)


def python_literal(value: Any) -> str:
    """Render a Python value as a DuckDB SQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"{_quote(_float_text(value))}::DOUBLE"
    if isinstance(value, decimal.Decimal):
        return str(value) if value.is_finite() else "'NaN'::DOUBLE"
    if isinstance(value, dt.datetime):
        return f"{_quote(value.isoformat())}::{'TIMESTAMPTZ' if value.tzinfo else 'TIMESTAMP'}"
    if isinstance(value, dt.date):
        return f"{_quote(value.isoformat())}::DATE"
    if isinstance(value, uuid.UUID):
        return f"{_quote(str(value))}::UUID"
    if isinstance(value, (bytes, bytearray)):
        return f"from_hex({_quote(bytes(value).hex())})"
    return _quote(str(value))
