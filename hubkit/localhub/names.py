"""What the Hub accepts as names: users, orgs and repos, in-repo paths, branches and tags, commit ids."""

from __future__ import annotations

import re

from hubkit.localhub.exceptions import InvalidInputError

# The Hub's rule for user, org and repo names.
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$")
REF_NAME = re.compile(r"^[A-Za-z0-9_.\-/]{1,200}$")
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
PR_REF = re.compile(r"^refs/pr/(\d+)$")


def check_name(name: str, what: str) -> str:
    """Return `name` if it is a valid Hub user/org/repo name. Raises InvalidInputError otherwise."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name or "--" in name:
        raise InvalidInputError(
            f"Invalid {what} {name!r}: use letters, digits, '-', '_' and '.', at most 96 characters, "
            "no '--' or '..', not starting or ending with '-' or '.'."
        )
    return name


def check_path(path: str) -> str:
    """Return a normalized in-repo path.

    Raises InvalidInputError for absolute paths, `..`, `.`, `.git` or empty segments.
    """
    if not isinstance(path, str) or not path or "\x00" in path or "\\" in path:
        raise InvalidInputError(f"Invalid path in repo {path!r}.")
    if path.startswith("/"):
        raise InvalidInputError(f"Invalid path in repo {path!r}: paths are relative to the repo root.")
    parts = path.removeprefix("./").split("/")
    if any(p in ("", ".", "..", ".git") for p in parts):
        raise InvalidInputError(f"Invalid path in repo {path!r}: no '..', '.', '.git' or empty segments.")
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
