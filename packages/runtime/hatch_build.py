"""Builds the runtime's C++ (core, glue and the _C module) and pins the wheel to
the torch release it was built against. Editable installs get the binaries in
the source tree; wheels get them from a build folder per torch release, so one
checkout can build for several releases."""

import importlib.util
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

ROOT = Path(__file__).parent
PACKAGE = ROOT / "src" / "openreg_runtime"


def _builder():
    # Loaded by path: the package's __init__ needs the very modules built here.
    spec = importlib.util.spec_from_file_location("_openreg_build", PACKAGE / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CustomMetadataHook(MetadataHookInterface):
    def update(self, metadata):
        metadata["dependencies"] = [f"torch=={_builder().torch_release()}"]


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        b = _builder()
        build_dir = ROOT / "build" / f"torch-{b.torch_release()}"
        out = PACKAGE if version == "editable" else build_dir / "package"
        include = [f"-I{b.INCLUDE_DIR}"]
        torch_cflags, torch_ldflags = b.torch_flags()
        torch_cflags += b.kineto_flags()
        lib = [f"-L{out / 'lib'}"]
        built = [
            b.build(name="openreg_core", kind="shared", sources=sorted((ROOT / "csrc/core").glob("*.cpp")),
                    out_dir=out / "lib", build_dir=build_dir, cflags=include, ldflags=["-pthread"]),
            b.build(name="openreg_lazy", kind="shared", sources=sorted((ROOT / "csrc/lazy").glob("*.cpp")),
                    out_dir=out / "lib", build_dir=build_dir, cflags=include + torch_cflags,
                    ldflags=torch_ldflags + ["-ldl"]),
            b.build(name="openreg_glue", kind="shared", sources=sorted((ROOT / "csrc/glue").glob("*.cpp")),
                    out_dir=out / "lib", build_dir=build_dir, cflags=include + torch_cflags,
                    precompile=["ATen/ATen.h", "torch/library.h"],
                    ldflags=torch_ldflags + lib + ["-lopenreg_lazy", "-lopenreg_core", "-Wl,-rpath,$ORIGIN"]),
            b.build(name="_C", sources=sorted((ROOT / "csrc/python").glob("*.cpp")), out_dir=out,
                    build_dir=build_dir, cflags=include + torch_cflags,
                    ldflags=torch_ldflags + lib + ["-lopenreg_glue", "-lopenreg_core", "-Wl,-rpath,$ORIGIN/lib"]),
            b.write_build_info(out),
        ]
        b.ship(build_data, version, built, out, "openreg_runtime")
