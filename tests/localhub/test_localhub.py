"""The local Hub driven through the real clients: huggingface_hub, transformers and peft."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import chunks_sent, sha256_of, uploaded


def _requests(hub, method: str, fragment: str, since: int = 0) -> list[tuple[str, str, int]]:
    return [r for r in hub.request_log[since:] if r[0] == method and fragment in r[1]]


@pytest.fixture(scope="module")
def checkpoint_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run-like folder: a >20 MB safetensors under checkpoints/global_step_20/, small files beside it."""
    folder = tmp_path_factory.mktemp("upload")
    step = folder / "checkpoints" / "global_step_20"
    step.mkdir(parents=True)
    (step / "adapter_model.safetensors").write_bytes(os.urandom(21 * 1024 * 1024))
    (step / "adapter_config.json").write_text('{"r": 8}\n')
    (folder / "README.md").write_text("---\nlicense: apache-2.0\ntags:\n- grpo\n---\n# A run\n")
    return folder


def test_upload_folder_then_download_list_branch_and_tag(local_hub, hub_api, new_repo_id, checkpoint_folder):
    from huggingface_hub import hf_hub_download, snapshot_download

    big = checkpoint_folder / "checkpoints/global_step_20/adapter_model.safetensors"
    hub_api.create_repo(new_repo_id)
    start, uploads = len(local_hub.request_log), len(local_hub.uploads)
    info = hub_api.upload_folder(
        repo_id=new_repo_id, folder_path=checkpoint_folder, commit_message="Add step 20"
    )

    # One large file (the safetensors, through Xet), one commit.
    assert uploaded(local_hub, uploads) == [sha256_of(big)]
    assert len(_requests(local_hub, "POST", f"/api/models/{new_repo_id}/commit/main", start)) == 1

    path = hf_hub_download(new_repo_id, "adapter_model.safetensors", subfolder="checkpoints/global_step_20")
    assert sha256_of(path) == sha256_of(big)
    snapshot = Path(snapshot_download(new_repo_id))
    assert sha256_of(snapshot / "checkpoints/global_step_20/adapter_model.safetensors") == sha256_of(big)
    assert (snapshot / "README.md").read_text() == (checkpoint_folder / "README.md").read_text()

    entries = {e.path: e for e in hub_api.list_repo_tree(new_repo_id, recursive=True)}
    assert set(entries) == {
        ".gitattributes",
        "README.md",
        "checkpoints",
        "checkpoints/global_step_20",
        "checkpoints/global_step_20/adapter_config.json",
        "checkpoints/global_step_20/adapter_model.safetensors",
    }
    lfs_entry = entries["checkpoints/global_step_20/adapter_model.safetensors"]
    assert (
        lfs_entry.lfs is not None
        and lfs_entry.lfs.sha256 == sha256_of(big)
        and lfs_entry.size == big.stat().st_size
    )
    assert entries["checkpoints/global_step_20/adapter_config.json"].lfs is None
    shallow = [e.path for e in hub_api.list_repo_tree(new_repo_id, path_in_repo="checkpoints")]
    assert shallow == ["checkpoints/global_step_20"]

    hub_api.create_branch(new_repo_id, branch="step-20")
    hub_api.create_tag(new_repo_id, tag="v0.1", revision="step-20")
    refs = hub_api.list_repo_refs(new_repo_id)
    assert {b.name for b in refs.branches} == {"main", "step-20"}
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v0.1", info.oid)]
    # A later commit on main leaves the tag where it was.
    hub_api.upload_file(path_or_fileobj=b"new", path_in_repo="notes.txt", repo_id=new_repo_id)
    assert not hub_api.file_exists(new_repo_id, "notes.txt", revision="v0.1")
    assert hub_api.file_exists(new_repo_id, "notes.txt")
    tagged = hf_hub_download(new_repo_id, "checkpoints/global_step_20/adapter_config.json", revision="v0.1")
    assert Path(tagged).read_text() == '{"r": 8}\n'
    commits = hub_api.list_repo_commits(new_repo_id)
    assert [c.title for c in commits] == [
        "Upload notes.txt with huggingface_hub",
        "Add step 20",
        "initial commit",
    ]
    hub_api.delete_tag(new_repo_id, tag="v0.1")
    hub_api.delete_branch(new_repo_id, branch="step-20")
    refs = hub_api.list_repo_refs(new_repo_id)
    assert [b.name for b in refs.branches] == ["main"] and refs.tags == []


