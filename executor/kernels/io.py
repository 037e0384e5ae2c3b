"""Checkpoint kernels: RestoreV2 and SaveV2 (read and write tensor bundles),
MergeV2Checkpoints, ShardedFilename, ShardedFilespec.

RestoreV2 is what a SavedModel's restore function runs: given the checkpoint prefix, the keys
and the dtypes, it returns the stored tensors (read and checksum-verified by
:mod:`dfg.graphdef.bundle`); the function then assigns them to the variables. SaveV2 writes
the bundle ``prefix.index`` + ``prefix.data-00000-of-00001`` (:mod:`dfg.graphdef.bundle_writer`)
and MergeV2Checkpoints merges the shards a save function wrote into one bundle, so a
SavedModel's own save function (``saver_def.save_tensor_name``) runs in dfg. Slices
(``shape_and_slices`` other than ``""``, from partitioned variables) are written as TF's
BundleWriter::AddSlice writes them, and RestoreV2 reads them, assembling a partitioned
variable from its stored slices.
"""

from __future__ import annotations

import threading

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef import files
from dfg.graphdef.errors import InvalidArgumentError

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
    # a path's bytes as the OS takes them (not UTF-8 ones too), as Python's os functions do
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


@kernel("RestoreV2", files="read")
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
    files.check(ctx, "read", path + ".index")
    reader = _reader(path)
    out = []
    for name, sl, want in zip(names, slices, dtypes):
        for shard in reader.files_of(name):
            files.check(ctx, "read", shard)
        have = reader.dtype(name)
        if want is not None and np.dtype(D.to_numpy(have)) != np.dtype(want):
            raise InvalidArgumentError(
                f"tensor {name} in checkpoint {path} is {D.name(have)}, the op expects "
                f"{np.dtype(want)}")
        # the step's budget holds the sum of what this checkpoint's reads load
        with files.read_limit(ctx.max_bytes):
            value = reader.read(name)
        out.append(_slice_of(value, sl, name) if sl.strip() else value)
    return out


def _slice_of(value: np.ndarray, spec: str, name: str) -> np.ndarray:
    """The part of ``value`` a shape_and_slices spec asks for: "10 4 0,5:-" is the full
    shape [10, 4], then per dimension "start,length" or "-" (all of it), as a partitioned
    variable's Saver restores each part."""
    parts = spec.split()
    try:
        full = [int(x) for x in parts[:-1]]
        dims = parts[-1].split(":")
    except ValueError:
        raise InvalidArgumentError(f"bad shape_and_slices '{spec}' for {name}") from None
    if tuple(full) != value.shape or len(dims) != value.ndim:
        raise InvalidArgumentError(
            f"shape_and_slices '{spec}' for {name}: the checkpoint holds shape "
            f"{list(value.shape)}")
    index = []
    for d, (extent, size) in enumerate(zip(dims, value.shape)):
        if extent == "-":
            index.append(slice(None))
            continue
        try:
            start, length = (int(x) for x in extent.split(","))
        except ValueError:
            raise InvalidArgumentError(f"bad slice '{extent}' of dimension {d} in "
                                       f"'{spec}' for {name}") from None
        if start < 0 or length < 0 or start + length > size:
            raise InvalidArgumentError(f"slice '{extent}' is outside dimension {d} "
                                       f"(size {size}) of {name}")
        index.append(slice(start, start + length))
    return np.ascontiguousarray(value[tuple(index)])


