"""Regenerate (or check) the committed ``*_pb2.py`` modules from the ``.proto`` sources.

The generated code is committed so that installing dfg never needs protoc; this script uses
the pip-installable compiler from ``grpcio-tools`` (a dev dependency)::

    python -m dfg.schemas.generate          # rewrite *_pb2.py
    python -m dfg.schemas.generate --check  # exit 1 if they are stale (run by the tests)

The .proto files are compiled as ``dfg/schemas/<name>.proto`` so the generated modules import
each other as ``dfg.schemas.<name>_pb2`` while keeping TensorFlow's package and message names.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def generate(out_dir: Path) -> list[Path]:
    from grpc_tools import protoc  # dev-only dependency

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pkg = root / "dfg" / "schemas"
        pkg.mkdir(parents=True)
        protos = sorted(HERE.glob("*.proto"))
        for proto in protos:
            shutil.copy(proto, pkg / proto.name)
        # grpc_tools ships google/protobuf/*.proto (any, wrappers) that the SavedModel
        # schemas import; the generated code imports them from the protobuf runtime
        wkt = Path(protoc.__file__).resolve().parent / "_proto"
        args = ["protoc", f"-I{root}", f"-I{wkt}", f"--python_out={root}"]
        args += [f"dfg/schemas/{p.name}" for p in protos]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        written = []
        for gen in sorted(pkg.glob("*_pb2.py")):
            target = out_dir / gen.name
            shutil.copy(gen, target)
            written.append(target)
        return written


def main(argv: list[str]) -> int:
    if "--check" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = generate(Path(tmp))
            stale = [p.name for p in fresh if not (HERE / p.name).exists()
                     or (HERE / p.name).read_bytes() != p.read_bytes()]
        if stale:
            print("stale generated schemas: " + ", ".join(stale)
                  + " (run: python -m dfg.schemas.generate)", file=sys.stderr)
            return 1
        return 0
    for p in generate(HERE):
        print(p.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
