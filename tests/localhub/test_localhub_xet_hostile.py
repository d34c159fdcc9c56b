"""The local Hub's Xet CAS shared by several users, against what one of them may try: reading another
user's bytes through a signed URL of his own, registering his bytes under the sha256 of someone else's
file, and xorbs and shards that cost the server more than their size. The uploads and downloads are the
real huggingface_hub + hf_xet client's, each user on a machine (client cache) of their own; the hostile
parts are raw requests (`xet_wire.py`)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fixtures_hub import serve_hub
from helpers import team_settings
from test_localhub_hostile import PeakMemory
from xet_wire import Cas, build_xorb, file_hash, file_shard, shard

from hubkit.localhub import LocalHub
from hubkit.localhub.client_env import client_environment
from hubkit.localhub.xet.hashes import chunk_hash, hash_to_hex, merkle_root, verification_hash
from hubkit.localhub.xet.store import XetStore

MiB = 1024 * 1024
MAX_GROWTH = 200 * MiB  # what one hostile request may add to the server's peak RSS
MAX_SECONDS = 15.0  # ... and how long its answer may take (on a loaded 2-core machine)

_CLIENT = """
import sys
from huggingface_hub import HfApi, hf_hub_download
action, repo = sys.argv[1], sys.argv[2]
if action == "download":
    print(hf_hub_download(repo, sys.argv[3]))
else:
    api = HfApi()
    api.create_repo(repo, private=action == "upload-private", exist_ok=True)
    api.upload_folder(folder_path=sys.argv[3], repo_id=repo)
