"""`.gitignore` rules, as the Hub applies them at preupload (`shouldIgnore`): the client then leaves the
matching files out of its commit without a word.

git's rules (gitignore(5)): a blank line or `#` comment matches nothing; `!` re-includes; a trailing `/`
matches directories only; a `/` elsewhere anchors the pattern to the root, otherwise it matches at any
depth; `*` and `?` stay within a path segment, `**` crosses them; the last matching rule wins, and a file
in an ignored directory stays ignored (git does not look inside it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool


def _translate(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append(f"[{body}]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def parse(text: str) -> list[_Rule]:
    """The rules of a `.gitignore`'s text (lines git cannot read as a pattern match nothing)."""
    rules = []
    for line in text.splitlines():
        line = line.rstrip(" ") if not line.endswith("\\ ") else line
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:] if negated else line
        directory_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        if not pattern:
            continue
        anchored = "/" in pattern
        body = _translate(pattern.lstrip("/"))
        try:
            regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$")
        except re.error:
            continue
        rules.append(_Rule(regex, negated, directory_only))
    return rules


def _matches(rules: list[_Rule], path: str, is_dir: bool) -> bool:
    ignored = False
    for rule in rules:
        if (is_dir or not rule.directory_only) and rule.regex.match(path):
            ignored = not rule.negated
    return ignored


def is_ignored(rules: list[_Rule], path: str) -> bool:
    """Whether `path` (a file, relative to the repo's root) is ignored by `rules`."""
    parts = path.split("/")
    for depth in range(1, len(parts)):
        if _matches(rules, "/".join(parts[:depth]), is_dir=True):
            return True
    return _matches(rules, path, is_dir=False)
