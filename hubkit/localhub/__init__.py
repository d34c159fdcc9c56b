"""A Hub-compatible HTTP server for tests, demos and offline work (standard library only).

Repositories are bare git repositories (`git fsck` clean, clonable); large files are Git LFS
objects. The real `huggingface_hub` client, transformers and peft talk to it through
`HF_ENDPOINT` (with `HF_HUB_DISABLE_XET=1`, both set before the client is imported:
`hubkit.localhub.client_env.use_local_hub` does it).

    with LocalHub(root) as hub:               # or: hubkit hub serve --root DIR
        use_local_hub(hub.endpoint, hf_home)

Where it differs from huggingface.co, knowingly:
- no Xet: uploads take the LFS batch path (multipart above `HubSettings.multipart_threshold`);
- one token (or none) instead of accounts, orgs, scopes and gated repos; a private repo is hidden
  (404 RepoNotFound) from callers without the token;
- commits go to branches and `refs/pr/N` only; there is no discussions API;
- tree listings are not paginated and carry no `lastCommit`; `.gitattributes` matching is an
  fnmatch approximation of git's rules;
- Spaces never run: their runtime stage only says whether the SDK's app file exists.

Layout: `names` (what is a valid name or path), `gitstore` and `lfs` (objects on disk), `repos`
(repositories, commits, refs), `api_*` (one handler per endpoint), `routes` (URL → handler, auth,
errors), `handler` and `server` (sockets, threads, start/stop).
"""

from hubkit.localhub.context import HubSettings
from hubkit.localhub.server import LocalHub

__all__ = ["HubSettings", "LocalHub"]
