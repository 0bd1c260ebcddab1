"""Regenerates the committed Python code for proto/cri.proto, nri.proto and ttrpc.proto.

Run `python -m proto.generate` from the repo root after editing the .proto;
tests/relay/test_proto.py fails while the committed code is stale.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_FILES = ("proto/cri.proto", "proto/nri.proto", "proto/ttrpc.proto")
GENERATED = (
    "cri_pb2.py",
    "cri_pb2.pyi",
    "cri_pb2_grpc.py",
    "nri_pb2.py",
    "nri_pb2.pyi",
    "ttrpc_pb2.py",
    "ttrpc_pb2.pyi",
)


class GenerateError(RuntimeError):
    """protoc refused the .proto; its own message went to stderr."""


def generate(out_dir: Path = REPO_ROOT) -> list[Path]:
    """Compile PROTO_FILES into out_dir/proto/ and return the files written.

    The repo root is the proto path, so the generated grpc module imports
    `from proto import cri_pb2`, matching the package layout.
    """
    (out_dir / "proto").mkdir(parents=True, exist_ok=True)
    well_known = resources.files("grpc_tools") / "_proto"
    common = [
        "grpc_tools.protoc",
        f"-I{REPO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
    ]
    # Only the CRI is gRPC; NRI and ttrpc messages travel over ttrpc (agent/nri/).
    for extra, files in (
        ([f"--grpc_python_out={out_dir}"], PROTO_FILES[:1]),
        ([], PROTO_FILES[1:]),
    ):
        rc = protoc.main([*common, *extra, *(str(REPO_ROOT / p) for p in files)])
        if rc != 0:
            raise GenerateError(f"protoc failed with exit code {rc} on {', '.join(files)}")
    return [out_dir / "proto" / name for name in GENERATED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="output root (default: repo)")
    args = parser.parse_args(argv)
    try:
        written = generate(args.out)
    except GenerateError as err:
        print(err, file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
