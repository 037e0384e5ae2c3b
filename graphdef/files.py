"""The file gate, and bounded reading of the files a model is made of.

A graph is data from a stranger (design principle 19): an op that touches the file system
(``SaveV2`` with a prefix the graph chose, a table initialized from ``/etc/passwd``) may
only touch what the user granted. Every such kernel is declared in the kernel registry
(``@kernel("SaveV2", files="write")``) and asks :func:`check` before it opens a path; the
:class:`FilePolicy` it consults resolves symlinks and ``..`` (``os.path.realpath``) first,
so a link inside an allowed folder that points out of it is refused like the path it
points to. The policy lives on the Session (``Session(files=...)``, its ResourceManager's
``files``); a Python Session allows everything unless given one, the CLI's run-like
commands start closed (cli/options.py ``file_policy``).

Reading a model's own files (GraphDef, SavedModel, ``.meta``, checkpoint index and shards,
feed files) goes through :func:`read_file` / :func:`read_range`: a regular file only
(opened non-blocking, then fstat-ed, so a FIFO cannot hang the loader and a device is not
read forever), its size checked against what the caller expects before anything is
allocated, and every read held to the loading budget (:func:`read_limit`, the CLI's
``--max-memory``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .errors import GraphLoadError, PermissionDeniedError, ResourceExhaustedError

READ, WRITE, READ_WRITE = "read", "write", "read,write"
MODES = (READ, WRITE, READ_WRITE)


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def _within(real: str, root: str) -> bool:
    return real == root or real.startswith(root if root.endswith(os.sep) else root + os.sep)


class FilePolicy:
    """Which files ops may read and write. Immutable; every path is compared by its real
    path (symlinks and ``..`` resolved) when the policy is made and when it is asked.

    ``read`` / ``write``: files or folders (a folder grants everything under it); what may
    be written may also be read. ``read_prefixes``: checkpoint prefixes, granting the files
    named ``PREFIX.<anything>`` (``.index``, ``.data-00000-of-00001``). ``allow_all``:
    everything (the Python default, and the CLI's ``--allow-files``)."""

    __slots__ = ("allow_all", "read", "write", "read_prefixes")

    def __init__(self, read: Iterable[str | os.PathLike[str]] = (),
                 write: Iterable[str | os.PathLike[str]] = (), *,
                 read_prefixes: Iterable[str | os.PathLike[str]] = (),
                 allow_all: bool = False) -> None:
        self.allow_all = bool(allow_all)
        self.read = tuple(dict.fromkeys(_real(p) for p in read))
        self.write = tuple(dict.fromkeys(_real(p) for p in write))
        self.read_prefixes = tuple(dict.fromkeys(_real(p) for p in read_prefixes))

    @classmethod
    def permissive(cls) -> FilePolicy:
        """Everything allowed, as TensorFlow does (the Python API's default)."""
        return cls(allow_all=True)

    def allowing(self, read: Iterable[str | os.PathLike[str]] = (),
                 write: Iterable[str | os.PathLike[str]] = (),
                 read_prefixes: Iterable[str | os.PathLike[str]] = ()) -> FilePolicy:
        """This policy with more granted."""
        return FilePolicy((*self.read, *read), (*self.write, *write),
                          read_prefixes=(*self.read_prefixes, *read_prefixes),
                          allow_all=self.allow_all)

    def allows(self, mode: str, path: str | os.PathLike[str]) -> bool:
        if self.allow_all:
            return True
        if "\0" in os.fspath(path):
            return False
        real = _real(path)
        return self._allows_real(mode, real)

    def _allows_real(self, mode: str, real: str) -> bool:
        if self.allow_all:
            return True
        writable = any(_within(real, r) for r in self.write)
        if mode == READ:
            return writable or any(_within(real, r) for r in self.read) or any(
                real.startswith(p + ".") and os.sep not in real[len(p):]
                for p in self.read_prefixes)
        return writable

    def check(self, mode: str, path: str | os.PathLike[str], *, op: str | None = None,
              node: str | None = None) -> str:
        """The real path of ``path`` when ``mode`` ("read" or "write"; "read,write" asks
        both) is allowed there, else PermissionDeniedError naming the op, the node, the
        path and the flag that would allow it."""
        if "\0" in os.fspath(path):
            from .errors import InvalidArgumentError

            raise InvalidArgumentError(f"file path {os.fspath(path)!r} contains a NUL byte",
                                       node=node, op=op)
        real = _real(path)
        if self.allow_all:
            return real
        for m in (READ, WRITE) if mode == READ_WRITE else (mode,):
            if not self._allows_real(m, real):
                shown = os.fspath(path)
                via = f" (resolves to '{real}')" if os.path.abspath(shown) != real else ""
                if m == READ:
                    flag = f"--allow-read {real}"
                else:
                    flag = f"--allow-write {os.path.dirname(real) or real}"
                raise PermissionDeniedError(
                    f"may not {m} '{shown}'{via}: the file is outside what this run may "
                    f"{m}; allow it with {flag} (or --allow-files)", node=node, op=op)
        return real

    def as_dict(self) -> dict[str, Any]:
        return {"allow_all": self.allow_all, "read": list(self.read),
                "write": list(self.write), "read_prefixes": list(self.read_prefixes)}

    def __repr__(self) -> str:
        if self.allow_all:
            return "FilePolicy(allow_all=True)"
        return (f"FilePolicy(read={list(self.read)}, write={list(self.write)}, "
                f"read_prefixes={list(self.read_prefixes)})")


PERMISSIVE = FilePolicy.permissive()


def check(ctx: Any, mode: str, path: str | os.PathLike[str]) -> str:
    """The gate a file-touching kernel passes before it opens ``path``: its Session's
    policy (``ctx.resources.files``; none: everything allowed) decides; returns the real
    path to open. The kernel must be declared with ``files=`` covering ``mode`` in the
    kernel registry, so the list of gated ops is the registry's."""
    from dfg.executor.kernels.registry import lookup

    kd = lookup(ctx.op)
    declared = getattr(kd, "files", None) or ""
    if any(m not in declared.split(",") for m in mode.split(",")):
        from .errors import InternalError

        raise InternalError(f"kernel of {ctx.op} touches files ({mode}) but its registry "
                            f"entry declares files={declared or None}", node=ctx.node,
                            op=ctx.op)
    policy = getattr(ctx.resources, "files", None) or PERMISSIVE
    return policy.check(mode, path, op=ctx.op, node=ctx.node)


# --- bounded reading ------------------------------------------------------------------------

# the byte limit of one read in this thread/context (the CLI's --max-memory); None: none
# beyond the file's own size
_read_limit: ContextVar[int | None] = ContextVar("dfg_read_limit", default=None)


@contextmanager
def read_limit(max_bytes: int | None) -> Iterator[None]:
    """Hold every :func:`read_file` / :func:`read_range` in this context to ``max_bytes``
    (None or 0: no limit)."""
    token = _read_limit.set(max_bytes or None)
    try:
        yield
    finally:
        _read_limit.reset(token)


def current_read_limit() -> int | None:
    return _read_limit.get()


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], source: str | None = None) -> tuple[int, int]:
    """``(fd, size)`` of a regular file (symlinks followed). Opened non-blocking, so a FIFO
    returns at once and is refused after fstat; a device, socket or directory is refused
    too. GraphLoadError (exit 2) naming ``source`` (default: the path) otherwise."""
    src = source or os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_NOCTTY", 0)
    if "\0" in os.fspath(path):
        raise GraphLoadError("the path contains a NUL byte", source=repr(os.fspath(path)))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise GraphLoadError("no such file", source=src) from None
    except IsADirectoryError:
        raise GraphLoadError("is a directory, not a file", source=src) from None
    except OSError as e:
        raise GraphLoadError(f"cannot read: {e.strerror}", source=src) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GraphLoadError(f"not a regular file ({_kind(st.st_mode)}): refusing to read "
                                 "it", source=src)
        try:   # back to blocking reads: a regular file never blocks, and EAGAIN is noise
            os.set_blocking(fd, True)
        except OSError:
            pass
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _budget(n: int, src: str, what: str) -> None:
    limit = _read_limit.get()
    if limit is not None and n > limit:
        raise ResourceExhaustedError(
            f"{what} is {n:,} bytes, more than the memory budget of {limit:,} bytes "
            "(--max-memory)", source=src)