def test_identical_upload_makes_no_commit_and_sends_no_bytes(
    local_hub, hub_api, new_repo_id, checkpoint_folder
):
    hub_api.create_repo(new_repo_id)
    first = hub_api.upload_folder(repo_id=new_repo_id, folder_path=checkpoint_folder)
    start = len(local_hub.request_log)
    second = hub_api.upload_folder(repo_id=new_repo_id, folder_path=checkpoint_folder)
    assert second.oid == first.oid
    assert (
        chunks_sent(local_hub, start) == set()
    )  # through Xet the file is registered again, its bytes not sent
    assert _requests(local_hub, "POST", "/commit/", start) == []


def test_commit_operations_copy_delete_and_pull_request(hub_api, new_repo_id, checkpoint_folder):
    from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete

    hub_api.create_repo(new_repo_id)
    hub_api.upload_folder(repo_id=new_repo_id, folder_path=checkpoint_folder)
    hub_api.create_commit(
        new_repo_id,
        operations=[
            CommitOperationCopy(
                "checkpoints/global_step_20/adapter_model.safetensors", "adapter_model.safetensors"
            ),
            CommitOperationCopy("checkpoints/global_step_20/adapter_config.json", "adapter_config.json"),
            CommitOperationAdd("data/a.txt", io.BytesIO(b"a")),
            CommitOperationDelete("README.md"),
        ],
        commit_message="Promote step 20",
    )
    files = set(hub_api.list_repo_files(new_repo_id))
    assert {"adapter_model.safetensors", "adapter_config.json", "data/a.txt"} <= files
    assert "README.md" not in files
    info = {
        p.path: p for p in hub_api.get_paths_info(new_repo_id, ["adapter_model.safetensors", "data", "nope"])
    }
    assert set(info) == {"adapter_model.safetensors", "data"}
    assert info["adapter_model.safetensors"].lfs.sha256 == sha256_of(
        checkpoint_folder / "checkpoints/global_step_20/adapter_model.safetensors"
    )

    hub_api.delete_folder("checkpoints", repo_id=new_repo_id)
    hub_api.delete_file("data/a.txt", repo_id=new_repo_id)
    assert hub_api.list_repo_files(new_repo_id) == [
        ".gitattributes",
        "adapter_config.json",
        "adapter_model.safetensors",
    ]

    pr = hub_api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=new_repo_id, create_pr=True)
    assert pr.pr_revision == "refs/pr/1"
    assert hub_api.file_exists(new_repo_id, "x.txt", revision="refs/pr/1")
    assert not hub_api.file_exists(new_repo_id, "x.txt")


def test_repo_kinds_info_and_delete(hub_api, make_repo_id):
    model, dataset, space = make_repo_id("model"), make_repo_id("data"), make_repo_id("space")
    hub_api.create_repo(model, private=True)
    hub_api.create_repo(dataset, repo_type="dataset")
    hub_api.create_repo(space, repo_type="space", space_sdk="gradio")
    assert hub_api.create_repo(model, exist_ok=True).repo_id == model

    assert hub_api.model_info(model).private is True
    hub_api.update_repo_settings(model, private=False)
    assert hub_api.model_info(model).private is False
    assert [m.id for m in hub_api.list_models(author="hubkit-test", search=model.split("/")[1])] == [model]
    assert hub_api.repo_exists(dataset, repo_type="dataset")
    assert not hub_api.repo_exists(dataset)  # no model of that name
    space_info = hub_api.space_info(space)
    assert space_info.sdk == "gradio" and space_info.runtime.stage == "NO_APP_FILE"
    hub_api.upload_file(
        path_or_fileobj=b"import gradio\n", path_in_repo="app.py", repo_id=space, repo_type="space"
    )
    assert hub_api.space_info(space).runtime.stage == "RUNNING"
    assert hub_api.get_space_runtime(space).stage == "RUNNING"
    assert hub_api.whoami()["name"] == "hubkit-user"

    hub_api.delete_repo(dataset, repo_type="dataset")
    assert not hub_api.repo_exists(dataset, repo_type="dataset")


