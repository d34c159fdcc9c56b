"""Who may do what: tokens, users and organizations, and the Hub's rules for namespaces and private repos.

Three ways to run, from the server's settings:

- open (no token, no users file): every caller acts as the server's user and reads every namespace;
  with any token at all (the Authorization header a web page cannot send, `http/guards.py`) it also writes
  every namespace. The server then listens on loopback only (`http/server.py`).
- one token (`--token`): its holder is the server's user, an administrator who reads and writes
  every namespace; anyone may read public repos; any other token is refused (401).
- a users file (`--users FILE`, with or without `--token`): each token belongs to a user, who
  creates, writes and deletes under their own name and their organizations', and reads private repos
  there only; read-only tokens read what their user reads. The file, in TOML:

      [users.alice]
      tokens = ["hf_alice_token"]           # read and write
      read_tokens = ["hf_alice_read_token"] # read only
      orgs = ["lab"]
      plan = "pro"                          # free (default), pro, team or enterprise: its quotas

      [users.bob]
      tokens = ["sha256:<hex>"]             # a token may be given by its sha256 instead

Tokens are kept as sha256 digests and compared in constant time; they are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import tomllib
from dataclasses import dataclass
from pathlib import Path

from hubkit.localhub.accounts.identity import ANONYMOUS, Caller
from hubkit.localhub.accounts.limits import PLAN_NAMES
from hubkit.localhub.http import errors
from hubkit.localhub.storage.exceptions import InvalidInputError
from hubkit.localhub.storage.names import check_name


@dataclass(frozen=True)
class Account:
    """One token of the users file: its digest, whose it is, and whether it may write."""

    user: str
    orgs: tuple[str, ...]
    digest: bytes
    can_write: bool
    plan: str = "free"

    def __repr__(self) -> str:  # the digest stays out of logs and tracebacks
        return (
            f"Account(user={self.user!r}, orgs={self.orgs!r}, can_write={self.can_write}, plan={self.plan!r})"
        )


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _digest(entry: object, where: str) -> bytes:
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"{where}: each token must be a non-empty string.")
    if entry.startswith("sha256:"):
        try:
            digest = bytes.fromhex(entry.removeprefix("sha256:"))
        except ValueError:
            digest = b""
        if len(digest) != 32:
            raise ValueError(f"{where}: 'sha256:' must be followed by 64 hex digits.")
        return digest
    return token_digest(entry)


def load_users(path: Path) -> tuple[Account, ...]:
    """Read a users file (see the module docstring). Refuses (ValueError naming the file and the problem)
    unreadable TOML, an unknown key, a bad name, a token given twice, or a user and an organization of the
    same name."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"Cannot read the users file {path}: {e}") from None
    users = data.get("users")
    if set(data) - {"users"} or not isinstance(users, dict) or not users:
        raise ValueError(f"{path}: expected [users.NAME] tables and nothing else.")
    accounts: list[Account] = []
    for name, entry in users.items():
        where = f"{path}: [users.{name}]"
        if not isinstance(entry, dict) or set(entry) - {"tokens", "read_tokens", "orgs", "plan"}:
            raise ValueError(f"{where} may hold only tokens, read_tokens, orgs and plan.")
        plan = entry.get("plan", "free")
        if plan not in PLAN_NAMES:
            raise ValueError(f"{where}: plan must be one of {', '.join(PLAN_NAMES)}; got {plan!r}.")
        orgs = entry.get("orgs", [])
        tokens, read_tokens = entry.get("tokens", []), entry.get("read_tokens", [])
        if not all(isinstance(v, list) for v in (orgs, tokens, read_tokens)):
            raise ValueError(f"{where}: tokens, read_tokens and orgs are lists.")
        try:
            check_name(name, "user name")
            for org in orgs:
                check_name(org, "organization name")
        except InvalidInputError as e:
            raise ValueError(f"{where}: {e}") from None
        for token, can_write in [(t, True) for t in tokens] + [(t, False) for t in read_tokens]:
            accounts.append(Account(name, tuple(orgs), _digest(token, where), can_write, plan))
    if len({a.digest for a in accounts}) != len(accounts):
        raise ValueError(f"{path}: a token is listed twice.")
    clash = {a.user for a in accounts} & {org for a in accounts for org in a.orgs}
    if clash:
        raise ValueError(f"{path}: {sorted(clash)[0]!r} is both a user and an organization.")
    return tuple(accounts)


