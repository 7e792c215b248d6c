"""A digest of the code that decides what openreg-inductor generates (see config._codegen_digest)."""

import hashlib
import sys
from pathlib import Path

from . import headers


def sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    # The C++ that generated code carries: these headers and the runtime's that they include.
    digest.update(headers.text(*headers.shipped()).encode())
    # openreg's changes to torch internals, when installed, decide some of a graph's layouts (FakeTensor's
    # convolution) and lowerings.
    patches = sys.modules.get("openreg._torch_patches")
    if patches is not None:
        digest.update(Path(patches.__file__).read_bytes())
    return digest.hexdigest()[:16]
