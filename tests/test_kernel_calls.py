"""Kernels that need another op's work share its implementation or go through the one kernel
call (``kernel_call.call_op``), never call its kernel function with a context of their own
(issue #28): a hand-made context skips what ``kernel_call.call`` does (error naming, output
checks, bfloat16 rounding) and silently drifts when KernelContext grows a field.

The check reads the kernel modules' source: a module must not construct a KernelContext,
nor name a kernel function registered by another module (a call of it, or passing it on).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np

from dfg.executor.kernels import registry
from dfg.executor.kernels.registry import invoke

KERNELS = Path(registry.__file__).resolve().parent


def _kernel_functions() -> dict[str, set[str]]:
    """Module name -> the names of the kernel functions it registers."""
    registry.load_all()
    out: dict[str, set[str]] = {}
    for device in ("CPU",):
        for spec in registry.specs(device).values():
            fn = inspect.unwrap(spec.fn)
            mod = getattr(fn, "__module__", "") or ""
            out.setdefault(mod.rsplit(".", 1)[-1], set()).add(fn.__name__)
    return out


def test_no_kernel_makes_a_context_or_calls_another_modules_kernel() -> None:
    owners = _kernel_functions()
    bad: list[str] = []
    for path in sorted(KERNELS.glob("*.py")):
        if path.stem in ("registry", "__init__"):
            continue
        tree = ast.parse(path.read_text())
        imported: dict[str, tuple[str, str]] = {}     # local name -> (module, name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                for a in node.names:
                    imported[a.asname or a.name] = (node.module, a.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "KernelContext":
                bad.append(f"{path.name}:{node.lineno} constructs a KernelContext")
            if isinstance(node, ast.Name) and node.id in imported:
                mod, name = imported[node.id]
                if name in owners.get(mod, ()):
                    bad.append(f"{path.name}:{node.lineno} uses {mod}.{name}, a kernel")
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id != path.stem and node.attr in owners.get(node.value.id, ()):
                bad.append(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}, a kernel")
    assert not bad, bad


def test_audio_summary_and_encode_wav_write_the_same_file() -> None:
    audio = np.float32([[0.0, 0.5], [-1.0, 0.25], [1.0, -0.5]])
    wav = invoke("EncodeWav", audio, np.int32(8000))
    from dfg.schemas import summary_pb2

    s = summary_pb2.Summary()
    s.ParseFromString(invoke("AudioSummaryV2", np.array(b"a", object), audio[None],
                             np.float32(8000)).item())
    assert s.value[0].audio.encoded_audio_string == wav.item()
    # RIFF header, 2 channels, 8000 Hz; samples rounded half away from zero, clamped
    assert wav.item()[:4] == b"RIFF" and int.from_bytes(wav.item()[24:28], "little") == 8000
    assert np.frombuffer(wav.item()[44:], "<i2").tolist() == [0, 16384, -32768, 8192, 32767,
                                                               -16384]