def test_readme_metadata_is_validated_and_parsed(hub_api, new_repo_id):
    hub_api.create_repo(new_repo_id)
    with pytest.raises(ValueError, match="Invalid metadata in README"):
        hub_api.upload_file(
            path_or_fileobj=b"---\ntags: {a: [\n---\n", path_in_repo="README.md", repo_id=new_repo_id
        )
    with pytest.raises(ValueError, match="Invalid metadata in README"):
        hub_api.upload_file(
            path_or_fileobj=b"---\nmodel-index: 3\n---\n", path_in_repo="README.md", repo_id=new_repo_id
        )
    readme = b"---\nbase_model: hubkit-test/tiny-qwen3\ntags:\n- grpo\n---\n# Card\n"
    hub_api.upload_file(path_or_fileobj=readme, path_in_repo="README.md", repo_id=new_repo_id)
    card = hub_api.model_info(new_repo_id).card_data
    assert card.base_model == "hubkit-test/tiny-qwen3" and card.tags == ["grpo"]


def test_model_card_with_eval_results_round_trips(hub_api, new_repo_id):
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    data = ModelCardData(
        base_model="hubkit-test/tiny-qwen3",
        model_name="tiny-grpo",
        eval_results=[EvalResult("text-generation", "gsm8k", "GSM8K", "accuracy", 0.5)],
    )
    card = ModelCard.from_template(data, template_str="---\n{{ card_data }}\n---\n# {{ model_name }}\n")
    hub_api.create_repo(new_repo_id)
    card.push_to_hub(new_repo_id)  # validates the metadata on the Hub first (POST /api/validate-yaml)
    loaded = ModelCard.load(new_repo_id)
    assert loaded.data.eval_results[0].metric_value == 0.5
    assert hub_api.model_info(new_repo_id).card_data.eval_results[0].dataset_type == "gsm8k"


def test_eval_results_files_on_main_are_listed_as_the_hub_lists_them(local_hub, hub_api, new_repo_id):
    import httpx
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    entry = EvalResultEntry(dataset_id="openai/gsm8k", task_id="main", value=0.5, notes="greedy")
    good = yaml.safe_dump(eval_result_entries_to_yaml([entry])).encode()
    hub_api.create_repo(new_repo_id)
    hub_api.upload_file(path_or_fileobj=good, path_in_repo=".eval_results/gsm8k.yaml", repo_id=new_repo_id)
    hub_api.upload_file(
        path_or_fileobj=b"- value: 1\n", path_in_repo=".eval_results/bad.yaml", repo_id=new_repo_id
    )
    hub_api.create_branch(new_repo_id, branch="step-1")
    # Read from main only; the client skips a file the Hub reports as invalid.
    assert hub_api.model_info(new_repo_id, expand=["evalResults"]).eval_results == [entry]
    assert hub_api.model_info(new_repo_id, revision="step-1", expand=["evalResults"]).eval_results == [entry]
    raw = httpx.get(
        f"{local_hub.endpoint}/api/models/{new_repo_id}", params={"expand[]": "evalResults"}
    ).json()
    assert [item["filename"] for item in raw["evalResults"]] == [
        ".eval_results/bad.yaml",
        ".eval_results/gsm8k.yaml",
    ]
    assert "error" in raw["evalResults"][0] and raw["evalResults"][1]["verified"] is False


