"""Atomic file writes that leave nothing behind: a temp file beside the target, then a rename.

The temp file is named ``.<name>.dfg-tmp-<pid>`` in the target's folder, so anyone looking at
the folder can tell whose it is and which process made it. While a write is under way,
SIGTERM, SIGINT and SIGHUP remove the temp file before the process ends the way the signal
asks (the previous handler runs, or the signal is re-raised with its default action, so the
exit status still says "killed by SIGTERM"). SIGKILL cannot be caught: the next write to the
same path removes temp files whose process is gone. The data is fsync'ed before the rename and
the folder after it (where the platform allows), so a crash never leaves a truncated target.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import UsageError

TMP_MARK = ".dfg-tmp-"
_SIGNALS = tuple(getattr(signal, s) for s in ("SIGTERM", "SIGINT", "SIGHUP")
                 if hasattr(signal, s))


def temp_name(path: Path, pid: int | None = None, serial: int = 0) -> Path:
    """Where a write to ``path`` by process ``pid`` keeps its data until the rename."""
    pid = os.getpid() if pid is None else pid
    return path.with_name(f".{path.name}{TMP_MARK}{pid}" + (f"-{serial}" if serial else ""))


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    except OSError:
        return True  # cannot tell: keep its file
    return True


def remove_stale(path: Path) -> list[Path]:
    """Remove temp files of earlier writes to ``path`` whose process no longer runs."""
    pattern = re.compile(re.escape(f".{path.name}{TMP_MARK}") + r"(\d+)(?:-\d+)?")
    folder = path.parent
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


class _Interrupted(BaseException):
    """Raised by our signal handler inside a write, so that its cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _cleanup_on_signals() -> Iterator[None]:
    """Turn SIGTERM/SIGINT/SIGHUP into an exception for the duration (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum: int, frame: object) -> None:
        raise _Interrupted(signum)

    for s in _SIGNALS:
        try:
            previous[s] = signal.signal(s, handler)
        except (OSError, ValueError):
            pass
    try:
        yield
    except _Interrupted as e:
        for s, h in previous.items():
            signal.signal(s, h)
        previous = {}
        _deliver(e.signum, signal.getsignal(e.signum))
        raise SystemExit(128 + e.signum) from None
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _deliver(signum: int, handler: object) -> None:
    """Act on a signal caught during a write as the handler before ours would have."""
    if callable(handler):
        handler(signum, None)  # e.g. Python's SIGINT handler raises KeyboardInterrupt
    elif handler == signal.SIG_DFL:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signum)  # default action: the process dies of this signal
    # SIG_IGN: the caller meant to ignore it; we still stop the write (SystemExit below)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # e.g. Windows cannot open a directory: the rename is all we can do
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _hold_signals() -> object:
    """Block SIGTERM/SIGINT/SIGHUP (main thread, where our handlers run); the old mask, or
    None where signals cannot be blocked."""
    if threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)


def _release_signals(held: object) -> None:
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _open_temp(path: Path, dest: object) -> tuple[int, Path]:
    """Create the temp file for a write to ``path``: (its descriptor, its name)."""
    for serial in range(100):
        tmp = temp_name(path, serial=serial)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), tmp
        except FileExistsError:
            continue  # another write of ours to the same path (a thread)
        except OSError as e:
            raise UsageError(f"cannot write: {e.strerror}", source=str(dest)) from None
    raise UsageError("cannot write: too many temporary files", source=str(dest))


def write_atomic(dest: str | os.PathLike[str], data: bytes | Iterable[bytes]) -> None:
    """Write ``data`` (bytes, or chunks of bytes) to ``dest`` atomically; ``-`` is stdout.

    Either the old file (or none) or the complete new one exists at every moment.
    """
    chunks = [data] if isinstance(data, (bytes, bytearray, memoryview)) else data
    if str(dest) == "-":
        out = sys.stdout.buffer
        for c in chunks:
            out.write(c)
        out.flush()
        return
    path = Path(dest)
    if not str(path.parent):
        path = Path(".") / path
    remove_stale(path)
    with _cleanup_on_signals():
        # Signals are held off from before the temp file exists until the code that removes
        # it on the way out knows its name: one landing in between would leave it behind.
        held = _hold_signals()
        tmp: Path | None = None
        f = None
        try:
            fd, tmp = _open_temp(path, dest)
            f = os.fdopen(fd, "wb")
            _release_signals(held)   # a signal that came meanwhile is handled here
            held = None
            with f:
                for c in chunks:
                    f.write(c)
                f.flush()
                os.fsync(f.fileno())
            try:
                mode = path.stat().st_mode & 0o777
            except OSError:
                mode = 0o666 & ~_umask()
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException as e:
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            if held is not None:
                _release_signals(held)   # may raise for a pending signal: cleanup is done
            if isinstance(e, OSError) and not isinstance(e, _Interrupted):
                raise UsageError(f"cannot write: {e.strerror or e}", source=str(dest)) from None
            raise
        _fsync_dir(path.parent)
