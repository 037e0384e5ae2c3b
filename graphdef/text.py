"""Text shown to people: node names and messages made safe for a terminal.

Node names come from files and may hold any character (validate reports them as
invalid-name, but they must still be printable in that report). A control character written
raw can move the cursor, clear the screen or set the window title, so every human-readable
output passes user text through :func:`printable`.
"""

from __future__ import annotations

import re

# C0 controls (tab and newline included: one diagnostic must stay one line), DEL, C1 controls
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _escape(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


def printable(s: str) -> str:
    """``s`` with every C0/C1 control character and DEL escaped as ``\\xNN``; else unchanged."""
    return _CONTROL.sub(_escape, s)


__all__ = ["printable"]
