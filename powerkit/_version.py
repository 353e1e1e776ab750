"""The package's version: the one place it is written (pyproject.toml reads it from here),
so that a command learns it without reading the installed package's metadata."""

VERSION = "0.1.0"
