"""Optimized graphs kept across Sessions, keyed by the graph's content and the signature.

Optimizing a signature (``passes.pipeline.optimize_for_signature``) costs tens of
milliseconds on a few hundred nodes, several times a CNN's warm step. A new Session of a
graph optimized before (a server that opens a Session per model load, a test suite, a
notebook re-run) takes the optimized graph from here instead, at its first step: what the
optimizer would return for the same bytes and the same signature under the same code is
the same graph (the pipeline is deterministic), so nothing is deferred.

The key: the SHA-256 of the Session's graph serialized deterministically (after lowering),
the fetches, feeds and targets in the order the Session passes them, the options that shape
the result (the compiled sweep's ops, the memory budget constants are folded under) and,
on disk, a fingerprint of dfg's own optimizer code. A graph mutated after its Session was
made is not seen (a Session never sees that anyway: its plans are built from its graph).

Each entry also keeps the executor plans built from it in this process (``Entry.plans``): a
new Session of the same bytes and signature runs the plan another Session built and warmed
(its kernels bound, constants decoded, weights packed, programs compiled), so its first step
costs about its warm step plus the graph's digest. Plans are not written to disk.

In memory: at most :data:`MAX_ENTRIES` graphs and :data:`MAX_BYTES` of them (least recently
used dropped first; a result larger than the whole budget is not kept). On disk, opt in:
``DFG_PLAN_CACHE=/some/dir`` (or ``Session(plan_cache_dir=dir)``): one file per key, written
atomically, read back only when its checksum matches and it parses within the loader's
bounds; anything else is a miss (and is overwritten). The directory is the user's grant:
dfg writes nothing else and reads nothing outside it. Nothing on disk is ever evicted (a
file per graph and signature: delete the directory to start over).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_ENTRIES = 32
MAX_BYTES = 256 << 20
_MAGIC = b"dfg-plan-cache 1\n"
UNCHANGED = "unchanged"    # load's answer for a file saying the optimizer changed nothing


@dataclass
class Entry:
    """One signature's optimization: ``graph`` None means the optimizer left the graph as
    the Session had it; ``report`` the pipeline's report; ``nbytes`` what it holds.
    ``plans``: the executor plans built from it, by :func:`plan_slot` (a Plan is immutable
    per-graph state, and what steps learn lives in its PlanStats, made for concurrent runs:
    Sessions of equal graphs share a plan as one Session's threads do). Written under the
    cache's lock (:meth:`PlanCache.add_plan`)."""
    graph: Any
    report: Any
    nbytes: int
    plans: dict = field(default_factory=dict)

    @classmethod
    def of(cls, graph: Any, report: Any) -> Entry:
        return cls(graph, report, 0 if graph is None else graph.graph_def.ByteSize())


class PlanCache:
    """An LRU map key -> :class:`Entry`, bounded by entries and bytes. Thread-safe: ``_lock``
    guards ``_entries``, ``_bytes`` and ``_outlines`` (``may_hold`` only reads one key)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple, Entry] = OrderedDict()
        self._bytes = 0
        # how many entries have each key's first element (a graph's outline, cheap_key):
        # a Session whose outline no entry has misses without hashing its graph
        self._outlines: dict[Any, int] = {}
        self.hits = self.misses = 0

    def get(self, key: tuple) -> Entry | None:
        with self._lock:
            e = self._entries.get(key)
            if e is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return e

    def plan(self, key: tuple, slot: tuple) -> Any:
        """The plan kept for ``key`` and ``slot``, or None."""
        with self._lock:
            e = self._entries.get(key)
            return None if e is None else e.plans.get(slot)

    def add_plan(self, key: tuple, slot: tuple, plan: Any, nbytes: int) -> None:
        """Keep ``plan`` (about ``nbytes`` of its own: its constants and packed weights) with
        ``key``'s entry; nothing when the entry has gone (or would not fit)."""
        with self._lock:
            e = self._entries.get(key)
            if e is None or slot in e.plans or e.nbytes + nbytes > self.max_bytes:
                return
            e.plans[slot] = plan
            e.nbytes += nbytes
            self._bytes += nbytes
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                self._forget(*self._entries.popitem(last=False))

    def may_hold(self, outline: Any) -> bool:
        """Whether an entry's key starts with ``outline`` (a graph's :func:`cheap_key`)."""
        return outline in self._outlines

    def put(self, key: tuple, entry: Entry) -> None:
        if entry.nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._forget(key, old)
            self._entries[key] = entry
            self._bytes += entry.nbytes
            self._outlines[key[0]] = self._outlines.get(key[0], 0) + 1
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                self._forget(*self._entries.popitem(last=False))

    def _forget(self, key: tuple, entry: Entry) -> None:
        """Account for an entry taken out of ``_entries`` (the caller holds ``_lock``)."""
        self._bytes -= entry.nbytes
        n = self._outlines[key[0]] - 1
        if n:
            self._outlines[key[0]] = n
        else:
            del self._outlines[key[0]]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._outlines.clear()
            self._bytes = 0
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


CACHE = PlanCache()


def clear() -> None:
    """Forget every optimized graph kept in memory (benchmarks measuring a cold first step
    call it; the disk cache, if any, is the user's directory and is left alone)."""
    CACHE.clear()


def graph_digest(graph_def: Any) -> str:
    """SHA-256 of a GraphDef's deterministic serialization (equal graphs, equal digests)."""
    return hashlib.sha256(graph_def.SerializeToString(deterministic=True)).hexdigest()


def cheap_key(graph_def: Any) -> tuple:
    """A graph's outline, free to compute: node count, first and last names, library size.
    Equal graphs have equal outlines, so a miss on the outline needs no digest (hashing a
    graph costs a serialization: 1-2 ms for a 300-node CNN, on a first step of 10-30)."""
    nodes = graph_def.node
    return (len(nodes), nodes[0].name if nodes else "", nodes[-1].name if nodes else "",
            len(graph_def.library.function))


def plan_slot(device: str, threads: int, programs: str) -> tuple:
    """Which of an entry's plans a Session may take: the device it was built for, and what
    its measured costs and program decisions were learned under."""
    return (device, threads, programs)


def signature_key(outline: tuple, digest: str, fetches: list[str], feeds: list[str],
                  targets: list[str], options: tuple) -> tuple:
    return (outline, digest, tuple(fetches), tuple(feeds), tuple(targets), options)


# --- on disk -------------------------------------------------------------------------------

_code_fp: str | None = None


def code_fingerprint() -> str:
    """A digest of the code an optimized graph depends on (the graph model, the passes, the
    OpDefs): a cached file from other code is never used."""
    global _code_fp
    if _code_fp is None:
        import dfg.graphdef as gd

        root = Path(gd.__file__).resolve().parent
        h = hashlib.sha256()
        for p in sorted([*root.glob("*.py"), *root.glob("passes/*.py"),
                         *root.glob("opdefs/*")]):
            if p.is_file():
                h.update(p.name.encode() + b"\0" + p.read_bytes())
        _code_fp = h.hexdigest()
    return _code_fp


def disk_dir(arg: str | os.PathLike[str] | None) -> Path | None:
    """The disk cache's directory: ``arg``, else ``DFG_PLAN_CACHE``, else none."""
    value = arg if arg is not None else os.environ.get("DFG_PLAN_CACHE") or None
    return Path(value) if value else None


def _file(directory: Path, key: tuple) -> Path:
    name = hashlib.sha256(repr((code_fingerprint(), key)).encode()).hexdigest()
    return directory / f"{name}.pb"


def load(directory: Path, key: tuple) -> Any | None:
    """The GraphDef stored for ``key``, :data:`UNCHANGED` when the optimizer left the Session's
    graph as it was (an empty payload), or None on a miss, a bad checksum or a file that
    does not parse within the loader's bounds."""
    from dfg.graphdef.errors import DfgError
    from dfg.graphdef.io import parse_graphdef

    path = _file(directory, key)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 32
    if not data.startswith(_MAGIC) or len(data) < head \
            or hashlib.sha256(data[head:]).digest() != data[len(_MAGIC):head]:
        return None
    payload = data[head:]
    if not payload:
        return UNCHANGED
    try:
        return parse_graphdef(payload, "pb", source=str(path))
    except (DfgError, ValueError):
        return None


def store(directory: Path, key: tuple, graph_def: Any | None) -> None:
    """Write ``graph_def`` (None: unchanged) for ``key`` atomically; a directory that cannot
    be written is left alone (a cache must never fail a run)."""
    from dfg.graphdef.io import write_bytes_atomic

    payload = b"" if graph_def is None else graph_def.SerializeToString(deterministic=True)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(_file(directory, key),
                           _MAGIC + hashlib.sha256(payload).digest() + payload)
    except OSError:
        pass
