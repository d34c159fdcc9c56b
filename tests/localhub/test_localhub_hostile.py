"""A hostile client against `hubkit hub serve` in its own process: every attack is refused with the right
status, the server's memory stays flat (its peak RSS, from /proc), it keeps answering, and every repo stays
`git fsck --strict` clean. The attacks a web page makes run in Chromium (test_localhub_browser.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fixtures_hub import serve_hub
from helpers import assert_hub_fsck_clean
from huggingface_hub import HfApi

from hubkit.localhub import HubSettings, LocalHub

MiB = 1024 * 1024
# What an attack may add to the server's peak memory (a request it would have buffered whole grew it by
# some 500 MiB per 256 MiB body).
MAX_GROWTH = 150 * MiB
TOKEN = {"authorization": "Bearer any"}  # an open Hub writes with any token
ALICE = {"Authorization": "Bearer hf_alice"}
CHUNKED = {"Transfer-Encoding": "chunked"}
COMMIT_URL = "/api/models/me/target/commit/main"
BATCH_URL = "/me/target.git/info/lfs/objects/batch"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def error(self) -> str:
        return json.loads(self.body)["error"]


def request(
    endpoint: str,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes | Iterable[bytes] = b"",
    host: str | None = None,
) -> Answer:
    """One request on a raw socket: the head, then the body sent on another thread while the answer is
    read (a server that answers before reading, then closes, does not block the test)."""
    url = urlsplit(endpoint)
    headers = {"Host": host or url.netloc, **(headers or {})}
    if isinstance(body, bytes):
        headers.setdefault("Content-Length", str(len(body)))
        body = [body]
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock = socket.create_connection((url.hostname, url.port), timeout=60)

    def send() -> None:
        try:
            for block in body:
                sock.sendall(block)
        except OSError:  # the server closed the connection: it refused the body
            pass

    try:
        sock.sendall(head.encode())
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        answer = _read_answer(sock.makefile("rb"))
        sender.join(timeout=60)
        return answer
    finally:
        sock.close()


def post(
    endpoint: str,
    path: str,
    body: bytes | Iterable[bytes],
    media: str = "application/json",
    token: bool = True,
    **headers: str,
) -> Answer:
    """A POST of `body` as `media`, with a token (any: the Hub is open) unless `token` is False."""
    return request(
        endpoint, "POST", path, {"Content-Type": media, **(TOKEN if token else {}), **headers}, body
    )


def _read_answer(stream) -> Answer:
    status = int(stream.readline().split()[1])
    headers = {}
    while (line := stream.readline()) not in (b"\r\n", b""):
        key, _, value = line.decode().partition(":")
        headers[key.strip().lower()] = value.strip()
    return Answer(status, headers, stream.read(int(headers.get("content-length", 0))))


def chunked(blocks: Iterable[bytes]) -> Iterator[bytes]:
    for block in blocks:
        yield f"{len(block):x}\r\n".encode() + block + b"\r\n"
    yield b"0\r\n\r\n"


class PeakMemory:
    """The growth of a process's peak RSS (VmHWM) over its RSS when `reset` was called."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.base = 0

    def _kib(self, field: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field} for process {self.pid}")

    def reset(self) -> None:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # the peak starts again from the current RSS
        self.base = self._kib("VmRSS")

    @property
    def growth(self) -> int:
        return self._kib("VmHWM") - self.base


@dataclass
class Served:
    process: subprocess.Popen
    endpoint: str
    root: Path
    memory: PeakMemory

    @property
    def api(self) -> HfApi:
        return HfApi(endpoint=self.endpoint, token="any")


def assert_healthy(served: Served, repo_id: str = "me/target", headers: dict[str, str] | None = None) -> None:
    """The server still answers, and git finds nothing wrong in any repository."""
    assert served.process.poll() is None
    assert request(served.endpoint, "GET", f"/api/models/{repo_id}", headers).status == 200
    assert assert_hub_fsck_clean(served.root) > 0


def _serve(root: Path, *extra: str) -> Served:
    process, endpoint = serve_hub(root, *extra)
    served = Served(process, endpoint, root, PeakMemory(process.pid))
    return served


