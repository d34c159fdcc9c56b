"""Every decoded string of a file checked for secrets and local paths; a hit refuses the file, naming where.

A parsed JSON value is checked in one pass over its strings joined (keys too), which keeps the real
Qwen3 tokenizer (454,676 strings) at a few tenths of a second; only a hit walks the value again to say
which field holds it. The field is named by its dotted path (``added_tokens.3.content``); a key that
itself holds the secret is named by the object it is a key of, so the message never repeats it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from hubkit.errors import LocalPathInFileError, SecretInFileError
from hubkit.safety.local_paths import LocalPathFinder
from hubkit.safety.secrets import Finding, SecretFinder

_SHOWN_KEY_CHARS = 40


def _strings(value: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """Every string of a JSON value (keys and values, in no particular order), and each (key, value)
    pair whose value is a string. Level by level: one pass, no recursion."""
    if isinstance(value, str):
        return [value], []
    keys: list[str] = []
    in_lists: list[str] = []
    pairs: list[tuple[str, str]] = []
    level = [value] if isinstance(value, dict | list) else []
    while level:
        below: list[Any] = []
        for node in level:
            if isinstance(node, dict):
                keys.extend(node)
                for key, child in node.items():
                    if isinstance(child, str):
                        pairs.append((key, child))
                    elif isinstance(child, dict | list):
                        below.append(child)
            else:
                for child in node:
                    if isinstance(child, str):
                        in_lists.append(child)
                    elif isinstance(child, dict | list):
                        below.append(child)
        level = below
    return keys + in_lists + [text for _, text in pairs], pairs


def _dotted(location: tuple[str | int, ...]) -> str:
    return ".".join(
        t if len(t) <= _SHOWN_KEY_CHARS else t[:_SHOWN_KEY_CHARS] + "…" for t in map(str, location)
    )


def _locate(value: Any, hit: Callable[[str | None, str], bool]) -> str:
    """Where the first string of `value` for which `hit(key, string)` holds is, as messages say it.

    Every key of an object is tested before anything below it, so the keys a reported path goes
    through are known clean.
    """
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        location, node = stack.pop()
        if isinstance(node, str):
            if hit(None, node):
                return f"in field {_dotted(location)}" if location else "in the document's one string"
            continue
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        if isinstance(node, dict):
            for key, _ in items:
                if hit(None, key):
                    return f"in a key of {_dotted(location)}" if location else "in a top-level key"
            for key, child in items:
                if isinstance(child, str) and hit(key, child):
                    return f"in field {_dotted((*location, key))}"
        below = dict | list if isinstance(node, dict) else dict | list | str  # an object's strings are tested
        stack.extend(((*location, key), child) for key, child in reversed(items) if isinstance(child, below))
    return "in a field"  # not reached: the joined strings held a hit


@dataclass(frozen=True)
class Scanner:
    """Refuses strings holding a secret or a local path.

    Args:
        secrets: the secret finder (with the token in use).
        paths: the local path finder (with the run's and the caches' folders).
    """

    secrets: SecretFinder
    paths: LocalPathFinder

    def for_model_text(self) -> Scanner:
        """The scanner for what a model wrote (evaluation answers, training completions): every secret, and
        this machine's own folders by name, but not the generic shapes of a path. A model writes those
        (code, LaTeX's ``\\\\``, a random model's tokens) and cannot hold this machine's paths unless they
        were in what it was given, which is vetted where it is published (the manifest, the system prompt)
        or is a public dataset; refusing them refused a whole push for a random model's ``\\\\x\\y``."""
        return replace(self, paths=replace(self.paths, generic=False))

    def check_value(self, value: Any, label: str) -> None:
        """Refuse a parsed JSON value (after any fields were rewritten) holding a secret or a local path in
        any key or value.

        Raises:
            SecretInFileError: naming the file, what it holds and the field.
            LocalPathInFileError: likewise.
        """
        strings, pairs = _strings(value)
        joined = "\n".join(strings)
        found = self.secrets.find(joined)
        if found is not None:
            where = _locate(value, lambda key, text: self.secrets.find(text) is not None)
            raise SecretInFileError(_secret_message(label, found.what, where))
        for key, text in pairs:
            what = self.secrets.find_named(key, text)
            if what is not None:
                where = _locate(
                    value, lambda k, t: k is not None and self.secrets.find_named(k, t) is not None
                )
                raise SecretInFileError(_secret_message(label, what, where))
        found = self.paths.find(joined)
        if found is not None:
            where = _locate(value, lambda key, text: self.paths.find(text) is not None)
            raise LocalPathInFileError(_path_message(label, found.what, where))

    def check_text(self, text: str, label: str, *, first_line: int = 1) -> None:
        """Refuse decoded text (a card, a template, a line-based file) holding a secret or a local path,
        naming the line (`first_line`: the number of the text's first line in the file).

        Raises:
            SecretInFileError: naming the file, what it holds and the line.
            LocalPathInFileError: likewise.
        """
        found = self.secrets.find(text)
        if found is not None:
            raise SecretInFileError(_secret_message(label, found.what, _line(text, found, first_line)))
        found = self.paths.find(text)
        if found is not None:
            raise LocalPathInFileError(_path_message(label, found.what, _line(text, found, first_line)))

    def check_strings(self, strings: tuple[str, ...], label: str, where: str) -> None:
        """Refuse strings of one part of a file (a safetensors header's tensor names) holding a secret or a
        local path, naming that part.

        Raises:
            SecretInFileError: naming the file, what it holds and `where`.
            LocalPathInFileError: likewise.
        """
        joined = "\n".join(strings)
        found = self.secrets.find(joined)
        if found is not None:
            raise SecretInFileError(_secret_message(label, found.what, f"in {where}"))
        found = self.paths.find(joined)
        if found is not None:
            raise LocalPathInFileError(_path_message(label, found.what, f"in {where}"))

    def secret_in(self, text: str) -> str | None:
        """What secret `text` holds and on which line ("a private key block on line 1"), or None."""
        found = self.secrets.find(text)
        return f"{found.what} {_line(text, found, 1)}" if found is not None else None


def _line(text: str, found: Finding, first_line: int) -> str:
    return f"on line {text.count(chr(10), 0, found.start) + first_line}"


def _secret_message(label: str, what: str, where: str) -> str:
    return f"refusing to publish {label}: it holds {what} ({where}); remove it and push again"


def _path_message(label: str, what: str, where: str) -> str:
    return (
        f"refusing to publish {label}: it holds {what} ({where}); write a Hub id or a relative path "
        "there and push again"
    )
