"""What every request must pass before a handler runs: its Host, its content type and its body's size.

Any web page the user opens can send requests to a server on 127.0.0.1. It cannot read the answers
(no `Access-Control-Allow-*` header is ever sent), but without these rules it could still act:

- DNS rebinding: a page on `evil.example` whose name then resolves to 127.0.0.1 reads the Hub as its own
  origin. Its requests name `evil.example` in `Host`, so every request's Host must name the address the
  server listens on (or `localhost`, or a name given with `hubkit hub serve --allowed-host`): 421.
- A form or `fetch(..., {mode: "no-cors"})` sends a POST whose body is `text/plain`, form data or
  multipart, and no Authorization header: JSON endpoints take only JSON (415), and writes need an
  Authorization header even on an open Hub (`accounts/access.py`).
- A body is read only up to its route's limit, and refused from its Content-Length before the first byte
  (413): a JSON API takes `max_json_body`, a commit `max_commit_body`, an LFS upload its object's size,
  a Xet xorb or shard 65 MiB (each format then checks its own bound).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from hubkit.localhub.http import errors
from hubkit.localhub.http.context import HubSettings
from hubkit.localhub.http.messages import Request
from hubkit.localhub.xet.xorb import MAX_XORB_SIZE

# host[:port], or [ipv6][:port]: nothing that could break out of a URL or a header.
HOST_HEADER = re.compile(r"^(?:\[([0-9A-Fa-f:.]{2,45})\]|([A-Za-z0-9.-]{1,253}))(?::[0-9]{1,5})?$")
_WILDCARDS = ("", "0.0.0.0", "::")
_FORM = "application/x-www-form-urlencoded"

# The kinds of request body a route takes.
NO_BODY = "none"  # GET, and writes whose arguments are all in the URL
JSON = "json"  # a JSON object: the repo, branch, tag, settings and LFS batch APIs
COMMIT = "commit"  # NDJSON: a commit, regular files inside it
JSON_OR_FORM = "json-or-form"  # paths-info: the client sends a form
LFS_CONTENT = "lfs"  # an LFS object, or one part of it: raw bytes
XET_OBJECT = "xet"  # a Xet xorb or shard: raw bytes, 64 MiB by the spec (a xorb a little more, see xet_xorb)


@dataclass(frozen=True)
class HostRule:
    """Which names a request's Host may give for one listening socket."""

    names: frozenset[str]  # host names (lowercase) and IP addresses
    # Every IP literal is accepted (a socket bound to every interface). An address is no rebinding: a page
    # whose origin is an address reaches that address, not this server.
    any_address: bool

    @classmethod
    def for_address(cls, bound: str, extra: Iterable[str] = ()) -> HostRule:
        """The rule for a socket bound to `bound` (an address, `localhost`, or a wildcard), plus `extra` names."""
        wildcard = bound in _WILDCARDS
        own = socket.gethostname().lower() if wildcard else _normalized(bound)
        names = {_normalized(name.rstrip(".")) for name in extra} | {"localhost", own}
        return cls(frozenset(names), wildcard)

    def allows(self, host: str | None) -> bool:
        """Whether a Host header value names this server."""
        match = HOST_HEADER.match(host or "")
        if match is None:
            return False
        name = _normalized((match.group(1) or match.group(2)).removesuffix("."))
        return name in self.names or (self.any_address and _is_ip(name))


def _normalized(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name.lower()


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def check_host(rule: HostRule, host: str | None) -> None:
    """Refuse a request whose Host names another server (a page's DNS rebinding): HubHTTPError 421, or
    400 without a Host (RFC 9112 §3.2)."""
    if host is None:
        raise errors.bad_request("A request needs a Host header naming this local Hub.")
    if not rule.allows(host):
        # RFC 9110 §15.5.20: a server that will not answer for the authority the request names.
        raise errors.HubHTTPError(
            421,
            f"This local Hub does not answer for the host {host!r}: use its address, or start it with "
            "--allowed-host NAME for a name that reaches it.",
        )


def _media_type(req: Request) -> str:
    return (req.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()


def _is_json(media_type: str) -> bool:
    # application/json, application/x-ndjson, application/vnd.git-lfs+json: none of them a page can send
    # without the browser first asking (a CORS preflight, which this server never allows).
    return media_type in ("application/json", "application/x-ndjson") or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def check_body(settings: HubSettings, req: Request, kind: str) -> None:
    """Refuse a body of unknown length (400), of the wrong type (415) or over its route's limit (413,
    TooLargeError) before any of it is read. The limit stays set on the body: a chunked body is cut off
    (413) as soon as it passes it."""
    body = req.body
    if not body.valid_length:
        raise errors.bad_request("Invalid Content-Length or Transfer-Encoding header.")
    media_type = _media_type(req)
    if not body.empty and kind in (JSON, COMMIT) and not _is_json(media_type):
        raise errors.unsupported_media_type(
            f"This endpoint takes a JSON body (Content-Type: application/json), not {media_type or 'none'}."
        )
    if not body.empty and kind == JSON_OR_FORM and not (_is_json(media_type) or media_type == _FORM):
        raise errors.unsupported_media_type(
            f"This endpoint takes JSON or a form, not {media_type or 'none'}."
        )
    limits = {
        COMMIT: settings.max_commit_body,
        LFS_CONTENT: settings.max_lfs_size,
        XET_OBJECT: MAX_XORB_SIZE,
    }
    body.limit_to(limits.get(kind, settings.max_json_body))