def _stop(served: Served) -> None:
    served.process.terminate()
    served.process.wait(timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """An open `hubkit hub serve` (no --token) holding me/target: a .gitattributes, a file, an LFS file."""
    served = _serve(tmp_path_factory.mktemp("hostile") / "hub")
    try:
        served.api.create_repo("me/target")
        served.api.upload_file(path_or_fileobj=b"hello\n", path_in_repo="a.txt", repo_id="me/target")
        served.api.upload_file(path_or_fileobj=os.urandom(5000), path_in_repo="w.bin", repo_id="me/target")
        yield served
    finally:
        _stop(served)


def _head(served: Served) -> str:
    return served.api.model_info("me/target").sha


# --- another host name (DNS rebinding) -------------------------------------------------------------


def test_a_request_naming_another_host_is_refused(served):
    port = urlsplit(served.endpoint).port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", "[::2]", "a b"):
        answer = request(served.endpoint, "GET", "/api/models/me/target", host=host)
        assert answer.status == 421 and "does not answer for the host" in answer.error, host
        create = request(
            served.endpoint, "POST", "/api/repos/create", {**TOKEN, "Content-Type": "application/json"},
            b'{"name": "rebound"}', host=host,
        )  # fmt: skip
        assert create.status == 421
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST"):
        assert request(served.endpoint, "GET", "/api/models/me/target", host=host).status == 200
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:  # no Host at all (HTTP/1.0)
        sock.sendall(b"GET /api/models/me/target HTTP/1.0\r\n\r\n")
        assert _read_answer(sock.makefile("rb")).status == 400
    assert not served.api.repo_exists("me/rebound")
    assert_healthy(served)


def test_a_name_given_with_allowed_host_is_accepted(tmp_path):
    settings = HubSettings(allowed_hosts=("hub.lab",))
    with LocalHub(tmp_path / "hub", settings=settings) as hub:
        port = urlsplit(hub.endpoint).port
        assert request(hub.endpoint, "GET", "/api/models", host=f"hub.lab:{port}").status == 200
        assert request(hub.endpoint, "GET", "/api/models", host=f"hub.lab.:{port}").status == 200
        assert request(hub.endpoint, "GET", "/api/models", host=f"other.lab:{port}").status == 421


# --- writes without a credential, and bodies that are not JSON --------------------------------------


def test_on_an_open_hub_a_write_without_a_token_is_refused(served):
    head = _head(served)
    delete = post(served.endpoint, "/api/repos/delete", b'{"name": "target"}', token=False)
    assert delete.status == 401 and "needs a token" in delete.error
    line = {"key": "file", "value": {"path": "x.txt", "content": "eA==", "encoding": "base64"}}
    commit = b'{"key": "header", "value": {"summary": "x"}}\n' + json.dumps(line).encode()
    assert post(served.endpoint, COMMIT_URL, commit, "application/x-ndjson", token=False).status == 401
    # The same commit as a page's no-cors request can send it: text/plain (the token would not help it).
    assert post(served.endpoint, COMMIT_URL, commit, "text/plain").status == 415
    for media_type in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"):
        assert post(served.endpoint, "/api/repos/delete", b'{"name": "target"}', media_type).status == 415
    assert _head(served) == head and served.api.repo_exists("me/target")
    preflight = request(served.endpoint, "OPTIONS", "/api/repos/delete").headers
    assert not [name for name in preflight if name.startswith("access-control-allow")]
    assert_healthy(served)


# --- bodies far over their route's limit --------------------------------------------------------------


def _json_blocks(total: int) -> Iterator[bytes]:
    """A `{"content": "aaa..."}` body of `total` bytes, 1 MiB at a time."""
    yield b'{"content": "'
    block = b"a" * MiB
    for _ in range(total // MiB - 1):
        yield block
    yield b'"}'


def test_a_huge_json_body_is_refused_before_it_is_read(served):
    size = 256 * MiB
    served.memory.reset()
    answer = post(
        served.endpoint,
        "/api/validate-yaml",
        _json_blocks(size),
        token=False,
        **{"Content-Length": str(size)},
    )
    assert answer.status == 413 and "at most" in answer.error and answer.headers["connection"] == "close"
    # Three at once, and chunked (no Content-Length: cut off once past the limit).
    answers: list[Answer] = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(
                post(
                    served.endpoint, "/api/validate-yaml", chunked(_json_blocks(size)), token=False, **CHUNKED
                )
            )
        )
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [a.status for a in answers] == [413, 413, 413]
    commit = post(
        served.endpoint, COMMIT_URL, b"", "application/x-ndjson", **{"Content-Length": str(1 << 40)}
    )
    assert commit.status == 413
    assert served.memory.growth < MAX_GROWTH, served.memory.growth / MiB
    assert_healthy(served)


def _batch(served: Served, objects: list[dict]) -> Answer:
    body = {"operation": "upload", "transfers": ["basic", "multipart"], "objects": objects}
    return post(served.endpoint, BATCH_URL, json.dumps(body).encode(), "application/vnd.git-lfs+json")


def test_an_lfs_batch_for_a_huge_object_is_refused_at_once(served):
    served.memory.reset()
    start = time.monotonic()
    answer = _batch(served, [{"oid": "a" * 64, "size": 2**60}])
    assert answer.status == 413 and "--max-lfs-size" in answer.error
    assert time.monotonic() - start < 10
    # Objects each within the limit, but too many parts in one answer.
    many = _batch(served, [{"oid": f"{n:064x}", "size": 50 * 1000**3} for n in range(10)])
    assert many.status == 413 and "fewer objects" in many.error
    # The largest object accepted: its parts are counted, each gets a URL.
    largest = _batch(served, [{"oid": "b" * 64, "size": 50 * 1000**3}])
    assert largest.status == 200
    header = json.loads(largest.body)["objects"][0]["actions"]["upload"]["header"]
    assert len(header) - 1 == -(-50 * 1000**3 // (16 * MiB))
    assert served.memory.growth < MAX_GROWTH, served.memory.growth / MiB
    assert_healthy(served)


def _part_urls(served: Served, data_size: int) -> tuple[str, dict]:
    oid = hashlib.sha256(os.urandom(32)).hexdigest()
    answer = _batch(served, [{"oid": oid, "size": data_size}])
    upload = json.loads(answer.body)["objects"][0]["actions"]["upload"]
    return oid, upload


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def test_an_oversized_part_is_refused_and_unfinished_uploads_are_removed_at_restart(tmp_path):
    served = _serve(tmp_path / "hub")
    try:
        served.api.create_repo("me/target")
        oid, upload = _part_urls(served, 100 * MiB)
        part_1 = _path(upload["header"]["1"])
        served.memory.reset()
        blocks = (b"\0" * MiB for _ in range(200))
        too_long = request(served.endpoint, "PUT", part_1, {"Content-Length": str(200 * MiB)}, blocks)
        assert too_long.status == 413 and "Part 1" in too_long.error
        cut = request(served.endpoint, "PUT", part_1, CHUNKED, chunked(b"\0" * MiB for _ in range(200)))
        assert cut.status == 413
        incomplete = served.root / "repos" / "models" / "me" / "target.git" / "lfs" / "incomplete" / oid
        assert (incomplete / "data").stat().st_size <= 16 * MiB  # what the cut-off part wrote, no more
        assert served.memory.growth < MAX_GROWTH, served.memory.growth / MiB
        fits = request(served.endpoint, "PUT", part_1, {}, b"\0" * (16 * MiB))
        assert fits.status == 200 and incomplete.is_dir()
        assert_healthy(served)
    finally:
        _stop(served)
    served = _serve(tmp_path / "hub")
    try:
        assert not incomplete.exists()  # its client is gone: removed at start
        assert_healthy(served)
    finally:
        _stop(served)


# --- paths and files git refuses ----------------------------------------------------------------------


def _commit(served: Served, path: str, content: bytes) -> Answer:
    header = {"key": "header", "value": {"summary": "attack"}}
    line = {"path": path, "content": base64.b64encode(content).decode(), "encoding": "base64"}
    body = (json.dumps(header) + "\n" + json.dumps({"key": "file", "value": line}) + "\n").encode()
    return post(served.endpoint, COMMIT_URL, body, "application/x-ndjson")


GITMODULES_UPLOAD_PACK = b'[submodule "x"]\n\tpath = x\n\turl = --upload-pack=touch$IFS/tmp/pwned\n'


@pytest.mark.parametrize(
    ("path", "content"),
    [
        (".GIT/config", b"[core]\n"),
        (".Git/hooks/post-checkout", b"#!/bin/sh\n"),
        ("git~1/config", b"[core]\n"),
        (".git./config", b"[core]\n"),
        (".git /config", b"[core]\n"),
        (".git::$INDEX_ALLOCATION/config", b"[core]\n"),
        ("a/\u200c.git/x", b"x"),
        ("a/.g\ufeffit/x", b"x"),
        ("GIT~1/x", b"x"),
        (".gitmodules", GITMODULES_UPLOAD_PACK),
        ("sub/.GITMODULES", GITMODULES_UPLOAD_PACK),
        (".gitmodules", b'[submodule "x"]\n\tpath = --x\n\turl = ./x\n'),
        (".gitmodules", b'[submodule "x"]\n\tupdate = !sh -c evil\n'),
        (".gitmodules", b'[submodule "../../x"]\n\turl = ./x\n'),
        (".gitmodules", b'[submodule "x"]\n\turl = "--upload-pack=x"\n'),
        (".gitmodules/x", b"x"),
        (".gitattributes", b"*.bin filter=lfs\n" + b"a" * 3000 + b"\n"),
    ],
)
def test_a_path_or_file_git_refuses_is_refused_with_the_path_named(served, path, content):
    head = _head(served)
    answer = _commit(served, path, content)
    assert answer.status == 400, answer
    assert path in answer.error or repr(path)[1:-1] in answer.error  # named (escaped when invisible)
    assert _head(served) == head
    assert_healthy(served)


def test_a_harmless_gitmodules_and_dotfiles_are_accepted(served):
    ok = b'[submodule "lib"]\n\tpath = lib\n\turl = https://example.com/lib.git\n'
    for path, content in [(".gitmodules", ok), ("a/.gitignore", b"*.tmp\n"), ("a/.github/x.yml", b"x: 1\n")]:
        assert _commit(served, path, content).status == 200, path
    assert_healthy(served)


# --- deep, huge and malformed inputs: 4xx, never a 500 ------------------------------------------------


def test_deep_and_malformed_inputs_answer_4xx_not_500(served):
    head = _head(served)
    deep_path = "/".join(["d"] * 1500) + "/x.txt"
    answer = _commit(served, deep_path, b"x")
    assert answer.status == 400 and "levels deep" in answer.error
    deep_json = b"[" * 200_000 + b"]" * 200_000
    for path, media_type in [
        ("/api/repos/create", "application/json"),
        ("/api/models/me/target/commit/main", "application/x-ndjson"),
        ("/api/models/me/target/paths-info/main", "application/json"),
        ("/me/target.git/info/lfs/objects/batch", "application/vnd.git-lfs+json"),
    ]:
        answer = post(served.endpoint, path, deep_json, media_type)
        assert answer.status == 400 and "nested too deeply" in answer.error, (path, answer)
    huge_chunk = post(served.endpoint, "/api/validate-yaml", [b"8000000000000000\r\n{}"], **CHUNKED)
    assert huge_chunk.status == 413
    for bad in (b"zz\r\n{}\r\n0\r\n\r\n", b"-1\r\n", b"1" * 40 + b"\r\n"):
        assert post(served.endpoint, "/api/validate-yaml", [bad], **CHUNKED).status == 400, bad
    for length in ("9" * 5000, "1, 2", "\u00b2"):
        assert (
            post(served.endpoint, "/api/validate-yaml", [b"{}"], **{"Content-Length": length}).status == 400
        )
    gzip = request(served.endpoint, "POST", "/api/validate-yaml", {"Transfer-Encoding": "gzip"}, [b"{}"])
    assert gzip.status == 400
    ranged = request(
        served.endpoint, "GET", "/me/target/resolve/main/a.txt", {"Range": f"bytes={'9' * 5000}-"}
    )
    assert ranged.status == 416
    surrogate = _commit(served, "\ud800.txt", b"x")
    assert surrogate.status == 400
    yaml_bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n---\n"
    validated = post(served.endpoint, "/api/validate-yaml", json.dumps({"content": yaml_bomb}).encode())
    assert validated.status == 400 and "aliases" in validated.body.decode()
    served.memory.reset()
    for items in (125_000, 500_000):  # within the metadata's size limit, past its count of values; past both
        flat = "---\ntags: [" + "0," * items + "0]\n---\n"
        big_yaml = post(served.endpoint, "/api/validate-yaml", json.dumps({"content": flat}).encode())
        assert big_yaml.status == 400 and "too large" in big_yaml.body.decode()
    assert served.memory.growth < MAX_GROWTH, served.memory.growth / MiB
    assert _head(served) == head
    assert_healthy(served)


BAD_PATHS = ("/abs/hubkit.json", "a/../hubkit.json", "a//hubkit.json", "./../x", "a/./b", "")


@pytest.mark.parametrize("path", BAD_PATHS)
@pytest.mark.parametrize("key", ["file", "lfsFile", "deletedFile", "deletedFolder"])
def test_every_commit_operation_refuses_a_path_git_refuses(served, key, path):
    # huggingface_hub strips a leading slash itself; a hostile client sends it as it is.
    head = _head(served)
    value = {"path": path, "content": "e30=", "encoding": "base64"}
    if key == "lfsFile":
        value = {"path": path, "algo": "sha256", "oid": "0" * 64, "size": 2}
    lines = [{"key": "header", "value": {"summary": "planted"}}, {"key": key, "value": value}]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    answer = post(served.endpoint, COMMIT_URL, body, media="application/x-ndjson")
    assert answer.status == 400, (answer.status, answer.body[:200])
    assert _head(served) == head


@pytest.mark.parametrize("path", BAD_PATHS)
def test_preupload_refuses_a_path_git_refuses(served, path):
    body = json.dumps({"files": [{"path": path, "size": 2, "sample": ""}]}).encode()
    answer = post(served.endpoint, "/api/models/me/target/preupload/main", body)
    assert answer.status == 400, (answer.status, answer.body[:200])
