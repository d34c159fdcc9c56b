"""`hubkit push --gguf`: a real TRL run on the tiny Qwen3 published with its merged model as GGUF files in
`<repo>-GGUF`, read back with huggingface_hub and gguf-py, the card's llama-cpp-python usage run as written
in .venv-llama against the local Hub, an unchanged re-push that exports and uploads nothing, and refusals
that create no repo. (tests/export/test_gguf.py checks the files themselves against llama.cpp and transformers.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import gguf
import pytest
import torch
import yaml
from fixtures_hub import TEST_NAMESPACE
from fixtures_runs import make_trl_run
from helpers import commit_ids, push_argv, run_cli, sha256_of, write_requests
from planted import HF_TOKEN
from safetensors.torch import load_file

from hubkit.errors import SecretInFileError
from hubkit.export import GGUFMetadata, export_gguf
from hubkit.safety import VetContext, kinds, vet_file
from tests.support.tiny import build_tiny_qwen3

REPO_ROOT = Path(__file__).resolve().parents[2]
LLAMA_PYTHON = REPO_ROOT / ".venv-llama" / "bin" / "python"


@dataclass(frozen=True)
class GGUFRelease:
    repo_id: str
    merged_id: str
    gguf_id: str
    names: dict[str, str]  # GGUF file name by type: "Q8_0", "BF16"


def _push(run_dir: Path, repo_id: str, endpoint: str, *extra: str) -> int:
    return run_cli([*push_argv(run_dir, repo_id, endpoint), "--no-space", "--gguf", "q8_0,bf16", *extra])


@pytest.fixture(scope="module")
def release(trl_run_dir: Path, local_hub) -> GGUFRelease:
    """The TRL run pushed once with ``--gguf q8_0,bf16`` (adapters, merged model, GGUF files)."""
    repo_id = f"{TEST_NAMESPACE}/gguf-release-{uuid.uuid4().hex[:8]}"
    assert _push(trl_run_dir, repo_id, local_hub.endpoint, "--quiet") == 0
    name = repo_id.split("/")[1]
    return GGUFRelease(
        repo_id,
        f"{repo_id}-merged",
        f"{repo_id}-GGUF",
        {t: f"{name}-{t}.gguf" for t in ("Q8_0", "BF16")},
    )


def _front_matter(card: str) -> dict:
    return yaml.safe_load(card.split("---\n")[1])


def test_the_gguf_repo_holds_a_file_per_type_and_a_card_recording_the_merge(release: GGUFRelease, hub_api):
    files = set(hub_api.list_repo_files(release.gguf_id)) - {".gitattributes"}
    assert files == {"README.md", *release.names.values()}
    card = Path(hub_api.hf_hub_download(release.gguf_id, "README.md")).read_text()
    front = _front_matter(card)
    assert front["base_model"] == release.merged_id and front["base_model_relation"] == "quantized"
    assert front["library_name"] == "gguf" and "gguf" in front["tags"]
    # The record names each file by the sha256 the Hub holds, and the merge the merged repo records.
    merged_front = _front_matter(Path(hub_api.hf_hub_download(release.merged_id, "README.md")).read_text())
    record = front["hubkit_gguf"]
    assert record["merge"] == merged_front["hubkit_merge"]
    info = hub_api.model_info(release.gguf_id, files_metadata=True)
    on_hub = {s.rfilename: (s.lfs.sha256, s.size) for s in info.siblings if s.lfs}
    assert {f["name"]: (f["sha256"], f["size"]) for f in record["files"].values()} == {
        n: on_hub[n] for n in release.names.values()
    }
    # The usage names the repo and a type it holds, as llama.cpp and Ollama take them.
    assert f"llama-cli -hf {release.gguf_id}:Q8_0" in card
    assert f"ollama run hf.co/{release.gguf_id}:Q8_0" in card
    # The tiny base is float32: the card does not claim that BF16 keeps the merged weights' bits.
    assert "BF16 rounds the merged float32 weights to the nearest bfloat16" in " ".join(card.split())
    # The adapter and merged cards link the GGUF repo.
    link = f"[{release.gguf_id}](https://huggingface.co/{release.gguf_id})"
    for repo in (release.repo_id, release.merged_id):
        assert link in Path(hub_api.hf_hub_download(repo, "README.md")).read_text()


def test_the_bf16_file_holds_the_merged_weights_bit_for_bit(release: GGUFRelease, hub_api, tiny_qwen3):
    merged = load_file(hub_api.hf_hub_download(release.merged_id, "model.safetensors"))
    reader = gguf.GGUFReader(hub_api.hf_hub_download(release.gguf_id, release.names["BF16"]))
    tensors = {t.name: t for t in reader.tensors}
    base = load_file(Path(tiny_qwen3.local_dir) / "model.safetensors")
    changed = 0
    for layer in range(2):
        name = f"model.layers.{layer}.self_attn.q_proj.weight"
        written = tensors[f"blk.{layer}.attn_q.weight"]
        # The tiny base is float32, so is its merge: BF16 is its round-to-nearest-even (as the converter's).
        as_bf16 = merged[name].to(torch.bfloat16).contiguous().view(torch.uint16).numpy().tobytes()
        assert bytes(written.data) == as_bf16
        changed += int(not torch.equal(merged[name], base[name]))
    assert changed  # the file is the merge, not the base
    names = {f.name: f for f in reader.fields.values()}
    assert names["general.base_model.0.repo_url"].contents() == f"https://huggingface.co/{release.merged_id}"


def test_an_unchanged_repush_exports_nothing_and_uploads_no_gguf_bytes(
    release: GGUFRelease, trl_run_dir: Path, local_hub, hub_api, capsys
):
    before = commit_ids(hub_api, release.gguf_id)
    start = len(local_hub.request_log)
    capsys.readouterr()
    assert _push(trl_run_dir, release.repo_id, local_hub.endpoint) == 0
    out = capsys.readouterr().out
    assert f"{release.gguf_id} already holds step 3 as Q8_0, BF16: not exported again" in out
    assert "writing GGUF" not in out
    assert commit_ids(hub_api, release.gguf_id) == before
    assert [r for r in write_requests(local_hub.request_log, start) if release.gguf_id in r[1]] == []


@pytest.mark.skipif(not LLAMA_PYTHON.exists(), reason="no llama.cpp environment: run `make venv-llama`")
def test_the_cards_llama_cpp_python_usage_runs_as_written(release: GGUFRelease, hub_api, local_hub, tmp_path):
    card = Path(hub_api.hf_hub_download(release.gguf_id, "README.md")).read_text()
    (snippet,) = re.findall(r"^```python\n(.*?)\n```$", card, flags=re.DOTALL | re.MULTILINE)
    assert f'filename="{release.names["Q8_0"]}"' in snippet
    env = {
        **os.environ,
        "HF_ENDPOINT": local_hub.endpoint,
        "HF_HUB_CACHE": str(tmp_path / "cache"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    done = subprocess.run(
        [str(LLAMA_PYTHON), "-I", "-c", snippet], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()  # it chatted and printed an answer
    (downloaded,) = (tmp_path / "cache").rglob(release.names["Q8_0"])
    info = hub_api.model_info(release.gguf_id, files_metadata=True)
    assert sha256_of(downloaded) == next(
        s.lfs.sha256 for s in info.siblings if s.rfilename == downloaded.name
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--gguf", "q8_0", "--no-merged"], "GGUF files are written from the merged model"),
        (["--gguf", "q4_k"], "unknown GGUF type 'q4_k'"),
    ],
    ids=["without-the-merged-model", "unknown-type"],
)
def test_a_refused_gguf_push_creates_no_repo(
    trl_run_dir, local_hub, hub_api, new_repo_id, capsys, options, message
):
    argv = [*push_argv(trl_run_dir, new_repo_id, local_hub.endpoint), "--no-space", *options]
    assert run_cli(argv) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not hub_api.repo_exists(new_repo_id)


def test_a_gguf_file_whose_metadata_holds_a_token_is_refused(tmp_path: Path) -> None:
    model_dir = build_tiny_qwen3(tmp_path / "tiny")
    written = export_gguf(
        model_dir, tmp_path / "gguf", ["q8_0"], GGUFMetadata(name="run", license=f"see {HF_TOKEN}")
    ).files[0]
    context = VetContext(hub_base_id="hubkit-test/tiny-qwen3", run_dir=tmp_path)
    with pytest.raises(SecretInFileError, match="a Hugging Face token") as refused:
        vet_file(written.path, kinds.GGUF_WEIGHTS, context)
    assert HF_TOKEN not in str(refused.value)


def test_the_dry_run_says_the_merge_would_be_written_as_gguf(trl_run_dir, local_hub, new_repo_id, capsys):
    argv = [*push_argv(trl_run_dir, new_repo_id, local_hub.endpoint), "--no-space", "--dry-run"]
    assert run_cli([*argv, "--gguf", "bf16,Q8_0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"written as GGUF (BF16, Q8_0) to {new_repo_id}-GGUF (a dry run does not merge)" in out


@pytest.mark.slow
def test_the_training_callback_writes_the_gguf_files_once_training_ends(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id
):
    from hubkit.integrations.trl import HubkitPushCallback

    push = HubkitPushCallback(new_repo_id, endpoint=local_hub.endpoint, gguf=["Q8_0"])
    make_trl_run(
        tmp_path / "runs" / "with-gguf", Path(tiny_qwen3.local_dir), tiny_qwen3.repo_id, callbacks=[push]
    )
    gguf_id = f"{new_repo_id}-GGUF"
    assert f"{new_repo_id.split('/')[1]}-Q8_0.gguf" in hub_api.list_repo_files(gguf_id)
    # The saves during training pushed adapters only: the GGUF repo got one commit, from the end's push.
    assert len(commit_ids(hub_api, gguf_id)) == 2  # the repo's creation, then the files
    record = _front_matter(Path(hub_api.hf_hub_download(gguf_id, "README.md")).read_text())["hubkit_gguf"]
    assert record["merge"]["step"] == 3


def test_the_training_callback_refuses_an_unknown_gguf_type_before_training() -> None:
    from hubkit.errors import PublishError
    from hubkit.integrations.trl import HubkitPushCallback

    # An importance-matrix type (llama-quantize makes it only with --imatrix) is not offered.
    with pytest.raises(PublishError, match="unknown GGUF type 'iq4_xs'"):
        HubkitPushCallback("me/run", gguf=["iq4_xs"])


def test_without_gguf_py_the_push_refuses_in_one_line_before_any_repo(
    trl_run_dir, local_hub, hub_api, new_repo_id, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "gguf", None)  # as if `pip install 'hubkit[gguf]'` had not been run
    argv = [*push_argv(trl_run_dir, new_repo_id, local_hub.endpoint), "--no-space", "--gguf", "q8_0"]
    assert run_cli(argv) != 0
    err = capsys.readouterr().err.strip()
    assert "pip install 'hubkit[gguf]'" in err and len(err.splitlines()) == 1
    assert not hub_api.repo_exists(new_repo_id)


def test_the_exported_folder_holds_the_run_tokenizer_set_whole(tmp_path: Path) -> None:
    # The base's chat_template.jinja must not stay beside a run's tokenizer whose template is in its
    # tokenizer_config.json: the merged repo publishes the run's set alone, and so must the GGUF files.
    from hubkit.hub.hashing import hash_bytes
    from hubkit.publish.adapter_repo import RunFiles
    from hubkit.publish.merged_repo import use_release_tokenizer
    from hubkit.publish.plan import PlannedFile

    merged = tmp_path / "merged"
    merged.mkdir()
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "vocab.json",
        "config.json",
    ):
        (merged / name).write_text(f"base {name}")
    run_set = {"tokenizer.json": b"run tokenizer", "tokenizer_config.json": b"run config"}
    planned = tuple(
        PlannedFile(name, kinds.kind_of(name), hash_bytes(data), content=data)
        for name, data in run_set.items()
    )
    use_release_tokenizer(merged, RunFiles(checkpoints=(), root=(), tokenizer=planned, run=(), root_step=1))
    assert {p.name: p.read_bytes() for p in merged.iterdir()} == {
        **run_set,
        "config.json": b"base config.json",
    }


def test_every_type_push_accepts_is_written_and_vetted_as_gguf() -> None:
    from hubkit.export import FILE_TYPES
    from hubkit.formats.gguf_types import GGUF_TYPES

    for gguf_type in GGUF_TYPES:
        if gguf_type.quantized_by_llama_cpp:  # made by llama.cpp's quantizer, as this file type
            assert (
                gguf_type.llama_ftype == f"LLAMA_FTYPE_{gguf.LlamaFileType[f'MOSTLY_{gguf_type.name}'].name}"
            )
        else:
            assert FILE_TYPES[gguf_type.name.lower()].name == gguf_type.name
        assert kinds.kind_of(f"run-{gguf_type.name}.gguf") is kinds.GGUF_WEIGHTS
