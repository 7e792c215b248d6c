"""A hatchling metadata hook shared by the pure-Python layers (openreg-inductor, openreg): the openreg layers a
package needs are pinned to its own version, which comes from the checkout's VERSION file, so that the layers
of one release go together and the version is written in one place only.

Configured in the package's pyproject.toml under [tool.hatch.metadata.hooks.custom]: `dependencies` and
`optional-dependencies` list requirements as usual; an openreg layer named without a version gets `==<version>`."""

import re

from hatchling.metadata.plugin.interface import MetadataHookInterface


def _pinned(requirement: str, version: str) -> str:
    return f"{requirement}=={version}" if re.fullmatch(r"openreg(-[a-z]+)?", requirement) else requirement


class LockstepHook(MetadataHookInterface):
    def update(self, metadata):
        version = metadata["version"]
        metadata["dependencies"] = [_pinned(r, version) for r in self.config.get("dependencies", [])]
        extras = self.config.get("optional-dependencies", {})
        if extras:
            metadata["optional-dependencies"] = {name: [_pinned(r, version) for r in reqs]
                                                 for name, reqs in extras.items()}
