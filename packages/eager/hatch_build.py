"""Builds openreg-eager's C++ against the installed torch and openreg-runtime,
and pins the wheel to that torch release (see the runtime's hatch_build.py)."""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

from openreg_runtime import build as b

ROOT = Path(__file__).parent
PACKAGE = ROOT / "src" / "openreg_eager"


class CustomMetadataHook(MetadataHookInterface):
    def update(self, metadata):
        metadata["dependencies"] = [f"openreg-runtime=={metadata['version']}", f"torch=={b.torch_release()}"]


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        build_dir = ROOT / "build" / f"torch-{b.torch_release()}"
        out = PACKAGE if version == "editable" else build_dir / "package"
        torch_cflags, torch_ldflags = b.torch_flags()
        sources = sorted((ROOT / "csrc").rglob("*.cpp"))
        module = b.build(
            name="_C",
            sources=sources,
            out_dir=out,
            build_dir=build_dir,
            cflags=[f"-I{b.INCLUDE_DIR}", *torch_cflags],
            precompile=["ATen/ATen.h", "torch/library.h"],
            # The runtime's libraries are found next door in a wheel install; in
            # an editable one, importing openreg_runtime has already loaded them.
            ldflags=[*torch_ldflags, f"-L{b.LIB_DIR}", "-lopenreg_glue", "-lopenreg_core",
                     "-Wl,-rpath,$ORIGIN/../openreg_runtime/lib"],
        )
        b.ship(build_data, version, [module, b.write_build_info(out)], out, "openreg_eager")
