"""DataType enum values <-> numpy dtypes, and names as TensorFlow prints them."""

from __future__ import annotations

import numpy as np

from .errors import UnsupportedDTypeError

# DataType numbers (schemas/types.proto); kept as plain ints so importing this is cheap.
DT_INVALID = 0
DT_FLOAT = 1
DT_DOUBLE = 2
DT_INT32 = 3
DT_UINT8 = 4
DT_INT16 = 5
DT_INT8 = 6
DT_STRING = 7
DT_COMPLEX64 = 8
DT_INT64 = 9
DT_BOOL = 10
DT_BFLOAT16 = 14
DT_UINT16 = 17
DT_COMPLEX128 = 18
DT_HALF = 19
DT_RESOURCE = 20
DT_VARIANT = 21
DT_UINT32 = 22
DT_UINT64 = 23
REF_OFFSET = 100

_NP = {
    DT_FLOAT: np.dtype(np.float32), DT_DOUBLE: np.dtype(np.float64),
    DT_HALF: np.dtype(np.float16),
    DT_INT8: np.dtype(np.int8), DT_INT16: np.dtype(np.int16), DT_INT32: np.dtype(np.int32),
    DT_INT64: np.dtype(np.int64),
    DT_UINT8: np.dtype(np.uint8), DT_UINT16: np.dtype(np.uint16),
    DT_UINT32: np.dtype(np.uint32), DT_UINT64: np.dtype(np.uint64),
    DT_BOOL: np.dtype(np.bool_), DT_COMPLEX64: np.dtype(np.complex64),
    DT_COMPLEX128: np.dtype(np.complex128), DT_STRING: np.dtype(object),
}
_FROM_NP = {v: k for k, v in _NP.items() if k != DT_STRING}
# bfloat16 has no numpy dtype: dfg holds a bfloat16 tensor as a float32 array whose values
# are all bfloat16 numbers (kernels compute in float32 and every bfloat16 output is rounded
# to nearest-even, as TensorFlow's CPU kernels compute in float and round per op). Added
# after _FROM_NP so float32 arrays still mean DT_FLOAT.
_NP[DT_BFLOAT16] = np.dtype(np.float32)
# Quantized types are held as their storage integers (qint8 as int8 ...): the quantization
# kernels read what a value means from their type attrs, as TensorFlow's do.
DT_QINT8, DT_QUINT8, DT_QINT32, DT_QINT16, DT_QUINT16 = 11, 12, 13, 15, 16
_NP.update({DT_QINT8: np.dtype(np.int8), DT_QUINT8: np.dtype(np.uint8),
            DT_QINT16: np.dtype(np.int16), DT_QUINT16: np.dtype(np.uint16),
            DT_QINT32: np.dtype(np.int32)})

_NAMES = {
    0: "invalid", 1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
    7: "string", 8: "complex64", 9: "int64", 10: "bool", 11: "qint8", 12: "quint8",
    13: "qint32", 14: "bfloat16", 15: "qint16", 16: "quint16", 17: "uint16",
    18: "complex128", 19: "float16", 20: "resource", 21: "variant", 22: "uint32",
    23: "uint64", 24: "float8_e5m2", 25: "float8_e4m3fn", 26: "float8_e4m3fnuz",
    27: "float8_e4m3b11fnuz", 28: "float8_e5m2fnuz", 29: "int4", 30: "uint4", 31: "int2",
    32: "uint2", 33: "float4_e2m1fn",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}
_BY_NAME.update({"float": DT_FLOAT, "double": DT_DOUBLE, "half": DT_HALF})

FLOATING = frozenset({DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16})
INTEGER = frozenset({DT_INT8, DT_INT16, DT_INT32, DT_INT64,
                     DT_UINT8, DT_UINT16, DT_UINT32, DT_UINT64})
COMPLEX = frozenset({DT_COMPLEX64, DT_COMPLEX128})


def base(dt: int) -> int:
    """The non-ref DataType of ``dt`` (DT_FLOAT_REF -> DT_FLOAT)."""
    return dt - REF_OFFSET if dt > REF_OFFSET else dt


def is_ref(dt: int) -> bool:
    return dt > REF_OFFSET


def as_ref(dt: int) -> int:
    return dt if dt > REF_OFFSET else dt + REF_OFFSET


def name(dt: int) -> str:
    """TensorFlow's short name: float32, int64, float32_ref ..."""
    b = base(dt)
    n = _NAMES.get(b, f"dtype{b}")
    return n + "_ref" if is_ref(dt) else n


def from_name(s: str) -> int:
    """Parse ``float32``, ``DT_FLOAT``, ``int64`` ... into a DataType number."""
    key = s.strip()
    if key.upper().startswith("DT_"):
        from dfg.schemas import types_pb2
        try:
            return types_pb2.DataType.Value(key.upper())
        except ValueError:
            pass
        key = key[3:]
    key = key.lower()
    if key not in _BY_NAME:
        raise ValueError(f"unknown dtype '{s}'")
    return _BY_NAME[key]


def to_numpy(dt: int) -> np.dtype:
    """numpy dtype for a DataType; strings are object arrays of ``bytes``."""
    b = base(dt)
    try:
        return _NP[b]
    except KeyError:
        raise UnsupportedDTypeError(
            f"unsupported dtype {name(b)}: numpy cannot hold it (supported: "
            + ", ".join(sorted(_NAMES[k] for k in _NP)) + ")") from None


def from_numpy(dtype: np.dtype | type) -> int:
    dt = np.dtype(dtype)
    if dt.kind in "OSU":
        return DT_STRING
    try:
        return _FROM_NP[dt]
    except KeyError:
        raise UnsupportedDTypeError(f"numpy dtype {dt} has no TensorFlow DataType") from None


def is_numpy_compatible(dt: int) -> bool:
    return base(dt) in _NP


def round_bfloat16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to the nearest bfloat16 (ties to even), as a float32 array: what
    TensorFlow's float -> bfloat16 conversion gives. NaN stays NaN."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32)
    with np.errstate(over="ignore"):
        r = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) \
            & np.uint32(0xFFFF0000)
    out = r.view(np.float32)
    nan = np.isnan(a)
    if nan.any():
        out = np.where(nan, a, out)
    return out.reshape(a.shape)


def bfloat16_from_bits(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (uint16)."""
    return (np.asarray(bits, dtype=np.uint32) << np.uint32(16)).view(np.float32)


def bfloat16_bits(x: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of ``x`` rounded to bfloat16."""
    return (round_bfloat16(x).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
