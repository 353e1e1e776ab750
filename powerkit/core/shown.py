"""Text taken from data (a host, a GPU name, a job, a label) as a terminal may show it: every
control character written out (``\\x1b``), so that a value can neither clear the screen, set
a window title nor move the cursor. Markup is never read from such text: the command line's
consoles (powerkit.core.consoles) print with Rich markup off, and turn it on only for their
own fixed words."""

from __future__ import annotations

import re

__all__ = ["visible"]

#: C0 controls but tab and newline, DEL, C1 controls (ESC, CSI, OSC and the rest)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
