"""Start and stop a local Hub: the API server, and a "CDN" for LFS downloads on 127.0.0.2.

huggingface_hub ≥2.2 follows a redirect only when it stays on the Hub's origin (scheme, host and
port), and 1.x compares host names only. Serving LFS objects from another loopback address keeps
the client's behaviour the same as against huggingface.co: it stops at the 302, reads
X-Linked-Etag/X-Linked-Size, then downloads from the CDN without the token.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import socketserver
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from hubkit.errors import LocalHubError
from hubkit.localhub.http.context import HubContext, HubSettings
from hubkit.localhub.http.guards import HostRule
from hubkit.localhub.http.handler import HubRequestHandler
from hubkit.localhub.http.hooks import HubHooks
from hubkit.localhub.storage.exceptions import RootInUseError
from hubkit.localhub.storage.root import RepoStore

logger = logging.getLogger(__name__)
CDN_HOST = "127.0.0.2"


class HubHTTPServer(ThreadingHTTPServer):
    """One listening socket; a thread per connection, all sharing the Hub's context and request log."""

    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        address: tuple[str, int],
        context: HubContext,
        request_log: list,
        extra_hosts: tuple[str, ...] = (),
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, HubRequestHandler)
        self.context = context
        self.request_log = request_log
        # The names a request's Host may give: the address asked for and the one bound (`localhost` binds
        # 127.0.0.1), and the names given with --allowed-host.
        bound = str(self.server_address[0])
        self.hosts = HostRule.for_address(address[0], (*extra_hosts, bound))
        self._connections: set[socket.socket] = set()

    def server_bind(self) -> None:
        # HTTPServer.server_bind also looks up the host's domain name (a DNS query): not needed here.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:
        self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:
        self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End the open keep-alive connections, so that a stopped Hub answers nothing more."""
        for connection in list(self._connections):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (only this machine can reach it)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def public_host(host: str) -> str:
    """The address to print for clients: the machine's name for a wildcard bind (0.0.0.0, ::)."""
    if host in ("", "0.0.0.0", "::"):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


class LocalHub:
    """A Hub-compatible server on a directory of bare git repositories (a context manager, or start/stop).

    Attributes:
        root: the storage directory (repos survive restarts on the same root).
        endpoint: the URL to use as HF_ENDPOINT, once started (for a Hub bound to 0.0.0.0 or ::, the
            machine's host name; answers name whatever address the client used, from its Host header).
        cdn_endpoint: where LFS downloads are redirected, or None when 127.0.0.2 could not be bound or
            the Hub listens on another address than loopback (LFS files are then served directly with a 200).
        request_log: (method, path, status) of every request answered, in order; the path is as
            sent (percent-encoded, without the query string), e.g. ("PUT", "/lfs-upload/...", 200);
            status 0 for a connection a hook cut (`hooks.AbortConnection`).
        uploads: (repo id, sha256, "lfs" or "xet") of every object an upload stored, in order: an LFS
            object once its bytes are in, a Xet file once a shard registered it.
        token: the administrator's token, or None (see `accounts/access.py` for who may do what).
        hooks: what steps into its uploads and commits (`hooks.py`; by default, nothing).
    """

    def __init__(
        self,
        root: Path | str,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        cdn: bool = True,
        settings: HubSettings | None = None,
        hooks: HubHooks | None = None,
    ) -> None:
        """`settings` for everything beyond the attributes. Raises ValueError for the token given twice."""
        self.root = Path(root)
        self.host, self.port = host, port
        self.settings = settings or HubSettings(token=token)
        if token and self.settings.token != token:
            raise ValueError("Pass the token either as `token` or in `settings`, not both.")
        self.token = self.settings.token
        self.hooks = hooks or HubHooks()
        self.use_cdn = cdn
        self.request_log: list[tuple[str, str, int]] = []
        self.uploads: list[tuple[str, str, str]] = []
        self.endpoint = ""
        self.cdn_endpoint: str | None = None
        self._servers: list[HubHTTPServer] = []
        self._store: RepoStore | None = None
        self._stopping = threading.Event()

    def start(self) -> LocalHub:
        """Bind the servers and serve from background threads. Refuses (LocalHubError) a non-loopback
        address without credentials, or a root another process serves."""
        if not is_loopback(self.host) and not self.settings.has_credentials:
            raise LocalHubError(
                f"Refusing to serve {self.host or 'every address'} without credentials (anyone reaching it "
                "could write): pass --token or --users FILE, or listen on 127.0.0.1."
            )
        store = RepoStore(self.root)
        try:
            store.open()
        except RootInUseError as e:
            raise LocalHubError(f"{e} Stop it first, or serve another --root.") from None
        context = HubContext(
            store, self.settings, hooks=self.hooks, secret=store.signing_key(), uploads=self.uploads
        )
        context.collections.remove_leftovers()
        try:
            api = HubHTTPServer(
                (self.host, self.port), context, self.request_log, self.settings.allowed_hosts
            )
        except OSError:
            store.close()
            raise
        self._store = store
        self._servers = [api]
        self.endpoint = context.endpoint = f"http://{public_host(self.host)}:{api.server_address[1]}"
        # A CDN on a loopback address only helps clients on this machine.
        if self.use_cdn and self.host in ("127.0.0.1", "localhost"):
            try:
                cdn = HubHTTPServer((CDN_HOST, 0), context, self.request_log)
            except OSError as e:
                logger.warning("No CDN on %s (%s): LFS files are served directly.", CDN_HOST, e)
            else:
                self._servers.append(cdn)
                self.cdn_endpoint = context.cdn_endpoint = f"http://{CDN_HOST}:{cdn.server_address[1]}"
        for server in self._servers:
            threading.Thread(
                target=server.serve_forever, name=f"localhub-{server.server_address}", daemon=True
            ).start()
        self._stopping.clear()
        threading.Thread(target=self._sweep_uploads, name="localhub-sweeper", daemon=True).start()
        logger.info("local Hub serving %s at %s", self.root, self.endpoint)
        return self

    def _sweep_uploads(self) -> None:
        """Remove the multipart uploads left unfinished for `settings.upload_timeout` seconds, until stopped."""
        timeout = self.settings.upload_timeout
        while not self._stopping.wait(max(1.0, min(60.0, timeout / 4))):
            store = self._store
            if store is not None:
                for path in store.remove_stale_uploads(timeout):
                    logger.info("local Hub: removed an unfinished upload, %s", path)

    def stop(self) -> None:
        """Stop serving and close the sockets."""
        self._stopping.set()
        for server in self._servers:
            server.shutdown()
            server.close_connections()
            server.server_close()
        self._servers = []
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