def test_head_metadata_and_range_requests(local_hub, hub_api, new_repo_id, checkpoint_folder):
    from huggingface_hub import get_hf_file_metadata, get_session, hf_hub_url

    hub_api.create_repo(new_repo_id)
    info = hub_api.upload_folder(repo_id=new_repo_id, folder_path=checkpoint_folder)
    big = checkpoint_folder / "checkpoints/global_step_20/adapter_model.safetensors"
    url = hf_hub_url(new_repo_id, "checkpoints/global_step_20/adapter_model.safetensors")
    meta = get_hf_file_metadata(url)
    assert (meta.commit_hash, meta.etag, meta.size) == (info.oid, sha256_of(big), big.stat().st_size)
    if local_hub.cdn_endpoint:  # LFS files are redirected to the CDN host, as on huggingface.co
        assert meta.location.startswith(local_hub.cdn_endpoint)

    small_url = hf_hub_url(new_repo_id, "checkpoints/global_step_20/adapter_config.json")
    response = get_session().get(small_url, headers={"Range": "bytes=1-3"})
    assert response.status_code == 206 and response.content == b'"r"'
    response = get_session().get(meta.location, headers={"Range": "bytes=-10"})
    assert response.status_code == 206 and response.content == big.read_bytes()[-10:]
    response = get_session().get(small_url, headers={"Range": "bytes=100-"})
    assert response.status_code == 416


def test_multipart_lfs_upload(tmp_path, classic_lfs):
    """A server asking for parts: the client PUTs each part, then completes; the object is verified whole."""
    from huggingface_hub import HfApi, hf_hub_download

    from hubkit.localhub import HubSettings, LocalHub

    settings = HubSettings(multipart_threshold=1024 * 1024, multipart_chunk_size=512 * 1024)
    payload = os.urandom(1536 * 1024 + 7)
    with LocalHub(tmp_path / "hub", settings=settings) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/parts")
        api.upload_file(path_or_fileobj=payload, path_in_repo="w.bin", repo_id="me/parts")
        assert len(_requests(hub, "PUT", "/part/")) == 4
        path = hf_hub_download("me/parts", "w.bin", endpoint=hub.endpoint, cache_dir=tmp_path / "cache")
        assert Path(path).read_bytes() == payload


@pytest.mark.slow
def test_tiny_models_load_from_the_hub(tiny_qwen3, tiny_qwen2_tied):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    qwen3 = AutoModelForCausalLM.from_pretrained(tiny_qwen3.repo_id)
    assert qwen3.config.model_type == "qwen3" and not qwen3.config.tie_word_embeddings
    assert qwen3.lm_head.weight.data_ptr() != qwen3.model.embed_tokens.weight.data_ptr()
    qwen2 = AutoConfig.from_pretrained(tiny_qwen2_tied.repo_id)
    assert qwen2.model_type == "qwen2" and qwen2.tie_word_embeddings

    messages = [{"role": "user", "content": "What is 1+1?"}]
    tok3 = AutoTokenizer.from_pretrained(tiny_qwen3.repo_id)
    prompt3 = tok3.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert prompt3.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    tok2 = AutoTokenizer.from_pretrained(tiny_qwen2_tied.repo_id)
    prompt2 = tok2.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt2.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
    assert tok3("The answer is \\boxed{72}.")["input_ids"] == [785, 4226, 374, 1124, 79075, 90, 22, 17, 7810]


@pytest.mark.slow
def test_peft_adapter_loads_from_a_subfolder_with_equal_logits(tmp_path, hub_api, new_repo_id, tiny_qwen3):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.repo_id)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:  # PEFT starts lora_B at zero: make the adapter change the output
                param.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    subfolder = "checkpoints/global_step_20"
    model.save_pretrained(tmp_path / subfolder)
    hub_api.create_repo(new_repo_id)
    hub_api.upload_folder(repo_id=new_repo_id, folder_path=tmp_path, commit_message="Add adapter")

    ids = torch.tensor([[785, 4226, 374, 1124, 79075, 90, 22, 17]])
    model.eval()
    with torch.no_grad():
        expected = model(ids).logits
        fresh = AutoModelForCausalLM.from_pretrained(tiny_qwen3.repo_id)
        base_logits = fresh(ids).logits
        loaded = PeftModel.from_pretrained(fresh, new_repo_id, subfolder=subfolder).eval()
        actual = loaded(ids).logits
    assert torch.equal(actual, expected)
    assert not torch.allclose(actual, base_logits)  # the adapter is not a no-op


