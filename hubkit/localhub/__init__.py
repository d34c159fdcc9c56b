"""A Hub-compatible HTTP server for tests, demos, offline work and teams (standard library, dulwich, and
blake3 and lz4 for Xet).

Repositories are bare git repositories (`git fsck` clean, clonable, packed or loose: `git gc` is
safe); large files are Git LFS objects. A commit's branch moves last, atomically, so a killed server
restarts with every repo at its last complete commit; a full disk answers 507 and changes nothing.
The real `huggingface_hub` client (with hf_xet), transformers and peft talk to it through `HF_ENDPOINT`,
set before the client is imported (`use_local_hub` in `client_env`). Large files arrive through Xet, as on
huggingface.co (`xet/`), or through classic LFS from clients with `HF_HUB_DISABLE_XET=1`.

    with LocalHub(root) as hub:               # or: hubkit hub serve --root DIR
        use_local_hub(hub.endpoint, hf_home)

Where it differs from huggingface.co, knowingly:
- Xet without `/v2/` reconstructions or shards (the client falls back to `/v1/`); a Xet upload is also
  kept whole as the repo's LFS object (huggingface.co rebuilds it on the fly);
- accounts are a users file (tokens → user, orgs, read-only), or one administrator's token, or
  none (then loopback only, and any token writes): no fine-grained scopes; a gated repo's authorized list
  is its namespace's members, with no access requests (`accounts/access.py`);
- commits go to branches and `refs/pr/N` only; there is no discussions API;
- tree listings are not paginated (`expand` adds `lastCommit` only); `.gitattributes` matching is an
  fnmatch approximation of git's rules;
- Spaces never run: their runtime stage only says whether the SDK's app file exists.

Every request is bounded and checked before a handler runs (`http/guards.py`): its Host must name this
server, its body have the route's type and fit its limit; writes need a token even on an open Hub, and
signed URLs expire and serve only while their signer keeps access (`accounts/signed_urls.py`). What git
refuses in a tree is refused in a commit (`git/rules.py`, `git/modules.py`).

Layout, by layer, each package's docstring saying what it holds: `http/` (requests, errors, guards, routes,
the server), `api/` (one module per endpoint family), `accounts/`, `storage/`, `git/`, `xet/`; and
`client_env`, the other side, pointing a client at a Hub.
"""

from hubkit.localhub.http.context import HubSettings
from hubkit.localhub.http.server import LocalHub

__all__ = ["HubSettings", "LocalHub"]
