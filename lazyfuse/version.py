"""The package version (part of every autotuning key: a new version re-tunes)."""
__version__ = "0.1.0"
