"""The Hub's error responses, a named builder for each answered in several places.

huggingface_hub maps the `X-Error-Code` header to its exception classes (`RepoNotFound` →
RepositoryNotFoundError, `RevisionNotFound` → RevisionNotFoundError, `EntryNotFound` →
RemoteEntryNotFoundError), so each builder sets the code the real Hub sends.
"""

from __future__ import annotations

import re
from typing import Any

from hubkit.localhub.http.messages import Response, json_response
from hubkit.localhub.storage import exceptions as storage

_NOT_PRINTABLE = re.compile(r"[^\x20-\x7e]")


class HubHTTPError(Exception):
    """An error answer; raised by handlers, turned into a response by the dispatcher."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
        header_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})
        if code:
            self.headers["X-Error-Code"] = code
        # Header values must be printable ASCII: a control character (or CR LF) from a URL must not
        # break, or inject into, the response headers.
        self.headers["X-Error-Message"] = _NOT_PRINTABLE.sub("?", header_message or message)
        self.extra = extra or {}

    def to_response(self) -> Response:
        return json_response({"error": self.message, **self.extra}, self.status, self.headers)


def bad_request(message: str) -> HubHTTPError:
    return HubHTTPError(400, message)


def unauthorized(hint: str | None = None) -> HubHTTPError:
    # The client maps any other X-Error-Message of a 401 on a repo URL to "repository not found": the
    # header keeps the Hub's words, and the body says what to do.
    words = "Invalid credentials in Authorization header"
    return HubHTTPError(401, f"{words}: {hint}" if hint else words, header_message=words)


def forbidden(message: str) -> HubHTTPError:
    return HubHTTPError(403, message)


def not_found(message: str) -> HubHTTPError:
    return HubHTTPError(404, message)


def repo_not_found(message: str, status: int = 404) -> HubHTTPError:
    # The Hub answers 401 to anonymous callers (the repo may exist, private), 404 to others.
    return HubHTTPError(status, message, code="RepoNotFound")


def gated(status: int, message: str) -> HubHTTPError:
    return HubHTTPError(status, message, code="GatedRepo")


def payload_too_large(message: str) -> HubHTTPError:
    return HubHTTPError(413, message)


def unsupported_media_type(message: str) -> HubHTTPError:
    return HubHTTPError(415, message)


def conflict(message: str, **extra: Any) -> HubHTTPError:
    return HubHTTPError(409, message, extra=extra)


def range_not_satisfiable(size: int) -> HubHTTPError:
    return HubHTTPError(416, "Requested range not satisfiable", headers={"Content-Range": f"bytes */{size}"})


def from_storage(error: storage.StorageError) -> HubHTTPError:
    """The Hub's answer to a refusal by the repository store."""
    message = str(error)
    match error:
        case storage.CollectionNotFoundError():
            return not_found(message)
        case storage.CollectionConflictError(slug=slug):
            # The client's create_collection(exists_ok=True) reads the existing one's slug from the 409.
            return conflict(message, **({"slug": slug} if slug else {}))
        case storage.RepoNotFoundError():
            return repo_not_found(message)
        case storage.RevisionNotFoundError():
            return HubHTTPError(404, message, code="RevisionNotFound")
        case storage.EntryNotFoundError():
            # With X-Repo-Commit the client caches the miss under `.no_exist/<commit>/`.
            headers = {"X-Repo-Commit": error.commit} if error.commit else {}
            return HubHTTPError(404, message, code="EntryNotFound", headers=headers)
        case storage.RepoExistsError() | storage.RefExistsError():
            return conflict(message)
        case storage.ParentCommitMismatchError():
            return HubHTTPError(412, message)
        case storage.TooLargeError():
            return payload_too_large(message)
        case storage.PathOutsideRepoError():
            return HubHTTPError(422, message)
        case _:
            return bad_request(message)
