"""``python -m powerkit``."""

from powerkit.core.errors import collect_less, leave, stop_on_sigterm

collect_less()
stop_on_sigterm()  # (SIGTERM ends it as Ctrl-C does, as it ends the console script)

from powerkit.cli import main  # noqa: E402

leave(main)
