"""The file gate (graphdef/files.py): every kernel that touches the file system is declared
in the kernel registry (``files=``), asks the Session's FilePolicy before it opens a path,
and is refused outside what was granted; the list of gated ops comes from the registry,
and a kernel that touches files without being declared fails the source scan below."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from google.protobuf import text_format

from dfg.cli.main import cli
from dfg.executor import Session
from dfg.executor.kernels import registry
from dfg.graphdef.bundle import read_bundle
from dfg.graphdef.bundle_writer import write_bundle
from dfg.graphdef.errors import PermissionDeniedError
from dfg.graphdef.files import FilePolicy
from dfg.schemas import graph_pb2

ROOT = Path(__file__).resolve().parents[1]


def _graph(text: str) -> graph_pb2.GraphDef:
    return text_format.Parse(text, graph_pb2.GraphDef())


def _str_placeholder(name: str, shape: str = "") -> str:
    return (f'node {{ name: "{name}" op: "Placeholder" attr {{ key: "dtype" value {{ type: '
            f'DT_STRING }} }} attr {{ key: "shape" value {{ shape {{ {shape} }} }} }} }}\n')


def _const_strings(name: str, values: list[str]) -> str:
    vals = " ".join(f'string_val: "{v}"' for v in values)
    return (f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_STRING '
            f'}} }} attr {{ key: "value" value {{ tensor {{ dtype: DT_STRING tensor_shape {{ '
            f'dim {{ size: {len(values)} }} }} {vals} }} }} }} }}\n')


SAVE = _graph(_str_placeholder("prefix") + _const_strings("names", ["w"])
              + _const_strings("slices", [""]) + '''
node { name: "w" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }
  float_val: 1.5 float_val: -2 } } } }
node { name: "save" op: "SaveV2" input: "prefix" input: "names" input: "slices" input: "w"
  attr { key: "dtypes" value { list { type: DT_FLOAT } } } }
''')

RESTORE = _graph(_str_placeholder("prefix") + _const_strings("names", ["w"])
                 + _const_strings("slices", [""]) + '''
node { name: "restore" op: "RestoreV2" input: "prefix" input: "names" input: "slices"
  attr { key: "dtypes" value { list { type: DT_FLOAT } } } }
''')

MERGE = _graph(_str_placeholder("sources", "dim { size: 2 }") + _str_placeholder("dest") + '''
node { name: "merge" op: "MergeV2Checkpoints" input: "sources" input: "dest" }
''')

TABLE_V2 = _graph(_str_placeholder("filename") + '''
node { name: "table" op: "HashTableV2" attr { key: "key_dtype" value { type: DT_STRING } }
  attr { key: "value_dtype" value { type: DT_INT64 } } }
node { name: "init" op: "InitializeTableFromTextFileV2" input: "table" input: "filename"
  attr { key: "key_index" value { i: -2 } } attr { key: "value_index" value { i: -1 } } }
node { name: "size" op: "LookupTableSizeV2" input: "table" input: "^init" }
''')

TABLE_V1 = _graph(_str_placeholder("filename") + '''
node { name: "table" op: "HashTable" attr { key: "key_dtype" value { type: DT_STRING } }
  attr { key: "value_dtype" value { type: DT_INT64 } } }
node { name: "init" op: "InitializeTableFromTextFile" input: "table" input: "filename"
  attr { key: "key_index" value { i: -2 } } attr { key: "value_index" value { i: -1 } } }
node { name: "size" op: "LookupTableSize" input: "table" input: "^init" }
''')


def _s(path: Path) -> np.ndarray:
    return np.array(str(path).encode(), dtype=object)


# One recipe per gated op: (make the files it needs under tmp, the run, the grant that
# allows it, the check that it did its work). The set of recipes must be the registry's
# list of gated ops: a new file-touching kernel needs one here.
def _save(tmp: Path):
    prefix = tmp / "out" / "ckpt"

    def run(files):
        with Session(SAVE, files=files) as s:
            s.run([], {"prefix": _s(prefix)}, targets=["save"])

    def done():
        np.testing.assert_array_equal(read_bundle(prefix)["w"], np.float32([1.5, -2]))

    return run, FilePolicy(write=[tmp / "out"]), done, prefix


def _restore(tmp: Path):
    prefix = tmp / "ckpt" / "model"
    write_bundle(prefix, {"w": np.float32([3, 4])})
    got = []

    def run(files):
        with Session(RESTORE, files=files) as s:
            got.append(s.run("restore", {"prefix": _s(prefix)}))

    def done():
        np.testing.assert_array_equal(got[-1], np.float32([3, 4]))

    return run, FilePolicy(read=[tmp / "ckpt"]), done, prefix


def _merge(tmp: Path):
    a, b, dest = tmp / "a" / "part", tmp / "b" / "part", tmp / "out" / "merged"
    write_bundle(a, {"x": np.int32([1])})
    write_bundle(b, {"y": np.int32([2, 3])})

    def run(files):
        with Session(MERGE, files=files) as s:
            s.run([], {"sources": np.array([str(a).encode(), str(b).encode()], dtype=object),
                       "dest": _s(dest)}, targets=["merge"])

    def done():
        got = read_bundle(dest)
        assert got["x"].tolist() == [1] and got["y"].tolist() == [2, 3]

    return run, FilePolicy(write=[tmp / "a", tmp / "b", tmp / "out"]), done, a


def _table(graph):
    def recipe(tmp: Path):
        vocab = tmp / "vocab.txt"
        vocab.write_bytes(b"a\nb\nc\n")
        got = []

        def run(files):
            with Session(graph, files=files) as s:
                got.append(int(s.run("size", {"filename": _s(vocab)})))

        def done():
            assert got[-1] == 3

        return run, FilePolicy(read=[vocab]), done, vocab

    return recipe


RECIPES = {"SaveV2": _save, "RestoreV2": _restore, "MergeV2Checkpoints": _merge,
           "InitializeTableFromTextFileV2": _table(TABLE_V2),
           "InitializeTableFromTextFile": _table(TABLE_V1)}


def test_the_gated_ops_are_the_registrys_and_each_has_a_recipe():
    ops = registry.file_ops()
    assert set(ops) == set(RECIPES)
    assert ops["SaveV2"] == "write" and ops["RestoreV2"] == "read"
    assert ops["MergeV2Checkpoints"] == "read,write"


def test_gated_ops_are_never_folded_by_the_optimizer():
    from dfg.graphdef.passes.common import is_stateful

    for op in registry.file_ops():
        assert is_stateful(op), op


@pytest.mark.parametrize("op", sorted(RECIPES))
def test_every_gated_op_is_refused_without_permission_and_works_with_it(op, tmp_path):
    run, grant, done, shown = RECIPES[op](tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(PermissionDeniedError) as e:
        run(FilePolicy())              # closed: nothing granted
    msg = str(e.value)
    assert f"({op})" in msg and "node '" in msg, msg
    assert str(tmp_path) in msg and ("--allow-read" in msg or "--allow-write" in msg), msg
    assert "--allow-files" in msg and "\n" not in msg
    # refused before anything was touched
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    run(grant)
    done()


@pytest.mark.parametrize("op", sorted(RECIPES))
def test_the_python_default_allows_everything(op, tmp_path):
    run, _grant, done, _ = RECIPES[op](tmp_path)
    run(None)
    done()


def test_read_grant_does_not_allow_writing(tmp_path):
    run, _grant, _done, _ = _save(tmp_path)
    with pytest.raises(PermissionDeniedError, match="may not write"):
        run(FilePolicy(read=[tmp_path]))


def test_symlink_out_of_an_allowed_folder_is_refused(tmp_path):
    allowed, secret = tmp_path / "allowed", tmp_path / "secret"
    allowed.mkdir()
    secret.mkdir()
    (secret / "passwd").write_bytes(b"root\nuser\n")
    (allowed / "vocab.txt").symlink_to(secret / "passwd")
    with Session(TABLE_V2, files=FilePolicy(read=[allowed])) as s:
        with pytest.raises(PermissionDeniedError) as e:
            s.run("size", {"filename": _s(allowed / "vocab.txt")})
    assert f"resolves to '{secret / 'passwd'}'" in str(e.value)
    # a symlinked folder whose target is inside is fine: what counts is the real path
    (allowed / "inner").mkdir()
    (allowed / "inner" / "v.txt").write_bytes(b"x\n")
    (tmp_path / "link").symlink_to(allowed / "inner")
    with Session(TABLE_V2, files=FilePolicy(read=[allowed])) as s:
        assert int(s.run("size", {"filename": _s(tmp_path / "link" / "v.txt")})) == 1


def test_dotdot_out_of_an_allowed_folder_is_refused(tmp_path):
    (tmp_path / "allowed").mkdir()
    (tmp_path / "other.txt").write_bytes(b"a\n")
    with Session(TABLE_V2, files=FilePolicy(read=[tmp_path / "allowed"])) as s:
        with pytest.raises(PermissionDeniedError):
            s.run("size", {"filename": _s(tmp_path / "allowed" / ".." / "other.txt")})
    # a sibling whose name starts like the allowed folder is not inside it
    (tmp_path / "allowed2").mkdir()
    (tmp_path / "allowed2" / "v.txt").write_bytes(b"a\n")
    with Session(TABLE_V2, files=FilePolicy(read=[tmp_path / "allowed"])) as s:
        with pytest.raises(PermissionDeniedError):
            s.run("size", {"filename": _s(tmp_path / "allowed2" / "v.txt")})


def test_checkpoint_prefix_grant_covers_its_files_only(tmp_path):
    prefix = tmp_path / "model.ckpt"
    write_bundle(prefix, {"w": np.float32([3, 4])})
    (tmp_path / "other.txt").write_bytes(b"a\n")
    pol = FilePolicy(read_prefixes=[prefix])
    assert pol.allows("read", str(prefix) + ".index")
    assert pol.allows("read", str(prefix) + ".data-00000-of-00001")
    assert not pol.allows("read", tmp_path / "other.txt")
    assert not pol.allows("write", str(prefix) + ".index")


# --- the CLI: closed by default --------------------------------------------------------------

def _write_graph(tmp: Path, gd) -> Path:
    p = tmp / "g.pbtxt"
    p.write_text(text_format.MessageToString(gd))
    return p


def test_cli_run_refuses_a_graph_that_writes_and_allow_write_permits_it(tmp_path):
    g = _write_graph(tmp_path, SAVE)
    out = tmp_path / "elsewhere" / "evil"
    args = ["run", str(g), "--target", "save", "--feed", f"prefix={out}", "--fetch", "w"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1, r.output
    line = r.stderr.strip()
    assert "\n" not in line and "SaveV2" in line and "'save'" in line
    assert f"--allow-write {tmp_path / 'elsewhere'}" in line
    assert not (tmp_path / "elsewhere").exists()
    r = CliRunner().invoke(cli, [*args, "--allow-write", str(tmp_path / "elsewhere")])
    assert r.exit_code == 0, r.output
    assert read_bundle(out)["w"].tolist() == [1.5, -2]


def test_cli_run_reads_a_table_file_only_when_allowed(tmp_path):
    g = _write_graph(tmp_path, TABLE_V2)
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"s3cr3t:x:0:0\nuser:x:1:1\n")
    args = ["run", str(g), "--fetch", "size", "--feed", f"filename={vocab}", "--json"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1 and "--allow-read" in r.stderr and "s3cr3t" not in r.output
    for grant in (["--allow-read", str(vocab)], ["--allow-read", str(tmp_path)],
                  ["--allow-files"]):
        r = CliRunner().invoke(cli, [*args, *grant])
        assert r.exit_code == 0, r.output
        assert '"value": 2' in r.stdout


def test_cli_run_as_a_process_refuses_with_one_line(tmp_path):
    g = _write_graph(tmp_path, SAVE)
    p = subprocess.run([sys.executable, "-m", "dfg.cli", "run", str(g), "--target", "save",
                        "--feed", f"prefix={tmp_path / 'x' / 'ckpt'}", "--fetch", "w"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1
    assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr
    assert "may not write" in p.stderr


# --- the source scan: no kernel touches files behind the gate's back -------------------------

# calls that reach the file system: builtins, module attributes and dfg modules that do I/O
_FILE_NAMES = {"open"}
_FILE_MODULES = {"os", "pathlib", "io", "mmap", "glob", "shutil", "tempfile", "Path"}
_HARMLESS = {("os", "urandom"), ("os", "cpu_count"), ("os", "sched_getaffinity"),
             ("os", "environ"), ("os", "getpid"), ("io", "BytesIO"), ("io", "StringIO"),
             ("os", "sep"), ("os", "fspath")}
_FILE_DFG = {"bundle", "bundle_writer", "atomic", "savedmodel", "io"}
_NUMPY_IO = {"load", "save", "savez", "fromfile", "tofile", "loadtxt", "savetxt", "memmap",
             "genfromtxt"}


def _uses_files(fn: ast.AST, dfg_io_names: set[str]) -> list[str]:
    found = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and (f.id in _FILE_NAMES or f.id in dfg_io_names):
                found.append(f.id)
            if isinstance(f, ast.Attribute):
                base = f.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name):
                    if base.id in _FILE_MODULES and (base.id, f.attr) not in _HARMLESS:
                        found.append(f"{base.id}.{f.attr}")
                    if base.id in ("np", "numpy") and f.attr in _NUMPY_IO:
                        found.append(f"np.{f.attr}")
                    if f.attr == "tofile":
                        found.append("tofile")
        if isinstance(node, ast.ImportFrom) and node.module:
            mod = node.module.rsplit(".", 1)[-1]
            if mod in _FILE_DFG and "graphdef" in node.module:
                found.append(f"from {node.module}")
            if node.module in ("os", "pathlib", "shutil", "glob", "mmap", "tempfile"):
                found.append(f"from {node.module}")
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in ("os", "pathlib", "shutil", "glob", "mmap", "tempfile"):
                    # importing os is harmless by itself; its calls are caught above
                    pass
    return found


def _kernel_ops(deco: ast.AST) -> tuple[list[str], str | None] | None:
    """(ops, files=) of a ``kernel(...)`` call, else None."""
    if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name)
            and deco.func.id == "kernel"):
        return None
    ops = [a.value for a in deco.args if isinstance(a, ast.Constant)]
    files = next((k.value.value for k in deco.keywords if k.arg == "files"
                  and isinstance(k.value, ast.Constant)), None)
    return ops, files


def _scan(module) -> list[tuple[str, list[str], str | None, list[str], bool]]:
    """Per kernel registration of a family module: (function, ops, files=, the file APIs
    it reaches through the module's own functions, whether it reaches files.check)."""
    tree = ast.parse(inspect.getsource(module))
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    # module-level names bound to dfg I/O helpers (from dfg.graphdef.bundle import X)
    dfg_io = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and "graphdef" in node.module \
                and node.module.rsplit(".", 1)[-1] in _FILE_DFG:
            dfg_io.update(a.asname or a.name for a in node.names)

    def reach(name: str, seen: set[str]) -> tuple[list[str], bool]:
        if name in seen or name not in funcs:
            return [], False
        seen.add(name)
        fn = funcs[name]
        uses = _uses_files(fn, dfg_io)
        gated = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "check" and isinstance(n.func.value, ast.Name)
                    and n.func.value.id == "files" for n in ast.walk(fn))
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                u, g = reach(n.func.id, seen)
                uses += u
                gated = gated or g
        return uses, gated

    out = []
    for node in ast.walk(tree):
        regs = []
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                k = _kernel_ops(deco)
                if k:
                    regs.append((node.name, *k))
        elif isinstance(node, ast.Call) and _kernel_ops(node.func) and node.args \
                and isinstance(node.args[0], ast.Name):      # kernel("Op")(fn)
            regs.append((node.args[0].id, *_kernel_ops(node.func)))
        for name, ops, files in regs:
            uses, gated = reach(name, set())
            out.append((name, ops, files, uses, gated))
    return out


