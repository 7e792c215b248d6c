"""Written by the build: the torch release these binaries were built against."""

TORCH_VERSION = "2.13.0"
