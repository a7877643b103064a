"""The installed itermask's version (read by ``itermask --version`` without importing the package's
modules)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
