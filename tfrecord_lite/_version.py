"""The package version, in one place (the CLI reads it without importing the package)."""

__version__ = "0.1.0"
