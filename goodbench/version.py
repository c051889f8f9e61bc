"""The package version, in a module of its own so that every layer can record it without importing
the public API facade (goodbench/__init__.py)."""

__version__ = "0.1.0"
