"""The installed package's version (`coffeebot --version`, /healthz, the start-up line)."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _package_version


def version() -> str:
    try:
        return _package_version("coffeebot")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"