def _read_exact(fd: int, n: int, src: str) -> bytes:
    chunks, got = [], 0
    while got < n:
        try:
            b = os.read(fd, min(n - got, 1 << 24))
        except OSError as e:
            raise GraphLoadError(f"cannot read: {e.strerror}", source=src) from None
        if not b:
            break
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_file(path: str | os.PathLike[str], *, source: str | None = None,
              what: str = "the file", max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file, read in bounded memory: its size (from fstat) is
    checked against ``max_bytes`` and the context's :func:`read_limit` before anything is
    allocated."""
    src = source or os.fspath(path)
    fd, size = open_regular(path, src)
    try:
        if max_bytes is not None and size > max_bytes:
            raise GraphLoadError(f"{what} is {size:,} bytes, more than the {max_bytes:,} "
                                 "allowed", source=src)
        _budget(size, src, what)
        data = _read_exact(fd, size, src)
        if len(data) != size:
            raise GraphLoadError(f"the file changed while being read ({size:,} bytes "
                                 f"expected, {len(data):,} read)", source=src)
        return data
    finally:
        os.close(fd)


def read_range(path: str | os.PathLike[str], offset: int, size: int, *,
               source: str | None = None, what: str = "the data",
               reserve: Callable[[int], None] | None = None) -> bytes:
    """``size`` bytes at ``offset`` of a regular file, after checking that the file holds
    them (a claim of 100 GB in a 1 KB file is refused before allocating) and that they fit
    the context's :func:`read_limit`. ``reserve(size)``, called after those checks and
    before reading, may refuse too (a caller's running total)."""
    src = source or os.fspath(path)
    if offset < 0 or size < 0:
        raise GraphLoadError(f"{what}: negative offset {offset} or size {size}", source=src)
    fd, file_size = open_regular(path, src)
    try:
        if offset + size > file_size:
            raise GraphLoadError(f"{what}: {size:,} bytes expected at offset {offset:,}, the "
                                 f"file ends after {file_size:,}", source=src)
        _budget(size, src, what)
        if reserve is not None:
            reserve(size)
        try:
            os.lseek(fd, offset, os.SEEK_SET)
        except OSError as e:
            raise GraphLoadError(f"cannot read: {e.strerror}", source=src) from None
        data = _read_exact(fd, size, src)
        if len(data) != size:
            raise GraphLoadError(f"{what}: {size:,} bytes expected at offset {offset:,}, got "
                                 f"{len(data):,}", source=src)
        return data
    finally:
        os.close(fd)


def inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether ``path`` resolves (symlinks, ``..``) to ``folder`` or something under it."""
    return _within(_real(path), _real(folder))
