"""Who sent a request, as the access rules (`access.py`) decided it; handlers read it from the request."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """Who sent a request. `name` is None for an anonymous caller.

    `credential` names the token the request carried, as the URLs signed for it record their signer
    (an opaque id, not the token); None for a request without one, which never writes.
    """

    name: str | None
    orgs: tuple[str, ...] = ()
    can_write: bool = False
    admin: bool = False  # reads and writes every namespace
    credential: str | None = None
    plan: str = "free"  # the account's plan, for its quotas (`limits.py`)

    def owns(self, namespace: str) -> bool:
        """Whether the caller may see private repos of `namespace` (and write there, with a write token)."""
        return self.admin or (self.name is not None and (namespace == self.name or namespace in self.orgs))


ANONYMOUS = Caller(None)
