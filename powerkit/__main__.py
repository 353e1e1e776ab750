"""``python -m powerkit``."""

from powerkit.core.errors import leave, stop_on_sigterm

stop_on_sigterm()  # (SIGTERM ends it as Ctrl-C does, as it ends the console script)

from powerkit.cli import main  # noqa: E402

leave(main)