def _families():
    import importlib

    for fam in registry.FAMILIES:
        yield fam, importlib.import_module(f"dfg.executor.kernels.{fam}")


def test_no_kernel_touches_files_without_being_declared_and_gated():
    problems, declared = [], set()
    for fam, mod in _families():
        for name, ops, files, uses, gated in _scan(mod):
            if files:
                declared.update(ops)
                if not gated:
                    problems.append(f"{fam}.{name} ({', '.join(ops)}) declares files= but "
                                    "never calls files.check")
            elif uses:
                problems.append(f"{fam}.{name} ({', '.join(ops)}) touches files "
                                f"({', '.join(sorted(set(uses)))}) without files= in its "
                                "@kernel registration")
    assert not problems, "\n".join(problems)
    assert declared == set(registry.file_ops())


def test_the_scan_catches_an_undeclared_file_kernel():
    """The scan itself works: a kernel that opens a file without files= is reported."""
    import types

    src = '''
from .registry import kernel

def _helper(p):
    with open(p) as f:
        return f.read()

@kernel("Sneaky")
def sneaky(ctx, path):
    return _helper(path)

@kernel("Honest", files="read")
def honest(ctx, path):
    files.check(ctx, "read", path)
    return _helper(path)
'''
    mod = types.ModuleType("fake")
    orig = inspect.getsource
    try:
        inspect.getsource = lambda m: src if m is mod else orig(m)
        got = {name: (files, bool(uses), gated) for name, _o, files, uses, gated in _scan(mod)}
    finally:
        inspect.getsource = orig
    assert got == {"sneaky": (None, True, False), "honest": ("read", True, True)}


