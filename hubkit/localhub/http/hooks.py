"""Points where a program that embeds the local Hub steps into its requests (`LocalHub(hooks=...)`).

`HubHooks` does nothing at each point; a subclass overrides the ones it needs. A hook may refuse the
request by raising `errors.HubHTTPError` (answered as any refusal), or cut its connection with no answer
by raising `AbortConnection`, as a failing proxy or network does. Hooks run on the request's thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hubkit.localhub.storage.repos import Operation, Repo


class AbortConnection(Exception):
    """Raised by a hook to cut the client's connection without an answer (a reset)."""


class HubHooks:
    """The no-op hooks every Hub has unless given others."""

    def upload(self, body: Iterator[bytes], size: int) -> Iterator[bytes]:
        """Called as an upload's body (an LFS object or part, a Xet xorb; `size` bytes) is about to be
        stored; returns the body to store (here `body` itself)."""
        return body

    def commit(self, repo: Repo, operations: Sequence[Operation]) -> None:
        """Called once a commit to `repo` has passed its checks, before any of it is written."""

    def ref_update(self, repo: Repo) -> None:
        """Called once a commit's objects are written, before its branch moves."""
