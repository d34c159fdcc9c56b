"""What storage refuses, in storage terms. The HTTP layer maps each to the Hub's status and X-Error-Code."""


class StorageError(Exception):
    """Base of every refusal by the repository store."""


class InvalidInputError(StorageError):
    """A malformed repo id, path, oid, revision name or payload (HTTP 400)."""


class RepoNotFoundError(StorageError):
    """No such repository (HTTP 404, RepoNotFound)."""


class RepoExistsError(StorageError):
    """The repository already exists (HTTP 409)."""


class RevisionNotFoundError(StorageError):
    """No branch, tag or commit of that name (HTTP 404, RevisionNotFound)."""


class EntryNotFoundError(StorageError):
    """No file at that path in that revision (HTTP 404, EntryNotFound)."""

    def __init__(self, message: str, commit: str | None = None) -> None:
        super().__init__(message)
        self.commit = commit


class RefExistsError(StorageError):
    """A branch or tag of that name already exists (HTTP 409)."""


class ParentCommitMismatchError(StorageError):
    """The branch head moved away from the commit the client based its change on (HTTP 412)."""


class CollectionNotFoundError(StorageError):
    """No collection of that namespace and id, or no such item in it (HTTP 404)."""


class CollectionConflictError(StorageError):
    """The namespace has a collection of that title (its `slug`), or the collection has that item (HTTP 409)."""

    def __init__(self, message: str, slug: str | None = None) -> None:
        super().__init__(message)
        self.slug = slug


class RootInUseError(Exception):
    """Another process serves this storage root (not a request's fault: the server does not start)."""


class TooLargeError(InvalidInputError):
    """A request body, or an LFS object, over the server's limit (HTTP 413)."""


class PathOutsideRepoError(InvalidInputError):
    """A path that starts by climbing out of the repo through a backslash, `..\\x` (HTTP 422, as on the Hub)."""