def test_a_kernel_calling_the_gate_undeclared_is_an_internal_error():
    from dfg.executor.kernels.registry import KernelContext
    from dfg.graphdef import files
    from dfg.graphdef.errors import InternalError

    ctx = KernelContext("n", "Relu", {}, resources=None)
    with pytest.raises(InternalError, match="declares files=None"):
        files.check(ctx, "read", "/x")


def test_documentation_names_the_flags():
    r = CliRunner().invoke(cli, ["run", "--help"])
    assert "--allow-read" in r.output and "--allow-write" in r.output
    assert "--allow-files" in r.output and "--timeout" in r.output
    assert "loop forever" in r.output
    assert os.path.isfile(ROOT / "README.md")


# --- --timeout covers the whole command ------------------------------------------------------

def test_command_deadline_interrupts_work_before_the_steps():
    """Loading, validation and the run-time optimizer run before any step's own deadline:
    the command's --timeout interrupts them too (SIGALRM on the main thread)."""
    from dfg.cli.options import command_limits, time_left
    from dfg.graphdef.errors import DeadlineExceededError

    with pytest.raises(DeadlineExceededError, match="--timeout of 0.2 s exceeded"):
        with command_limits(0.2):
            assert 0 < time_left() <= 0.2
            while True:        # work that never ends, as a hostile graph's folding could
                pass
    assert time_left() is None