"""


def _client(hub: LocalHub, token: str, machine: Path, *args: str, xet: bool = True) -> str:
    """The real client on one user's machine (its own HF_HOME and Xet cache): upload a folder to a repo
    (`upload`, `upload-private`) or download a file (`download`, printing its path)."""
    env = {**os.environ, **client_environment(hub.endpoint, str(machine), token)}
    env.update(HF_XET_CACHE=str(machine / "xet"), HF_HUB_DISABLE_PROGRESS_BARS="1")
    env.pop("HF_HUB_CACHE", None)
    if not xet:
        env["HF_HUB_DISABLE_XET"] = "1"
    command = [sys.executable, "-c", _CLIENT, *args]
    return subprocess.run(command, env=env, check=True, timeout=300, capture_output=True, text=True).stdout


def _folder(path: Path, files: dict[str, bytes]) -> str:
    path.mkdir(parents=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    return str(path)


def _binary(size: int) -> bytes:
    """Random bytes the client uploads as LFS (through Xet) whatever they hold: a NUL in its sample."""
    return b"\0" + os.urandom(size - 1)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def team_hub(tmp_path: Path) -> Iterator[LocalHub]:
    with LocalHub(tmp_path / "hub", settings=team_settings(tmp_path)) as hub:
        yield hub


def test_a_signed_xorb_url_serves_only_the_bytes_of_the_callers_file(team_hub, tmp_path):
    """alice's client packs her private adapter and a public tokenizer in one xorb; bob, reading the
    public file, is handed URLs that serve its bytes and refuse every other byte of that xorb."""
    adapter, tokenizer = _binary(300_000), _binary(120_000)
    alice = tmp_path / "alice-machine"
    private = _folder(
        tmp_path / "private", {"adapter_model.safetensors": adapter, "tokenizer.json": tokenizer}
    )
    _client(team_hub, "hf_alice_write", alice, "upload-private", "alice/adapter", private)
    public = _folder(tmp_path / "public", {"tokenizer.json": tokenizer})
    _client(team_hub, "hf_alice_write", alice, "upload", "alice/base", public)
    store = XetStore(team_hub.root)
    public_file = store.file(store.file_of_object(_sha256(tokenizer)) or "")
    private_file = store.file(store.file_of_object(_sha256(adapter)) or "")
    assert public_file and private_file
    shared = {t[0] for t in public_file.terms} & {t[0] for t in private_file.terms}
    assert shared, "alice's client packed both files in one xorb, and her public upload dedups against it"

    bob = Cas(team_hub, "alice/base", scope="read", token="hf_bob_write")
    plan = bob.get(f"/v1/reconstructions/{public_file.file_hash}").json()
    adapter_pieces = [adapter[i : i + 64] for i in range(0, len(adapter), 4096)]
    for xorb_id in shared:
        size = store.xorb_file(xorb_id).stat().st_size
        for fetch in plan["fetch_info"][xorb_id]:
            first, last = fetch["url_range"]["start"], fetch["url_range"]["end"]
            own = httpx.get(fetch["url"], headers={"Range": f"bytes={first}-{last}"})
            assert own.status_code == 206 and len(own.content) == last - first + 1
            assert not any(piece in own.content for piece in adapter_pieces)
            outside = [f"bytes=0-{size - 1}", "bytes=0-", f"bytes=-{size}"]
            outside += [f"bytes=0-{first - 1}"] if first else []
            outside += [f"bytes={last + 1}-{size - 1}"] if last + 1 < size else []
            for asked in outside:
                answer = httpx.get(fetch["url"], headers={"Range": asked})
                assert answer.status_code == 416, (asked, answer.status_code)
                assert "serves bytes" in answer.json()["error"] and "\n" not in answer.json()["error"]
            widened = fetch["url"].replace(f"/{first}-{last}?", f"/0-{size - 1}?")
            assert widened != fetch["url"]
            assert httpx.get(widened, headers={"Range": f"bytes=0-{size - 1}"}).status_code == 403

    # The real client still downloads through those URLs, for bob as for alice.
    start = len(team_hub.request_log)
    got = _client(
        team_hub, "hf_bob_write", tmp_path / "bob-machine", "download", "alice/base", "tokenizer.json"
    )
    assert Path(got.strip()).read_bytes() == tokenizer
    assert [s for m, p, s in team_hub.request_log[start:] if "/xet/xorb-data/" in p] and all(
        s == 206 for m, p, s in team_hub.request_log[start:] if "/xet/xorb-data/" in p
    )
    got = _client(team_hub, "hf_alice_write", tmp_path / "alice-laptop", "download", "alice/adapter",
                  "adapter_model.safetensors")  # fmt: skip
    assert Path(got.strip()).read_bytes() == adapter


def test_bytes_claimed_under_another_files_sha256_are_refused(team_hub, tmp_path):
    """bob holds lab/base-model's public tokenizer in a repo of his (through classic LFS), then sends a
    shard that names his own bytes by its sha256: refused, and carol's download still gets the lab's."""
    tokenizer = _binary(50_000)
    files = _folder(tmp_path / "lab", {"tokenizer.json": tokenizer})
    _client(team_hub, "hf_carol_write", tmp_path / "carol-machine", "upload", "lab/base-model", files)
    resolve = f"{team_hub.endpoint}/lab/base-model/resolve/main/tokenizer.json"
    lab_file = httpx.head(resolve).headers["X-Xet-Hash"]
    _client(team_hub, "hf_bob_write", tmp_path / "bob-lfs", "upload", "bob/copy", files, xet=False)

    forged = os.urandom(len(tokenizer))
    xorb_id, body = build_xorb([forged])
    cas = Cas(team_hub, "bob/copy", token="hf_bob_write")
    assert cas.post(f"/v1/xorbs/default/{xorb_id}", body).status_code == 200  # his bytes, his hash
    claimed = hashlib.sha256(tokenizer).digest()
    for version in (1, 2):
        answer = cas.post(f"/v{version}/shards", file_shard(xorb_id, [forged], sha256=claimed))
        assert answer.status_code == 400 and "does not match its oid" in answer.json()["error"]
        assert "\n" not in answer.json()["error"]

    # The lab's bytes cut otherwise are his to register, but the file the lab's downloads go to stays.
    halves = [tokenizer[:25_000], tokenizer[25_000:]]
    halves_id, body = build_xorb(halves)
    assert cas.post(f"/v1/xorbs/default/{halves_id}", body).status_code == 200
    assert cas.post("/v1/shards", file_shard(halves_id, halves)).status_code == 200
    assert httpx.head(resolve).headers["X-Xet-Hash"] == lab_file
    forged_file = hash_to_hex(file_hash([(chunk_hash(forged), len(forged))]))
    assert XetStore(team_hub.root).file(forged_file) is None
    got = _client(team_hub, "hf_carol_write", tmp_path / "carol-laptop", "download", "lab/base-model",
                  "tokenizer.json")  # fmt: skip
    assert Path(got.strip()).read_bytes() == tokenizer


# --- memory: a request costs the server what its size allows, not what its chunk count asks ---------


class Served:
    def __init__(self, root: Path) -> None:
        self.process, self.endpoint = serve_hub(root)
        self.memory = PeakMemory(self.process.pid)
        created = httpx.post(
            f"{self.endpoint}/api/repos/create",
            json={"name": "target"},
            headers={"Authorization": "Bearer any"},
        )
        assert created.status_code == 200, created.text
        self.cas = Cas(self.endpoint, "hubkit-user/target")

    def bounded(self, call):
        """`call()`'s result, once it took at most MAX_SECONDS and grew the server by at most MAX_GROWTH."""
        self.memory.reset()
        started = time.monotonic()
        result = call()
        elapsed, growth = time.monotonic() - started, self.memory.growth
        assert elapsed < MAX_SECONDS and growth < MAX_GROWTH, f"{elapsed:.1f} s, {growth / MiB:.0f} MiB"
        return result


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(tmp_path_factory.mktemp("xet-memory") / "hub")
    try:
        yield served
    finally:
        served.process.terminate()
        served.process.wait(timeout=30)


