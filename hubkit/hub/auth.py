"""The token and client for one endpoint. The token is passed to the client only: never printed,
logged or written anywhere by hubkit."""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from huggingface_hub import HfApi, get_session, get_token

from hubkit.errors import AuthError

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def is_local_endpoint(endpoint: str) -> bool:
    """True for a Hub served on this machine (`hubkit hub serve`), which may run without tokens."""
    host = urlsplit(endpoint).hostname or ""
    return host in _LOOPBACK_HOSTS or host.startswith("127.")


def resolve_token(endpoint: str, *, required: bool = True) -> str | None:
    """The token for `endpoint`: `HF_TOKEN`, else the one stored by `hf auth login`; None for a local Hub
    without one (it answers 401 if it wants one, which `hubkit.publish.commit` reports as an `AuthError`).
    `required=False` (a dry run, which sends nothing) does not refuse a missing token for a remote Hub.

    Raises:
        AuthError: no token for a remote Hub.
    """
    token = get_token()
    if token is None and required and not is_local_endpoint(endpoint):
        raise AuthError(
            f"no Hugging Face token for {endpoint}: set HF_TOKEN or run `hf auth login`, then retry"
        )
    return token


def hub_client(endpoint: str, token: str | None, max_wait: float | None = None) -> HfApi:
    """A client bound to `endpoint` and `token`; opens no connection.

    The HTTP session all huggingface_hub calls share is built meanwhile on a thread of its own: its TLS
    context loads the CA bundle (some 35 ms, without holding the GIL), which then overlaps the adapters'
    checks instead of delaying the first request. `max_wait`: the longest the client waits for the Hub's
    API window to reset (`hubkit.hub.pacing`), when it says; None keeps what was set (at first the push's
    default).
    """
    from hubkit.hub.pacing import install

    install(max_wait)
    threading.Thread(target=get_session, name="hubkit-http-session", daemon=True).start()
    return HfApi(endpoint=endpoint, token=token if token is not None else False)


def token_owner(api: HfApi) -> str:
    """The account the client's token belongs to (the default owner of a release's repos).

    Raises:
        HubkitError: the Hub refuses the token or cannot be reached (`hubkit.hub.failures`).
    """
    from hubkit.hub.failures import hub_errors

    with hub_errors("your account", api.endpoint):
        return api.whoami()["name"]