def test_run_timeout_bounds_a_step_whose_optimizer_folds_expensive_constants(tmp_path):
    """60 chained 1500x1500 MatMuls of Fill'ed constants: the eager optimizer would fold
    them for many seconds; --timeout 1 ends the command with exit 1."""
    from dfg.schemas import types_pb2

    g = graph_pb2.GraphDef()
    f32, i32 = types_pb2.DT_FLOAT, types_pb2.DT_INT32
    shape = g.node.add(name="shape", op="Const")
    shape.attr["dtype"].type = i32
    t = shape.attr["value"].tensor
    t.dtype = i32
    t.tensor_shape.dim.add().size = 2
    t.int_val.extend([1500, 1500])
    v = g.node.add(name="v", op="Const")
    v.attr["dtype"].type = f32
    v.attr["value"].tensor.dtype = f32
    v.attr["value"].tensor.tensor_shape.SetInParent()
    v.attr["value"].tensor.float_val.append(1e-3)
    fill = g.node.add(name="m0", op="Fill", input=["shape", "v"])
    fill.attr["T"].type = f32
    fill.attr["index_type"].type = i32
    prev = "m0"
    for i in range(1, 60):
        m = g.node.add(name=f"m{i}", op="MatMul", input=[prev, "m0"])
        m.attr["T"].type = f32
        prev = m.name
    p = tmp_path / "slow.pb"
    p.write_bytes(g.SerializeToString())
    r = subprocess.run([sys.executable, "-m", "dfg.cli", "run", str(p), "--fetch", prev,
                        "--timeout", "1"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "DFG_OPTIMIZE": "eager"})
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr
    assert "timed out" in r.stderr or "--timeout" in r.stderr


def test_paths_with_nul_or_non_utf8_bytes_are_clean_errors(tmp_path):
    from dfg.graphdef.errors import InvalidArgumentError

    with Session(SAVE, files=FilePolicy(write=[tmp_path])) as s:
        with pytest.raises(InvalidArgumentError, match="NUL byte"):
            s.run([], {"prefix": np.array(str(tmp_path).encode() + b"/a\0b", dtype=object)},
                  targets=["save"])
        with pytest.raises(PermissionDeniedError):
            s.run([], {"prefix": np.array(b"/\xff/ckpt", dtype=object)}, targets=["save"])
        # inside the grant, a non-UTF-8 name is written as the bytes it is
        s.run([], {"prefix": np.array(str(tmp_path).encode() + b"/\xff", dtype=object)},
              targets=["save"])
    assert os.path.exists(os.fsdecode(str(tmp_path).encode() + b"/\xff.index"))