def _refused(answer: httpx.Response, words: str) -> None:
    error = answer.json()["error"]
    assert answer.status_code == 400 and words in error and "\n" not in error, (answer.status_code, error)


def test_a_xorb_of_one_byte_chunks_is_refused_at_its_8193rd_chunk(served):
    """64 MiB of one-byte chunks (7 million) under a wrong hash: it used to be hashed whole, ~2.5 GB."""
    one_byte = bytes([0, 1, 0, 0, 0, 1, 0, 0]) + b"x"
    body = one_byte * (64 * MiB // len(one_byte))
    answer = served.bounded(lambda: served.cas.post(f"/v1/xorbs/default/{'0' * 64}", body, timeout=120))
    _refused(answer, "at most 8192 chunks")


def test_a_shard_naming_more_chunks_than_its_file_has_bytes_for_is_refused_from_its_terms(served):
    """One file of 4,000 terms, each over all 8,192 one-byte chunks of a xorb (a 384 KB shard): 32 million
    chunk references, which the Hub used to build in memory (~2.5 GB) before checking any."""
    chunks = [b"x"] * 8192
    xorb_id, body = build_xorb(chunks)
    assert served.cas.post(f"/v1/xorbs/default/{xorb_id}", body).status_code == 200  # xet-core's largest
    term = (xorb_id, 0, 8192, 8192, verification_hash([chunk_hash(b"x")] * 8192))
    data = shard(bytes(32), [term] * 4000, hashlib.sha256(b"x" * 8192 * 4000).digest())
    assert 380_000 < len(data) < 400_000
    answer = served.bounded(lambda: served.cas.post("/v1/shards", data, timeout=120))
    _refused(answer, "names 32768000 chunks for 32768000 bytes, more than one per 4096")


def test_no_reconstruction_runs_over_more_chunks_than_xet_core_puts_in_a_xorb(served):
    """A xorb of 300,000 one-byte chunks under its right hash is refused, so no file over it exists and
    four reconstructions at once answer 404 at once; a file of 8,192 one-chunk terms (over a full xorb
    of 8 KiB chunks) is reconstructed, whole or in part, at the cost of its terms, four at once."""
    tiny = [b"y"] * 300_000
    tiny_id = hash_to_hex(merkle_root([(chunk_hash(b"y"), 1)] * len(tiny)))
    _, body = build_xorb(tiny)
    _refused(served.bounded(lambda: served.cas.post(f"/v1/xorbs/default/{tiny_id}", body)), "at most 8192")
    _refused(served.cas.post("/v1/shards", file_shard(tiny_id, tiny)), "names 300000 chunks")
    tiny_file = hash_to_hex(file_hash([(chunk_hash(b"y"), 1)] * len(tiny)))
    assert _at_once(served, f"/v1/reconstructions/{tiny_file}", {}) == [404] * 4

    chunks = [os.urandom(8192) for _ in range(8192)]
    xorb_id, body = build_xorb(chunks)
    assert served.cas.post(f"/v1/xorbs/default/{xorb_id}", body).status_code == 200
    hashes = [chunk_hash(c) for c in chunks]
    terms = [(xorb_id, i, i + 1, 8192, verification_hash([h])) for i, h in enumerate(hashes)]
    data = b"".join(chunks)
    file_id = file_hash([(h, 8192) for h in hashes])
    assert (
        served.cas.post("/v1/shards", shard(file_id, terms, hashlib.sha256(data).digest())).status_code == 200
    )
    path = f"/v1/reconstructions/{hash_to_hex(file_id)}"
    first, last = 100 * 8192 + 17, 200 * 8192 + 5
    plans = _at_once(served, path, {"Range": f"bytes={first}-{last}"}, json=True)
    for plan in plans:
        assert plan["offset_into_first_range"] == 17
        assert [t["range"] for t in plan["terms"]] == [{"start": i, "end": i + 1} for i in range(100, 201)]
        [fetch] = plan["fetch_info"][xorb_id]
        assert fetch["range"] == {"start": 100, "end": 201}
        span = f"bytes={fetch['url_range']['start']}-{fetch['url_range']['end']}"
        stored = httpx.get(fetch["url"], headers={"Range": span}).content
        rebuilt = b"".join(stored[i + 8 : i + 8 + 8192] for i in range(0, len(stored), 8 + 8192))
        assert rebuilt[17 : 17 + last - first + 1] == data[first : last + 1]
    assert {len(p["terms"]) for p in _at_once(served, path, {}, json=True)} == {8192}


def _at_once(served: Served, path: str, headers: dict[str, str], json: bool = False) -> list:
    """Four requests for `path` at the same time, bounded together: their statuses (or JSON answers)."""
    answers: list[httpx.Response] = []

    def ask() -> None:
        answers.append(served.cas.get(path, timeout=120, **headers))

    def all_four() -> None:
        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    served.bounded(all_four)
    assert len(answers) == 4
    return [a.json() for a in answers] if json else [a.status_code for a in answers]