# The signer of URLs handed to a request without a token (see `AccessPolicy.signer`).
NO_TOKEN = "none"
# The signer of an open Hub's writers: their tokens are not checked, so they are not told apart.
OPEN_WRITER = "open"


class AccessPolicy:
    """Turns a request's Authorization header into a `Caller`, and says what that caller may do.

    The administrator's name and plan are every caller's on an open Hub; the plan is also organizations'.
    `secret` is the server's signing key: a caller's `credential` is an HMAC of its token's digest, so that
    a URL names its signer without revealing anything about the token.
    """

    def __init__(
        self,
        admin_name: str,
        admin_token: str | None,
        accounts: tuple[Account, ...],
        secret: bytes,
        admin_plan: str,
    ) -> None:
        self.open = admin_token is None and not accounts
        self._secret = secret
        self._admin_digest = token_digest(admin_token) if admin_token else None
        self._accounts = accounts
        admin_credential = OPEN_WRITER if self.open else self._credential(self._admin_digest)
        self.admin_plan = admin_plan
        self.admin = Caller(
            admin_name, can_write=True, admin=True, credential=admin_credential, plan=admin_plan
        )
        # On an open Hub, a request without an Authorization header reads everything and writes nothing:
        # a web page's no-cors request cannot send one, the huggingface_hub client always does.
        self._open_reader = Caller(admin_name, admin=True, plan=admin_plan)
        callers = [
            Caller(a.user, a.orgs, a.can_write, credential=self._credential(a.digest), plan=a.plan)
            for a in accounts
        ]
        self._callers = {caller.credential: caller for caller in callers}
        self._plans = {a.user: a.plan for a in accounts}

    def _credential(self, digest: bytes | None) -> str:
        if digest is None:
            return NO_TOKEN
        return hmac.new(self._secret, b"signer:" + digest, hashlib.sha256).hexdigest()[:32]

    def authenticate(self, authorization: str | None) -> Caller:
        """The caller a header names. Raises 401 for a token that is not known (as the Hub does)."""
        if self.open:
            return self.admin if authorization and authorization.strip() else self._open_reader
        if authorization is None:
            return ANONYMOUS
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise errors.unauthorized()
        digest = token_digest(token.strip())
        # Every known token is compared, each in constant time: the time taken says nothing of which matched.
        found = [a for a in self._accounts if hmac.compare_digest(a.digest, digest)]
        if self._admin_digest is not None and hmac.compare_digest(self._admin_digest, digest):
            return self.admin
        if not found:
            raise errors.unauthorized()
        return self._callers[self._credential(found[0].digest)]

    def plan_of(self, namespace: str) -> str:
        """The plan whose quotas a namespace's repositories count against (a user's own, else the
        administrator's: organizations and the administrator's namespace)."""
        return self._plans.get(namespace, self.admin_plan)

    @staticmethod
    def signer(caller: Caller) -> str:
        """What a URL signed for `caller` records of it (`caller_of` finds the caller again)."""
        return caller.credential or NO_TOKEN

    def caller_of(self, signer: str) -> Caller | None:
        """The caller a signed URL was made for, with the access it has now; None when its token is gone
        (removed from the users file, or the Hub restarted with other credentials)."""
        if signer == NO_TOKEN:
            return self._open_reader if self.open else ANONYMOUS
        if signer == self.admin.credential:
            return self.admin
        return self._callers.get(signer)

    def check_write(self, caller: Caller, namespace: str | None = None, action: str = "write to") -> None:
        """Refuse a write: 401 without a token, 403 for a read-only token or another's namespace."""
        if caller.credential is None:
            hint = "an open local Hub takes any token" if self.open else None
            raise errors.unauthorized(f"a write needs a token ({hint})" if hint else None)
        if not caller.can_write:
            raise errors.forbidden("This token is read-only: use a token with write access.")
        if namespace is not None and not caller.owns(namespace):
            raise errors.forbidden(f'You don\'t have the rights to {action} the namespace "{namespace}".')
