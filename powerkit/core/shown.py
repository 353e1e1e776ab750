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


#: a lone surrogate: a byte of a file name that was not UTF-8, as Python keeps it
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def visible(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``), and each byte
    of a name that was not UTF-8 as its own (``\\xff``, not Python's ``\\udcff``)."""
    text = _SURROGATE.sub(_surrogate, text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _surrogate(m: re.Match[str]) -> str:
    code = ord(m.group())
    # (U+DC80-U+DCFF: the byte 0x80-0xFF a name held, as Python's surrogateescape keeps it)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
