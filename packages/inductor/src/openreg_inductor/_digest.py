"""A digest of openreg-inductor's own sources (see config._codegen_digest)."""

import hashlib
from pathlib import Path

from . import headers


def sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    # The C++ that generated code carries: these headers and the runtime's that they include.
    digest.update(headers.text(*headers.shipped()).encode())
    return digest.hexdigest()[:16]
