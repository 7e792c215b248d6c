"""A digest of openreg-inductor's own sources (see config._codegen_digest)."""

import hashlib
from pathlib import Path


def sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
