"""The build step pyproject.toml cannot say: the Python stubs of Fivetran's Partner SDK, generated
from the .proto files in `src/lakehistory/destination/proto/` by grpcio-tools (a build
requirement) into `src/lakehistory/destination/sdk/`, before the package's files are collected.
An editable install runs it too, so a clone has the stubs once `pip install -e` has run."""

from __future__ import annotations

import re
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PROTOS = HERE / "src" / "lakehistory" / "destination" / "proto"
STUBS = HERE / "src" / "lakehistory" / "destination" / "sdk"


def generate_stubs() -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    protos = sorted(p.name for p in PROTOS.glob("*.proto"))
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTOS}",
            f"-I{well_known}",
            f"--python_out={STUBS}",
            f"--pyi_out={STUBS}",
            f"--grpc_python_out={STUBS}",
            *protos,
        ]
    )
    if code != 0:
        raise SystemExit(f"protoc failed ({code}) on {', '.join(protos)}")
    # protoc writes `import common_pb2`, a top-level module; the stubs live in a package.
    for stub in STUBS.glob("*_pb2*.py"):
        text = stub.read_text()
        stub.write_text(re.sub(r"^import (\w+_pb2) as", r"from . import \1 as", text, flags=re.MULTILINE))


class BuildWithStubs(build_py):
    def run(self) -> None:
        generate_stubs()
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
