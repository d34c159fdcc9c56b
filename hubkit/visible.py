"""Untrusted text made visible: run ids, repo names and notes come from run directories and releases, and a
string holding terminal escapes (an OSC 52 clipboard write, a cursor move, a bidi override) must reach a
terminal or a page as visible text, not as a command to it.

`visible` writes out control characters (C0, DEL, C1 and Unicode's bidi controls) as ``\\xNN`` / ``\\uNNNN``.
"""

from __future__ import annotations

import re

_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL_RE = re.compile(f"[{_CONTROL}]")
_CONTROL_OR_NEWLINE_RE = re.compile(f"[{_CONTROL}\t\n]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, one_line: bool = False) -> str:
    """`text` with every control character written out (also tabs and newlines when `one_line`)."""
    return (_CONTROL_OR_NEWLINE_RE if one_line else _CONTROL_RE).sub(_escape, text)
