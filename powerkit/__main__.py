"""``python -m powerkit``."""

from powerkit.cli import main

main()
