"""``python -m powerkit``."""

from powerkit._entry import main

main()