def _parse_slice(spec: str, name: str, value: np.ndarray
                 ) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """(whole shape, (start, length) per dimension, -1 for "-") of a SaveV2 shape_and_slices
    spec such as "10 4 0,5:-", checked against the slice ``value`` being saved."""
    parts = spec.split()
    try:
        full = tuple(int(x) for x in parts[:-1])
        dims = parts[-1].split(":")
        extents = tuple((0, -1) if e == "-" else tuple(int(x) for x in e.split(","))
                        for e in dims)
    except ValueError:
        raise InvalidArgumentError(f"bad shape_and_slices '{spec}' for {name}") from None
    if len(dims) != len(full) or any(len(e) != 2 for e in extents):
        raise InvalidArgumentError(f"bad shape_and_slices '{spec}' for {name}")
    want = tuple(size if length == -1 else length
                 for (start, length), size in zip(extents, full))
    if any(start < 0 or length < -1 or length != -1 and start + length > size
           for (start, length), size in zip(extents, full)) or want != value.shape:
        raise InvalidArgumentError(
            f"shape_and_slices '{spec}' for {name}: the slice has shape {list(value.shape)}")
    return full, extents


@kernel("ShardedFilename", cheap=True)
def sharded_filename(ctx: KernelContext, basename: np.ndarray, shard: np.ndarray,
                     num_shards: np.ndarray):
    name = _scalar_str(basename, "basename")
    return np.array(f"{name}-{int(shard):05d}-of-{int(num_shards):05d}".encode(), dtype=object)


@kernel("ShardedFilespec", cheap=True)
def sharded_filespec(ctx: KernelContext, basename: np.ndarray, num_shards: np.ndarray):
    name = _scalar_str(basename, "basename")
    return np.array(f"{name}-?????-of-{int(num_shards):05d}".encode(), dtype=object)


def _strings(x: np.ndarray, what: str) -> list[str]:
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in x.reshape(-1)]


@kernel("SaveV2", files="write")
def save_v2(ctx: KernelContext, prefix: np.ndarray, tensor_names: np.ndarray,
            shape_and_slices: np.ndarray, *tensors: np.ndarray):
    from dfg.graphdef.bundle_writer import write_bundle

    path = _scalar_str(prefix, "prefix")
    names = _strings(tensor_names, "tensor_names")
    slices = _strings(shape_and_slices, "shape_and_slices")
    if len(names) != len(tensors):
        raise InvalidArgumentError(f"Got {len(names)} tensor names but {len(tensors)} tensors")
    if len(slices) != len(tensors):
        raise InvalidArgumentError(
            f"Expected {len(tensors)} elements in shapes_and_slices, but got {len(slices)}")
    items = []
    for name, spec, value in zip(names, slices, tensors):
        items.append((name, value, _parse_slice(spec, name, value) if spec.strip() else None))
    for suffix in (".index", ".data-00000-of-00001"):
        files.check(ctx, "write", path + suffix)
    write_bundle(path, items)
    with _READERS_LOCK:   # a cached reader of an overwritten bundle is stale
        for key in [k for k in _READERS if k[0] == path]:
            del _READERS[key]
    return ()


@kernel("MergeV2Checkpoints", files="read,write")
def merge_v2_checkpoints(ctx: KernelContext, checkpoint_prefixes: np.ndarray,
                         destination_prefix: np.ndarray):
    from dfg.graphdef.bundle_writer import merge_bundles

    if checkpoint_prefixes.ndim > 1:
        raise InvalidArgumentError(f"checkpoint_prefixes must be a vector, got shape "
                                   f"{list(checkpoint_prefixes.shape)}")
    dest = _scalar_str(destination_prefix, "destination_prefix")
    merge_bundles(_strings(checkpoint_prefixes, "checkpoint_prefixes"), dest,
                  bool(ctx.attrs.get("delete_old_dirs", True)),
                  bool(ctx.attrs.get("allow_missing_files", False)),
                  gate=lambda mode, p: files.check(ctx, mode, p))
    with _READERS_LOCK:
        for key in [k for k in _READERS if k[0] == dest]:
            del _READERS[key]
    return ()


@kernel("DisableCopyOnRead", cheap=True)
def disable_copy_on_read(ctx: KernelContext, resource):
    # TF 2.1x save functions run it on each variable before SaveV2 reads them: it turns off
    # TF's copy-on-read mode for sparse updates; dfg's variables hold immutable arrays, so
    # there is nothing to turn off.
    return ()
