"""A bandwidth-limited link in front of a local Hub: a TCP proxy on 127.0.0.1 that passes at most
`--rate` bytes per second each way (every connection shares the two directions, as on one link).

    .venv/bin/python bench/throttle.py --upstream http://127.0.0.1:PORT --rate 100e6

prints the proxy's endpoint (``http://127.0.0.1:PORT2``) on its first line, then forwards until it is
ended. With ``--count FILE`` it keeps FILE holding the bytes passed so far each way (`{"up": N, "down": N}`,
rewritten every 0.1 s): what a benchmark reads as the bytes a client actually sent. The local Hub names whatever address a client reached it by (its Host header) in the URLs it
hands out, so LFS uploads come back through the proxy too. Runs in its own process: the copying and
the pacing cost a benchmarked push none of its interpreter.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

CHUNK = 64 * 1024
# Bytes a direction may send at once above its rate: a few chunks, as a link's buffers let through.
BURST = 4 * CHUNK


class Pacer:
    """One direction of the link: `take(n)` returns once `n` more bytes fit under `rate` bytes per second.

    A virtual clock: each send books the time its bytes take at `rate` after the previous booking (an idle
    link saves up at most `BURST` bytes' worth) and waits until its booking ends.
    """

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.passed = 0
        self._booked_until = time.monotonic()
        self._lock = threading.Lock()

    def take(self, n: int) -> None:
        with self._lock:
            self.passed += n
            now = time.monotonic()
            self._booked_until = max(self._booked_until, now - BURST / self.rate) + n / self.rate
            wait = self._booked_until - now
        if wait > 0:
            time.sleep(wait)


def pump(source: socket.socket, target: socket.socket, pacer: Pacer) -> None:
    """Copy `source` to `target` through `pacer` until `source` ends; then end `target`'s sending side."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    try:
        while n := source.recv_into(buffer):
            pacer.take(n)
            target.sendall(view[:n])
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def serve(listener: socket.socket, upstream: tuple[str, int], up: Pacer, down: Pacer) -> None:
    while True:
        client, _ = listener.accept()
        try:
            server = socket.create_connection(upstream)
        except OSError:
            client.close()
            continue
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def both(client: socket.socket = client, server: socket.socket = server) -> None:
            ups = threading.Thread(target=pump, args=(client, server, up), daemon=True)
            ups.start()
            pump(server, client, down)
            ups.join()
            client.close()
            server.close()

        threading.Thread(target=both, daemon=True).start()


def keep_count(path: Path, up: Pacer, down: Pacer) -> None:
    while True:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"up": up.passed, "down": down.passed}))
        tmp.replace(path)
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--upstream", required=True, help="the Hub's endpoint, http://HOST:PORT")
    parser.add_argument("--rate", type=float, required=True, help="bytes per second, each way")
    parser.add_argument("--count", type=Path, default=None, help="keep this file holding the bytes passed")
    args = parser.parse_args()
    target = urlsplit(args.upstream)
    if target.scheme != "http" or not target.hostname or not target.port:
        raise SystemExit(f"--upstream must be http://HOST:PORT, not {args.upstream!r}")
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{listener.getsockname()[1]}", flush=True)
    sys.stdout.close()
    up, down = Pacer(args.rate), Pacer(args.rate)
    if args.count is not None:
        threading.Thread(target=keep_count, args=(args.count, up, down), daemon=True).start()
    serve(listener, (target.hostname, target.port), up, down)


if __name__ == "__main__":
    main()
