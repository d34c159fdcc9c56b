"""The `.gitmodules` entries git refuses, read the way git reads them.

`git fsck` (fsck.c fsck_gitmodules_fn, submodule-config.c check_submodule_name / check_submodule_url)
refuses a submodule whose name has a `..` component, whose url or path starts with `-` (it would reach
a `git clone` command line as an option: `--upload-pack=...`), whose url could smuggle a newline into a
credential helper, or whose `update` runs a command (`!...`).

A config parser that reads a file differently from git's would let a dangerous entry through, so this one
reads only a plain subset of git's syntax (sections, `key = value`, comments), on which both agree; a
`.gitmodules` outside that subset (quotes, escapes, continued lines, old `[submodule.name]` headers) is
refused whole, although git might have found it harmless.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from hubkit.localhub.storage.exceptions import InvalidInputError

_SECTION = re.compile(r'^\[([A-Za-z0-9-]+)(?:[ \t]+"([^"\\]*)")?\][ \t]*(?:[#;].*)?$')
_ENTRY = re.compile(r"^([A-Za-z][A-Za-z0-9-]*)[ \t]*(?:=(.*))?$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# What git hands to curl (url_to_curl_url); such a url must be one git's url_normalize accepts: this
# pattern is narrower (a host name or IPv4 address, a port, a path of URL characters).
_CURL_SCHEME = re.compile(r"^(?:https?|ftps?)(?:::|://)", re.IGNORECASE)
_PLAIN_CURL_URL = re.compile(
    r"^(?:(?:https?|ftps?)::)?(?:https?|ftps?)://[A-Za-z0-9.-]+(?::[0-9]{1,5})?"
    r"(?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*)?$"
)


def _entries(path: str, text: str) -> list[tuple[str, str | None, str, str | None]]:
    """(section, subsection, key, value) of every entry; raises InvalidInputError outside the subset."""
    entries = []
    section: tuple[str, str | None] | None = None
    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        line = line.removesuffix("\r").strip(" \t")
        if not line or line[0] in "#;":
            continue
        where = f"{path}, line {number}"
        if _CONTROL.search(line):
            raise InvalidInputError(f"{where}: control characters are not accepted in .gitmodules.")
        if match := _SECTION.match(line):
            section = (match.group(1).lower(), match.group(2))
            continue
        match = _ENTRY.match(line)
        if match is None or section is None or (match.group(2) and re.search(r'["\\]', match.group(2))):
            raise InvalidInputError(
                f"{where}: this Hub accepts only plain '[section \"name\"]' headers and 'key = value' lines "
                "in .gitmodules (no quotes, escapes or keys outside a section)."
            )
        value = match.group(2)
        if value is not None:
            value = re.split(r"[#;]", value, maxsplit=1)[0].strip(" \t")
        entries.append((section[0], section[1], match.group(1).lower(), value))
    return entries


def _bad_name(name: str) -> bool:
    """submodule-config.c check_submodule_name: empty, or with `..` as a component (/ or \\ separated)."""
    return not name or ".." in re.split(r"[/\\]", name)


def _bad_url(url: str) -> bool:
    """submodule-config.c check_submodule_url (a curl url narrowed to a plain one, see `_PLAIN_CURL_URL`)."""
    if url.startswith("-") or _CONTROL.search(unquote_to_bytes(url).decode("latin-1")):
        return True
    if re.match(r"^\.\.?[/\\]", url) or url.startswith("git://"):
        # A relative url climbing out with ../ and then ':' or '/' could rewrite the host (CVE-2020-11008).
        rest = re.sub(r"^(?:\.\.?[/\\])+", "", url)
        climbs = ".." in url[: len(url) - len(rest)]
        return climbs and rest[:1] in (":", "/", "\\")
    return bool(_CURL_SCHEME.match(url)) and not _PLAIN_CURL_URL.match(url)


def check_gitmodules(path: str, data: bytes) -> None:
    """Refuse (InvalidInputError, naming the file and the entry or line) a `.gitmodules` content git's
    fsck refuses, or that this Hub cannot read as git does."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{path} is not UTF-8 text.") from None
    for section, name, key, value in _entries(path, text):
        if section != "submodule" or name is None:
            continue
        if _bad_name(name):
            raise InvalidInputError(f"{path}: git refuses the submodule name {name!r}.")
        if value is None:
            continue
        if key == "url" and _bad_url(value):
            raise InvalidInputError(
                f"{path}: git refuses the url of submodule {name!r}, or this Hub cannot check it as git "
                f"would (http(s) and ftp(s) urls are taken in their plain form only): {value!r}."
            )
        if key == "path" and value.startswith("-"):
            raise InvalidInputError(f"{path}: git refuses the path of submodule {name!r}: {value!r}.")
        if key == "update" and value.startswith("!"):
            raise InvalidInputError(
                f"{path}: git refuses submodule {name!r}'s update setting {value!r} (it runs a command)."
            )
