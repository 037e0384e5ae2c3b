"""The malformed-model corpus (tests/data/malformed, written by its generate.py from the good
models in tests/data): every case, run through the real ``dfg`` in a subprocess capped at
2 GB of address space, ends with exit 2 and one line naming the file and the broken field,
no traceback, no "internal error". FIFOs, devices and symlinks cannot be committed: the
cases below make them in a temporary copy. A wall-clock guard only stops a hang (it fails
the test); what is asserted is the outcome."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from dfg.cli.main import cli

DATA = Path(__file__).resolve().parent / "data"
MALFORMED = DATA / "malformed"
LIMIT_AS = 2 << 30
HANG_GUARD_S = 120

def _load_generator():
    """tests/data/malformed/generate.py under a name of its own (tests/data/hostile has a
    generate.py too, imported as ``generate``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("malformed_generate",
                                                  MALFORMED / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


generate = _load_generator()


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def dfg(*args: str) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``dfg ARGS`` under the 2 GB address-space cap."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NO_COLOR="1")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([sys.executable, "-m", "dfg.cli", *args], env=env,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             preexec_fn=_cap)
        guard = threading.Timer(HANG_GUARD_S, p.kill)
        guard.start()
        try:
            rc = p.wait()
        finally:
            guard.cancel()
        out.seek(0)
        err.seek(0)
        return rc, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err[:3000]
    assert "Traceback" not in err and "internal error" not in err, err[:3000]
    assert lines[0].startswith("dfg: error: "), lines[0]
    return lines[0]


def _args(cmd: tuple[str, ...], case: Path, tmp: Path) -> list[str]:
    return [a.replace("{case}", str(case)).replace("{tmp}", str(tmp)) for a in cmd]


def test_committed_corpus_is_what_the_generator_writes(tmp_path: Path) -> None:
    old = generate.HERE
    generate.HERE = tmp_path
    try:
        generate.main()
    finally:
        generate.HERE = old
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(MALFORMED) for p in MALFORMED.rglob("*")
                       if p.is_file() and p.parent != MALFORMED)
    assert made == committed
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (MALFORMED / rel).read_bytes(), rel


def test_the_base_models_are_good(tmp_path: Path) -> None:
    """The corpus breaks good models: unbroken, the same commands succeed."""
    sm = tmp_path / "sm"
    generate._copy_saved_model(sm)
    ck = tmp_path / "ck"
    generate._copy_checkpoint(ck)
    vocab = tmp_path / "vocab"
    generate._copy_vocab_model(vocab)
    for cmd, case in ((generate.RUN_SM, sm), (generate.FREEZE_CKPT, ck),
                      (generate.RUN_CKPT, ck), (generate.FREEZE_VOCAB, vocab),
                      (generate.RUN_VOCAB, vocab)):
        r = CliRunner().invoke(cli, _args(cmd, case, tmp_path))
        assert r.exit_code == 0, (cmd, r.output)


@pytest.mark.parametrize("name", sorted(generate.CASES))
def test_malformed_model_is_exit_2_and_one_line(name: str, tmp_path: Path) -> None:
    _base, _breaks, commands = generate.CASES[name]
    case = MALFORMED / name
    rc, out, err = dfg(*_args(commands[0], case, tmp_path))
    line = one_line(err)
    assert rc == 2, line
    assert str(case) in line, line                 # names the file
    assert list(tmp_path.iterdir()) == []          # nothing written
    for cmd in commands[1:]:                       # the other commands, in-process
        r = CliRunner().invoke(cli, _args(cmd, case, tmp_path))
        assert r.exit_code == 2, r.output
        assert str(case) in one_line(r.stderr)


# --- cases made at test time: FIFOs, devices, symlinks ---------------------------------------

def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _symlink(path: Path, target: str | Path) -> None:
    path.unlink()
    path.symlink_to(target)


def _dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


SM_DATA = "variables/variables.data-00000-of-00001"
# name -> (base, file to replace, how, command, words the line must hold)
LIVE = {
    "sm_pb_fifo": ("sm", "saved_model.pb", _fifo, generate.RUN_SM, "a FIFO"),
    "sm_index_fifo": ("sm", "variables/variables.index", _fifo, generate.RUN_SM, "a FIFO"),
    "sm_data_fifo": ("sm", SM_DATA, _fifo, generate.RUN_SM, "a FIFO"),
    # out of the model's folder the gate refuses it first (exit 1); allowed, the read does
    "sm_data_dev_zero": ("sm", SM_DATA, lambda p: _symlink(p, "/dev/zero"),
                         (*generate.RUN_SM, "--allow-files"), "a character device"),
    "sm_index_is_a_folder": ("sm", "variables/variables.data-00000-of-00001", _dir,
                             generate.RUN_SM, "a directory"),
    "sm_asset_fifo": ("sm", "assets/colors.txt", _fifo, generate.RUN_SM, "a FIFO"),
    "sm_asset_symlink_out": ("sm", "assets/colors.txt",
                             lambda p: _symlink(p, "/etc/hostname"), generate.RUN_SM,
                             "not a file inside its assets/ folder"),
    "vocab_asset_symlink_out": ("vocab", "assets/words.txt",
                                lambda p: _symlink(p, p.parents[2] / "outside.txt"),
                                generate.FREEZE_VOCAB, "not a file inside its assets/ folder"),
    "ckpt_meta_fifo": ("ckpt", "mlp.ckpt.meta", _fifo, generate.RUN_CKPT, "a FIFO"),
    "ckpt_meta_dev_urandom": ("ckpt", "mlp.ckpt.meta", lambda p: _symlink(p, "/dev/urandom"),
                              generate.RUN_CKPT, "a character device"),
    "ckpt_index_fifo": ("ckpt", "mlp.ckpt.index", _fifo, generate.FREEZE_CKPT, "a FIFO"),
    "ckpt_data_fifo": ("ckpt", "mlp.ckpt.data-00000-of-00001", _fifo, generate.RUN_CKPT,
                       "a FIFO"),
}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("name", sorted(LIVE))
def test_fifos_devices_and_symlinks_are_refused_not_read(name: str, tmp_path: Path) -> None:
    base, rel, breaks, cmd, words = LIVE[name]
    case = tmp_path / "model"
    {"sm": generate._copy_saved_model, "vocab": generate._copy_vocab_model,
     "ckpt": generate._copy_checkpoint}[base](case)
    (tmp_path / "outside.txt").write_bytes(b"secret\n")
    breaks(case / rel)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    rc, out, err = dfg(*_args(cmd, case, out_dir))
    line = one_line(err)
    assert rc == 2, line
    assert words in line, line
    assert "secret" not in out
    assert list(out_dir.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_feed_file_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    ck = tmp_path / "ck"
    generate._copy_checkpoint(ck)
    rc, _out, err = dfg("run", str(ck / "mlp.ckpt.meta"), "--fetch", "y", "--feed",
                        f"x=@{fifo}")
    line = one_line(err)
    assert rc == 2 and "a FIFO" in line, line


def test_feed_file_claiming_a_huge_array_is_refused_before_allocating(tmp_path: Path) -> None:
    import numpy as np

    f = tmp_path / "x.npy"
    np.save(f, np.zeros((1, 3), np.float32))
    data = f.read_bytes()
    # version 1.0: magic, version, uint16 header length, then the header (a dict literal
    # padded with spaces); claim 10**12 rows, keeping the header's length
    n = int.from_bytes(data[8:10], "little")
    header = data[10:10 + n]
    new = header.replace(b"(1, 3)", b"(999999999999, 3)")
    new = new.replace(b" " * (len(new) - len(header)) + b"\n", b"\n")
    assert len(new) == len(header)
    f.write_bytes(data[:10] + new + data[10 + n:])
    ck = tmp_path / "ck"
    generate._copy_checkpoint(ck)
    rc, _out, err = dfg("run", str(ck / "mlp.ckpt.meta"), "--fetch", "y", "--feed",
                        f"x=@{f}")
    line = one_line(err)
    assert rc == 2, line


def test_max_memory_bounds_reading_a_table_file(tmp_path: Path) -> None:
    """A vocabulary file bigger than --max-memory is refused before it is read."""
    vocab = tmp_path / "vocab"
    generate._copy_vocab_model(vocab)
    words = vocab / "assets" / "words.txt"
    words.write_bytes(b"w\n" * (4 << 20))        # 8 MB
    r = CliRunner().invoke(cli, ["run", str(vocab), "--feed", 'words=["a"]',
                                 "--max-memory", "1M"])
    assert r.exit_code == 1, r.output
    assert "--max-memory" in r.stderr and "words.txt" in r.stderr


# --- depth is data: no RecursionError --------------------------------------------------------

def _call_chain(n: int):
    """f0 calls f1 ... calls f(n-1), which is the identity; the graph calls f0 on x."""
    from dfg.schemas import graph_pb2, types_pb2

    f32 = types_pb2.DT_FLOAT
    g = graph_pb2.GraphDef()
    g.node.add(name="x", op="Placeholder").attr["dtype"].type = f32
    call = g.node.add(name="call", op="PartitionedCall", input=["x"])
    for i in range(n + 1):
        if i:
            f = g.library.function.add()
            f.signature.name = f"f{i - 1}"
            f.signature.input_arg.add(name="x", type=f32)
            f.signature.output_arg.add(name="y", type=f32)
            f.ret["y"] = "c:output:0"
            if i == n:
                f.node_def.add(name="c", op="Identity", input=["x"]).attr["T"].type = f32
                break
            call = f.node_def.add(name="c", op="PartitionedCall", input=["x"])
        call.attr["f"].func.name = f"f{i}"
        call.attr["Tin"].list.type.append(f32)
        call.attr["Tout"].list.type.append(f32)
    return g


def test_a_chain_of_a_thousand_nested_calls_validates_and_runs(tmp_path: Path) -> None:
    from dfg.graphdef.functions import find_recursion

    g = _call_chain(1000)
    assert find_recursion(g) == []
    # a cycle at the end of the chain is still found
    g.library.function[-1].node_def[0].op = "PartitionedCall"
    nd = g.library.function[-1].node_def[0]
    nd.attr["f"].func.name = "f500"
    assert find_recursion(g) == [[f"f{i}" for i in range(500, 1000)] + ["f500"]]
    f = tmp_path / "chain.pb"
    f.write_bytes(_call_chain(1000).SerializeToString())
    r = CliRunner().invoke(cli, ["validate", str(f)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["run", str(f), "--fetch", "call", "--feed", "x=2.5",
                                 "--json"])
    assert r.exit_code == 0, r.output
    assert '"value": 2.5' in r.stdout


def test_a_case_of_a_thousand_branches_lowers_without_recursion() -> None:
    """Case lowers to a chain of conditionals, one level per branch: built level by level,
    not by recursion (1,000 branches was 'internal error: RecursionError')."""
    import numpy as np

    from dfg.executor import Session
    from dfg.schemas import graph_pb2, types_pb2

    f32, i32 = types_pb2.DT_FLOAT, types_pb2.DT_INT32
    g = graph_pb2.GraphDef()
    g.node.add(name="x", op="Placeholder").attr["dtype"].type = f32
    g.node.add(name="i", op="Placeholder").attr["dtype"].type = i32
    case = g.node.add(name="case", op="Case", input=["i", "x"])
    case.attr["Tin"].list.type.append(f32)
    case.attr["Tout"].list.type.append(f32)
    for name, op, out in (("ident", "Identity", "output"), ("neg", "Neg", "y")):
        f = g.library.function.add()
        f.signature.name = name
        f.signature.input_arg.add(name="x", type=f32)
        f.signature.output_arg.add(name="y", type=f32)
        f.node_def.add(name="c", op=op, input=["x"]).attr["T"].type = f32
        f.ret["y"] = f"c:{out}:0"
    for k in range(1000):   # three Python frames per level once: far past the limit
        case.attr["branches"].list.func.add(name="neg" if k == 500 else "ident")
    with Session(g) as s:
        for i, want in ((500, -2.5), (0, 2.5), (999, 2.5), (-7, 2.5), (4000, 2.5)):
            got = s.run("case", {"x": np.float32(2.5), "i": np.int32(i)})
            assert float(got) == want, i
