"""Absolute paths of this machine in decoded strings, and the fields that name a model by its path.

Fields that name the model a file belongs to (``base_model_name_or_path``, ``name_or_path``,
``_name_or_path``, ...) hold wherever training loaded the model from, often a local folder: they are
rewritten to the base model's Hub id. Fields that name a local file (``tokenizer_file``) are dropped:
transformers finds the repo's files by name. Any other absolute path in a published string is refused.

An absolute path is found by its shape, and by what it starts with:

- the run directory, the Hugging Face caches and the home directory, as given;
- any absolute path of three segments or more (``/raid/u/ckpt``, ``/p/project/x/y``, ``/lus/grand/...``):
  clusters name their file systems freely, so no list of roots can know them all. Only the system's own
  folders (``/usr``, ``/bin``, ``/dev``, ``/etc``, ...) and web routes are allowed, by name (`ALLOWED_ROOTS`);
- two segments under a root where users and data live: ``/home/...``, ``/Users/...``, ``/scratch1/...``,
  ``/raid/...``, ``/checkpoint/...`` and the like;
- ``C:\\Users\\...`` or any ``X:\\folder\\``, ``\\\\server\\share``, ``file:`` URLs.

A path is absolute only where it starts a word: what follows a letter, digit, dot, colon or slash is a
relative path, a URL's path (``host/a/b/c``) or a metric name (``critic/score/mean``). A root alone
(``/home``, ``/tmp``) is not a path: Qwen's vocabulary holds those words as tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubkit.safety.secrets import Finding

# Fields that name the model by where it was loaded from: rewritten to the Hub id.
NAME_FIELDS = frozenset(
    {
        "base_model_name_or_path",
        "name_or_path",
        "_name_or_path",
        "model_name_or_path",
        "tokenizer_name_or_path",
    }
)
# Fields that name a local file beside the config: dropped (a Hub repo's files are found by name).
FILE_FIELDS = frozenset({"tokenizer_file", "vocab_file", "merges_file"})

# Top folders of user homes, scratch and data disks, temporary files, mounts, cloud notebooks, clusters.
_ROOTS = (
    "home\\d*|homes|Users|root|u|scratch\\d*|pscratch|localscratch|tmp|ptmp|var|mnt|media|data\\d*|datasets|opt|"
    "srv|work\\d*|workspace|private|Volumes|lustre\\d*|lus|gpfs|beegfs|nfs|net|shared|storage|project\\d*|projects|"
    "p|content|kaggle|fsx|efs|dbfs|raid\\d*|global|checkpoint|checkpoints|export|cluster|group|groups|ssd|nvme\\d*"
)
# Absolute paths that are the same on every machine: the operating system's own files, and web routes
# (the Hub's /api/..., a Space's /gradio_api/...).
ALLOWED_ROOTS = frozenset(
    {"usr", "bin", "sbin", "lib", "lib64", "dev", "etc", "proc", "sys", "run", "api", "gradio_api"}
)
# Each pattern starts with a literal, which `re` finds fast; what comes before a match is checked by hand
# (a look-behind would be tried at every position of a tokenizer's 2.4 million characters).
_ROOT_RE = re.compile(rf"/(?P<top>{_ROOTS})/[^\s/\"'<>|*?]")
_SEGMENT = r"[A-Za-z0-9_.~+@%$-]+"
_DEEP_RE = re.compile(rf"/(?P<top>{_SEGMENT})/{_SEGMENT}/{_SEGMENT}")
# Not part of a relative path (a/home/x), a URL's path (host/data/x) or a file name (x.tmp/y).
_NOT_BEFORE_ROOT = "_.~:/-"
# From the colon after the drive letter: C:\\Users\\..., C:/Users/..., C:\\any folder\\.
_WINDOWS_RE = re.compile(r":(?:(?:\\{1,2}|/)(?:Users|Documents and Settings)(?:\\|/)|\\{1,2}[\w .-]+\\)")
_UNC_RE = re.compile(r"\\\\[\w.-]+\\[\w$.-]+")
_FILE_URL_RE = re.compile(r"file:/")


def _after_word(text: str, at: int, also: str = "") -> bool:
    return at > 0 and (text[at - 1].isalnum() or text[at - 1] in also)


def _path_under_root(text: str) -> Finding | None:
    for match in _ROOT_RE.finditer(text):
        if not _after_word(text, match.start(), _NOT_BEFORE_ROOT):
            return Finding(f"a path under /{match['top']}", match.start())
    return None


def _deep_path(text: str) -> Finding | None:
    for match in _DEEP_RE.finditer(text):
        top = match["top"]
        if top not in ALLOWED_ROOTS and not _after_word(text, match.start(), _NOT_BEFORE_ROOT):
            return Finding(f"a path under /{top}", match.start())
    return None


def _windows_path(text: str) -> Finding | None:
    for match in _WINDOWS_RE.finditer(text):
        drive = match.start() - 1
        if drive >= 0 and text[drive].isascii() and text[drive].isalpha() and not _after_word(text, drive):
            return Finding("a Windows path", drive)
    return None


def _network_path(text: str) -> Finding | None:
    for match in _UNC_RE.finditer(text):
        if not _after_word(text, match.start(), "\\_"):
            return Finding("a Windows network path", match.start())
    return None


def _file_url(text: str) -> Finding | None:
    for match in _FILE_URL_RE.finditer(text):
        if not _after_word(text, match.start()):
            return Finding("a file: URL", match.start())
    return None


_GENERIC_FINDERS = (_path_under_root, _deep_path, _windows_path, _network_path, _file_url)

# A user's home as a path starts with it: /home/NAME, /Users/NAME, /root, C:\Users\NAME.
_NAME = r"[^\s/\\\"'<>|*?]+"
_HOME_RE = re.compile(
    rf"/(?:home\d*|homes|Users)/{_NAME}|/root(?![^\s/\\])|[A-Za-z]:[\\/]{{1,2}}(?:Users|Documents and Settings)[\\/]{{1,2}}{_NAME}"
)


def mask_homes(text: str) -> str:
    """`text` with each user's home that starts a path written ``~`` (``/home/bob/notes.txt`` →
    ``~/notes.txt``): what a model wrote is published with a home's name masked, not refused for it."""
    return _HOME_RE.sub(lambda m: m[0] if _after_word(text, m.start(), _NOT_BEFORE_ROOT) else "~", text)


