"""What the Hub accepts as names: users, orgs and repos, in-repo paths, branches and tags, commit ids."""

from __future__ import annotations

import re

from hubkit.localhub.git.rules import check_component
from hubkit.localhub.storage.exceptions import InvalidInputError, PathOutsideRepoError

# The Hub's rule for user, org and repo names.
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$")
REF_NAME = re.compile(r"^[A-Za-z0-9_.\-/]{1,200}$")
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
SHORT_SHA = re.compile(r"^[0-9a-f]{7,39}$")
PR_REF = re.compile(r"^refs/pr/([0-9]{1,9})$")
# Paths git stores and every client checks out: Linux's PATH_MAX, and far fewer folders than git's
# core.maxTreeDepth (512 for some Windows builds); the tree code recurses once per folder.
MAX_PATH_BYTES = 4096
MAX_PATH_DEPTH = 256


def check_name(name: str, what: str) -> str:
    """Return `name` if it is a valid Hub user/org/repo name. Raises InvalidInputError otherwise."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name or "--" in name:
        raise InvalidInputError(
            f"Invalid {what} {name!r}: use letters, digits, '-', '_' and '.', at most 96 characters, "
            "no '--' or '..', not starting or ending with '-' or '.'."
        )
    return name


def _shown(path: str) -> str:
    """`path` for a message: a path of thousands of characters is cut."""
    return repr(path) if len(path) <= 200 else repr(path[:200]) + f"... ({len(path)} characters)"


def check_path(path: str) -> str:
    """Return a normalized in-repo path, if git accepts it (`git/rules.py`).

    Raises InvalidInputError, naming the path, for absolute paths, `..`, `.`, empty segments, `.git` in
    any spelling a file system reads as `.git`, a path git cannot store (not UTF-8, over
    `MAX_PATH_BYTES`), or one deeper than `MAX_PATH_DEPTH` folders.
    """
    # A backslash is a character of a file name to git and to huggingface.co (which stores `a\\b`); only
    # git's own `.git` spellings through one are refused (`gitrules.is_dotgit`).
    if not isinstance(path, str) or not path or "\x00" in path:
        raise InvalidInputError(f"Invalid path in repo {_shown(path) if isinstance(path, str) else path!r}.")
    if path.startswith("..\\"):
        raise PathOutsideRepoError(f"Invalid path in repo {_shown(path)}: it starts outside the repo ('..').")
    try:
        size = len(path.encode())
    except UnicodeEncodeError:  # a lone surrogate from JSON ("\ud800"): not text git can store
        raise InvalidInputError(f"Invalid path in repo {_shown(path)}: it is not valid Unicode.") from None
    if path.startswith("/"):
        raise InvalidInputError(f"Invalid path in repo {_shown(path)}: paths are relative to the repo root.")
    parts = path.removeprefix("./").split("/")
    if size > MAX_PATH_BYTES or len(parts) > MAX_PATH_DEPTH:
        raise InvalidInputError(
            f"Invalid path in repo {_shown(path)}: paths are at most {MAX_PATH_BYTES} bytes and "
            f"{MAX_PATH_DEPTH} levels deep."
        )
    if any(p in ("", ".", "..") for p in parts):
        raise InvalidInputError(f"Invalid path in repo {_shown(path)}: no '..', '.' or empty segments.")
    for depth, part in enumerate(parts, start=1):
        check_component(part, is_folder=depth < len(parts), shown_path=_shown(path))
    return "/".join(parts)


def check_ref_name(name: str) -> str:
    """Return `name` if git accepts it as a branch or tag name. Raises InvalidInputError otherwise."""
    if (
        not isinstance(name, str)
        or not REF_NAME.match(name)
        or ".." in name
        or "//" in name
        or name.startswith(("/", "-", "."))
        or name.endswith(("/", ".", ".lock"))
        or COMMIT_SHA.match(name)
    ):
        raise InvalidInputError(f"Invalid branch or tag name {name!r}.")
    return name
