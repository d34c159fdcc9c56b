"""The command lines against the local Hub: `hf upload`/`hf download`, and `hubkit hub serve` itself."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import HfApi, constants
from huggingface_hub.errors import HfHubHTTPError

BIN = Path(sys.executable).parent


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env or os.environ.copy())


def test_hf_cli_upload_and_download_round_trip(hub_api, new_repo_id, tmp_path):
    """The session's environment (HF_ENDPOINT, HF_TOKEN) is all the `hf` CLI needs."""
    folder = tmp_path / "model"
    (folder / "checkpoints" / "global_step_20").mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}\n')
    (folder / "checkpoints" / "global_step_20" / "adapter_model.safetensors").write_bytes(os.urandom(400_000))

    upload = _run(
        str(BIN / "hf"), "upload", new_repo_id, str(folder), ".", "--commit-message", "From the CLI"
    )
    assert upload.returncode == 0, upload.stderr
    assert hub_api.list_repo_commits(new_repo_id)[0].title == "From the CLI"

    out = tmp_path / "out"
    download = _run(
        str(BIN / "hf"), "download", new_repo_id, "--include", "checkpoints/*", "--local-dir", str(out)
    )
    assert download.returncode == 0, download.stderr
    name = "checkpoints/global_step_20/adapter_model.safetensors"
    assert (out / name).read_bytes() == (folder / name).read_bytes()
    assert not (out / "config.json").exists()


def _start_serve(root: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [str(BIN / "hubkit"), "hub", "serve", "--root", str(root), "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    endpoint = process.stdout.readline().strip()
    assert endpoint.startswith("http://127.0.0.1:"), (
        process.stderr.read() if process.poll() is not None else endpoint
    )
    return process, endpoint


def _stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=30)


@pytest.mark.slow
def test_hubkit_hub_serve_prints_its_endpoint_enforces_its_token_and_keeps_repos(tmp_path):
    root = tmp_path / "hub"
    process, endpoint = _start_serve(root, "--token", "hf_serve_token")
    try:
        with pytest.raises(HfHubHTTPError) as caught:
            HfApi(endpoint=endpoint, token="hf_wrong").create_repo("me/served")
        assert caught.value.response.status_code == 401
        api = HfApi(endpoint=endpoint, token="hf_serve_token")
        api.create_repo("me/served")
        sha = api.upload_file(path_or_fileobj=b"kept", path_in_repo="kept.txt", repo_id="me/served").oid
    finally:
        assert _stop(process) == 0

    process, endpoint = _start_serve(root)
    try:
        assert HfApi(endpoint=endpoint, token="any").model_info("me/served").sha == sha
    finally:
        assert _stop(process) == 0


def test_hubkit_hub_serve_on_a_busy_port_fails_in_one_line(local_hub, tmp_path):
    port = local_hub.endpoint.rsplit(":", 1)[1]
    result = _run(str(BIN / "hubkit"), "hub", "serve", "--root", str(tmp_path / "hub"), "--port", port)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "Cannot listen on 127.0.0.1:" in result.stderr and "Traceback" not in result.stderr


def test_hubkit_hub_serve_takes_an_allowed_host_and_a_maximum_lfs_size(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    process, endpoint = _start_serve(root, "--allowed-host", "hub.lab", "--max-lfs-size", "1MB")
    try:
        api = HfApi(endpoint=endpoint, token="any")
        api.create_repo("me/limited")
        api.upload_file(path_or_fileobj=os.urandom(999_999), path_in_repo="w.bin", repo_id="me/limited")
        with pytest.raises(ConnectionError, match="413"):  # through Xet: the shard registering it is refused
            api.upload_file(path_or_fileobj=os.urandom(1_000_001), path_in_repo="x.bin", repo_id="me/limited")
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        with pytest.raises(HfHubHTTPError) as caught:  # through LFS: its batch is refused
            api.upload_file(path_or_fileobj=os.urandom(1_000_001), path_in_repo="x.bin", repo_id="me/limited")
        assert caught.value.response.status_code == 413 and "--max-lfs-size" in str(caught.value)
        port = endpoint.rsplit(":", 1)[1]
        for host, status in ((f"hub.lab:{port}", 200), (f"other.lab:{port}", 421)):
            connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
            connection.request("GET", "/api/models/me/limited", headers={"Host": host})
            assert connection.getresponse().status == status, host
            connection.close()
    finally:
        assert _stop(process) == 0
    bad = _run(str(BIN / "hubkit"), "hub", "serve", "--root", str(root), "--max-lfs-size", "lots")
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0
    assert "Invalid --max-lfs-size 'lots'" in bad.stderr


def test_on_an_open_hubkit_hub_serve_writes_need_a_token_and_any_token_will_do(tmp_path):
    process, endpoint = _start_serve(tmp_path / "hub")
    try:
        with pytest.raises(HfHubHTTPError) as caught:
            HfApi(endpoint=endpoint, token=False).create_repo("me/anonymous")
        assert caught.value.response.status_code == 401 and "any token" in str(caught.value)
        assert HfApi(endpoint=endpoint, token="whatever").create_repo("me/tokened").repo_id == "me/tokened"
        assert HfApi(endpoint=endpoint, token=False).repo_exists("me/tokened")  # reads need none
    finally:
        assert _stop(process) == 0
