"""Checkpoint kernels: RestoreV2 (read tensors from a bundle), ShardedFilename, ShardedFilespec.

RestoreV2 is what a SavedModel's restore function runs: given the checkpoint prefix, the keys
and the dtypes, it returns the stored tensors (read and checksum-verified by
:mod:`dfg.graphdef.bundle`); the function then assigns them to the variables. Slices
(``shape_and_slices`` other than ``""``, from partitioned variables) are refused.

Saving (SaveV2, MergeV2Checkpoints) is not implemented: it would need a LevelDB table writer,
and dfg only runs models for inference.
"""

from __future__ import annotations

import threading

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError

from .registry import KernelContext, kernel

# Readers by (prefix, index mtime, size): a restore reads many keys of one bundle, and a
# Session may restore more than once; the index is parsed and verified once.
_READERS: dict[tuple, object] = {}
_READERS_LOCK = threading.Lock()
_MAX_READERS = 8


def _reader(prefix: str):
    import os

    from dfg.graphdef.bundle import BundleReader

    try:
        st = os.stat(prefix + ".index")
        key = (prefix, st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    with _READERS_LOCK:
        r = _READERS.get(key) if key else None
    if r is None:
        r = BundleReader(prefix)
        if key:
            with _READERS_LOCK:
                if len(_READERS) >= _MAX_READERS:
                    _READERS.pop(next(iter(_READERS)))
                _READERS[key] = r
    return r


def _scalar_str(x: np.ndarray, what: str) -> str:
    if x.size != 1:
        raise InvalidArgumentError(f"{what} must be a scalar string, found shape "
                                   f"{list(x.shape)}")
    v = x.reshape(-1)[0]
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


@kernel("RestoreV2")
def restore_v2(ctx: KernelContext, prefix: np.ndarray, tensor_names: np.ndarray,
               shape_and_slices: np.ndarray):
    path = _scalar_str(prefix, "prefix")
    names = [n.decode("utf-8") for n in tensor_names.reshape(-1)]
    slices = [s.decode("utf-8") for s in shape_and_slices.reshape(-1)]
    dtypes = list(ctx.attrs.get("dtypes") or [])
    if not len(names) == len(slices) == len(dtypes):
        raise InvalidArgumentError(
            f"tensor_names ({len(names)}), shape_and_slices ({len(slices)}) and dtypes "
            f"({len(dtypes)}) must have the same length")
    reader = _reader(path)
    out = []
    for name, sl, want in zip(names, slices, dtypes):
        if sl:
            raise UnimplementedError(f"restoring the slice '{sl}' of {name} (partitioned "
                                     "variables) is not supported")
        have = reader.dtype(name)
        if want is not None and np.dtype(D.to_numpy(have)) != np.dtype(want):
            raise InvalidArgumentError(
                f"tensor {name} in checkpoint {path} is {D.name(have)}, the op expects "
                f"{np.dtype(want)}")
        out.append(reader.read(name))
    return out


@kernel("ShardedFilename", cheap=True)
def sharded_filename(ctx: KernelContext, basename: np.ndarray, shard: np.ndarray,
                     num_shards: np.ndarray):
    name = _scalar_str(basename, "basename")
    return np.array(f"{name}-{int(shard):05d}-of-{int(num_shards):05d}".encode(), dtype=object)


@kernel("ShardedFilespec", cheap=True)
def sharded_filespec(ctx: KernelContext, basename: np.ndarray, num_shards: np.ndarray):
    name = _scalar_str(basename, "basename")
    return np.array(f"{name}-?????-of-{int(num_shards):05d}".encode(), dtype=object)