def test_localhub_imports_no_heavy_package():
    """The server runs in any environment (the verl one included): it never imports the Hub client or torch."""
    code = (
        "import sys, hubkit.localhub, hubkit.localhub.http.server; "
        "heavy = {'huggingface_hub', 'httpx', 'torch', 'transformers'} & set(sys.modules); "
        "sys.exit(sorted(heavy) or 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_use_local_hub_patches_an_already_imported_client(tmp_path):
    """When huggingface_hub was imported first, its constants are patched: the endpoint and the caches
    (Xet's too) are the local ones."""
    code = f"""
import os
from pathlib import Path
import huggingface_hub
from huggingface_hub import constants  # the client's settings are read now, before the local Hub exists
from hubkit.localhub import LocalHub
from hubkit.localhub.client_env import use_local_hub
with LocalHub({str(tmp_path / "hub")!r}) as hub:
    use_local_hub(hub.endpoint, {str(tmp_path / "hf_home")!r})
    api = huggingface_hub.HfApi(token="any")
    api.create_repo("me/late")
    api.upload_file(path_or_fileobj=b"\\0" * 20_000, path_in_repo="w.safetensors", repo_id="me/late")
    path = huggingface_hub.hf_hub_download("me/late", "w.safetensors")
    assert Path(path).read_bytes() == b"\\0" * 20_000
    assert path.startswith({str(tmp_path / "hf_home")!r}), path
    assert any(p.startswith("/xet/v2/shards") for _, p, _ in hub.request_log)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    assert "patching its constants" in result.stderr


VERL_PYTHON = Path(__file__).resolve().parents[2] / ".venv-verl" / "bin" / "python"
OLD_CLIENT_ROUND_TRIP = """
import os, sys, tempfile
from pathlib import Path
from hubkit.localhub import LocalHub
from hubkit.localhub.client_env import use_local_hub
with LocalHub(sys.argv[1], token="tok") as hub:
    use_local_hub(hub.endpoint, sys.argv[2], token="tok")
    import huggingface_hub
    from huggingface_hub import CommitOperationCopy, HfApi, hf_hub_download
    api = HfApi()
    api.create_repo("me/old")
    api.create_repo("me/old", exist_ok=True)
    folder = Path(tempfile.mkdtemp()) / "checkpoints" / "global_step_20"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(os.urandom(11_000_000))
    api.upload_folder(repo_id="me/old", folder_path=folder.parents[1])
    path = hf_hub_download("me/old", "adapter_model.safetensors", subfolder="checkpoints/global_step_20")
    assert Path(path).read_bytes() == (folder / "adapter_model.safetensors").read_bytes()
    api.create_commit("me/old", [CommitOperationCopy("checkpoints/global_step_20/adapter_model.safetensors", "a.safetensors")], commit_message="copy")
    api.create_branch("me/old", branch="b")
    assert sorted(api.list_repo_files("me/old", revision="b")) == [".gitattributes", "a.safetensors", "checkpoints/global_step_20/adapter_model.safetensors"]
    api.delete_repo("me/old")
    assert not api.repo_exists("me/old")
    print(huggingface_hub.__version__)
"""


@pytest.mark.verl
@pytest.mark.skipif(not VERL_PYTHON.exists(), reason="needs verl's environment (make venv-verl)")
def test_the_verl_environments_older_client_works_too(tmp_path):
    """verl's environment holds an older huggingface_hub (0.x: requests, Xet negotiated away by the LFS batch
    answer): the same server serves it."""
    result = subprocess.run(
        [str(VERL_PYTHON), "-c", OLD_CLIENT_ROUND_TRIP, str(tmp_path / "hub"), str(tmp_path / "hf_home")],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("HF_")},
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip().split(".")[0]) < 2  # an older major version than this environment's
