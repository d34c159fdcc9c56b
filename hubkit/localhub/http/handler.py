"""The socket side: turn an HTTP/1.1 request into a `Request`, send back a `Response`."""

from __future__ import annotations

import logging
import socket
import struct
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

from hubkit.localhub.http import errors
from hubkit.localhub.http.guards import HOST_HEADER
from hubkit.localhub.http.hooks import AbortConnection
from hubkit.localhub.http.messages import Body, Request, Response
from hubkit.localhub.http.routes import dispatch

logger = logging.getLogger(__name__)
# How long, and how much, a refused request's unread body is drained before its connection closes.
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 64 << 20


class HubRequestHandler(BaseHTTPRequestHandler):
    """One keep-alive connection. `self.server` is a `HubHTTPServer` (it has `context`, `hosts` and
    `request_log`)."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY each small answer waits ~40 ms
    # for the client's delayed ACK.
    disable_nagle_algorithm = True
    # Seconds a connection may stall mid-request before it is dropped (a stalled upload counts as truncated).
    timeout = 120

    def do_GET(self) -> None:
        self._handle()

    # OPTIONS (a CORS preflight) gets a 404 like any unknown route, with no Access-Control-Allow-* header:
    # a page's cross-origin request with a token or a JSON body is never sent.
    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _handle(self) -> None:
        raw_path, _, query = self.path.partition("?")
        body = Body(self.rfile, self.headers)
        request = Request(
            method=self.command,
            segments=[s for s in raw_path.split("/") if s],
            query=parse_qs(query, keep_blank_values=True),
            headers=self.headers,
            body=body,
            base_url=self._base_url(),
            client=str(self.client_address[0]),
        )
        try:
            response = dispatch(self.server.context, request, self.server.hosts)
        except AbortConnection:
            self._drop()
            self.server.request_log.append((self.command, raw_path, 0))
            return
        except Exception:
            # A bug in a handler must not take the server down: log it with its traceback, answer 500.
            logger.exception("local Hub failed on %s %s", self.command, raw_path)
            response = errors.HubHTTPError(
                500, "Internal error in the local Hub (see its log)."
            ).to_response()
        unread = not body.finished  # refused before (or while) reading it: the connection cannot be reused
        if unread:
            self.close_connection = True
            response.headers["Connection"] = "close"
        self.server.request_log.append((self.command, raw_path, response.status))
        try:
            self._send(response)
            if unread:
                self._linger()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _linger(self) -> None:
        """After refusing a body unread, let the client read the answer before the connection closes.

        Closing a socket with unread bytes in it sends a reset, and a client still sending its body then
        loses the answer it had not read yet. So stop sending, and read and drop what keeps arriving, for
        a bounded time and amount (nothing is kept: memory stays flat whatever the client sends).
        """
        deadline = time.monotonic() + _LINGER_SECONDS
        dropped = 0
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(_LINGER_SECONDS)
            while dropped < _LINGER_BYTES and time.monotonic() < deadline:
                block = self.connection.recv(1 << 16)
                if not block:
                    break
                dropped += len(block)
        except OSError:  # the client is gone already
            pass

    def _base_url(self) -> str:
        """Where the client reached us: URLs in answers name it, so a Hub bound to 0.0.0.0 hands out
        addresses that work for the client (a malformed Host falls back to the server's own endpoint)."""
        host = self.headers.get("Host", "")
        return f"http://{host}" if HOST_HEADER.match(host) else self.server.context.endpoint

    def _drop(self) -> None:
        """Cut the connection with no answer: a reset, as when a proxy or the network fails mid-request."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(response.content_length))
        self.end_headers()
        if self.command == "HEAD":
            return
        if response.file is None:
            self.wfile.write(response.body)
            return
        with response.file.open("rb") as f:
            # Zero-copy from the file to the socket (os.sendfile where the platform has it).
            self.connection.sendfile(f, response.offset, response.length)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # The path only: a query string may hold a URL's signature; headers (tokens) are never logged.
        logger.debug('%s "%s %s" %s', self.address_string(), self.command, self.path.partition("?")[0], code)

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)