@dataclass(frozen=True)
class LocalPathFinder:
    """Finds absolute paths of this machine in decoded strings.

    Args:
        named: (path, what it is) for each folder of this machine looked for as itself, e.g.
            ("/srv/runs/r1", "the run directory").
        generic: also look for any absolute path's shape (`/home/x/y`, ``C:\\Users``, ``\\\\server\\share``);
            False for what a model wrote (`Scanner.for_model_text`).
    """

    named: tuple[tuple[str, str], ...] = ()
    generic: bool = True

    @classmethod
    def for_dirs(cls, dirs: Iterable[tuple[Path, str]]) -> LocalPathFinder:
        """A finder for these folders (each also under its resolved name), besides the generic roots."""
        named: dict[str, str] = {}
        for path, what in dirs:
            for variant in {str(path), str(path.resolve())}:
                variant = variant.rstrip("/\\")
                if variant:
                    named.setdefault(variant, what)
        return cls(named=tuple(sorted(named.items(), key=lambda item: -len(item[0]))))

    def find(self, text: str) -> Finding | None:
        """The first local path in `text` (several strings may be joined with newlines), or None."""
        found = []
        for path, what in self.named:
            # The folder with something after it; alone only when it has two components or more
            # (a bare "/data" is a vocabulary token, "/srv/runs" is a path).
            at = text.find(path + "/")
            if at < 0 and path.count("/") >= 2:
                alone = re.search(re.escape(path) + r"(?![\w.-])", text)
                at = alone.start() if alone else -1
            if at >= 0:
                found.append(Finding(f"the path of {what}", at))
        # After the named folders: at the same place, "the run directory" says more than "a path under /srv".
        if self.generic:
            found += [f for f in (finder(text) for finder in _GENERIC_FINDERS) if f is not None]
        return min(found, key=lambda f: f.start) if found else None


def rewrite_local_fields(value: Any, hub_id: str) -> int:
    """Rewrite, in place and at any depth of a parsed JSON value, every field naming the model by its path
    (or null) to `hub_id`; drop local-file fields. Returns how many fields were rewritten or dropped."""
    changed = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in [k for k in node if k in FILE_FIELDS and isinstance(node[k], str)]:
                del node[key]
                changed += 1
            for key in node:
                if key in NAME_FIELDS and isinstance(node[key], str | None) and node[key] != hub_id:
                    node[key] = hub_id
                    changed += 1
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
    return changed
