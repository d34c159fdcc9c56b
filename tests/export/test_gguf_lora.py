"""Each checkpoint as a GGUF LoRA (`hubkit.export.gguf_lora`): the file equals, tensor by tensor, what
llama.cpp's own convert_lora_to_gguf.py writes for the same adapter, and llama.cpp (llama-cpp-python in
.venv-llama) applying it over the base's F16 GGUF gives the logits of hubkit's merged model of that step,
for two steps of the session's TRL run; adapters llama.cpp would scale otherwise than PEFT are refused."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import gguf
import pytest
import torch
import yaml
from fixtures_hub import TEST_NAMESPACE
from gguf_bounds import rounding_bounds, unit
from helpers import CHAT_INPUT_IDS, commit_ids, push_argv, run_cli, run_llama_worker, write_requests
from test_gguf import LLAMA_ENV, LLAMA_PYTHON

from hubkit.errors import GGUFExportError
from hubkit.export import GGUFMetadata, export_gguf
from hubkit.export.gguf_lora import plan_gguf_lora, write_gguf_lora

LORA_CONVERTERS = sorted(LLAMA_ENV.glob("src/*/vendor/llama.cpp/convert_lora_to_gguf.py"))
needs_llama_cpp = pytest.mark.skipif(
    not LLAMA_PYTHON.exists(), reason="no llama.cpp environment (.venv-llama): run `make venv-llama`"
)
STEPS = (2, 3)  # the first step's adapter has barely left LoRA's zero B


def _write(adapter_dir: Path, base_dir: Path, out: Path, step: int):
    config = json.loads((base_dir / "config.json").read_text())
    metadata = GGUFMetadata(
        name=f"run-step-{step}", base_model="hubkit-test/tiny-qwen3", license="apache-2.0"
    )
    return write_gguf_lora(plan_gguf_lora(adapter_dir, config, out, metadata, f"step {step}"))


def _checkpoint(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"checkpoint-{step}"


def _tensors(path: Path) -> list[tuple[str, str, tuple[int, ...], bytes]]:
    return [
        (t.name, t.tensor_type.name, tuple(t.shape), t.data.tobytes()) for t in gguf.GGUFReader(path).tensors
    ]


@pytest.mark.skipif(
    not LORA_CONVERTERS, reason="no llama.cpp source (.venv-llama/src): run `make venv-llama`"
)
def test_the_gguf_lora_is_llama_cpps_converters_tensor_by_tensor(trl_run_dir, tiny_qwen3, tmp_path):
    adapter = _checkpoint(trl_run_dir, STEPS[-1])
    ours = _write(adapter, tiny_qwen3.local_dir, tmp_path / "ours.gguf", STEPS[-1])
    converted = tmp_path / "converted.gguf"
    command = [sys.executable, str(LORA_CONVERTERS[0]), "--base", str(tiny_qwen3.local_dir)]
    command += ["--outtype", "f16", "--outfile", str(converted), str(adapter)]
    process = subprocess.run(command, capture_output=True, text=True)
    assert process.returncode == 0, process.stderr[-3000:]
    theirs = _tensors(converted)
    assert _tensors(ours.path) == theirs and len(theirs) == 2 * 7 * 2  # 7 modules x 2 layers, A and B
    fields = {k: f.contents() for k, f in gguf.GGUFReader(ours.path).fields.items()}
    converter_fields = {k: f.contents() for k, f in gguf.GGUFReader(converted).fields.items()}
    for key in ("general.architecture", "general.type", "adapter.type", "adapter.lora.alpha"):
        assert fields[key] == converter_fields[key], key
    assert fields["adapter.lora.alpha"] == 16.0 and fields["general.type"] == "adapter"
    # What differs: general.* says what hubkit was told, never the adapter's folder (the converter names
    # the model after the folder, and its base after the config's local path).
    assert fields["general.name"] == f"run-step-{STEPS[-1]}"
    assert fields["general.base_model.0.repo_url"] == "https://huggingface.co/hubkit-test/tiny-qwen3"
    assert not any(str(tmp_path.parent) in str(v) for v in fields.values())
    # In memory: one pair of tensors at a time; the file is the adapter's F16 half, and its header.
    assert ours.size < (adapter / "adapter_model.safetensors").stat().st_size


@needs_llama_cpp
def test_llama_cpp_with_the_base_and_a_steps_gguf_lora_gives_that_steps_merged_logits(
    trl_run_dir, tiny_qwen3, local_hub, tmp_path
):
    """llama.cpp computes W x + (alpha / r) B (A x) from F16 W, A and B, rounding each product's input to
    F16; the merged model computes (W + (alpha / r) B A) x in float32. To first order the gap is the F16
    rounding (2^-11 relative) of every weight and every product input: under `rounding_bounds`' bf16 bound
    (2^-9 on every input, its worst case), which is twice the two roundings together. The LoRA path's own
    roundings (A, B, A x) are of a term far smaller than the base's and stay within the bound's SLACK."""
    from transformers import AutoModelForCausalLM

    base_gguf = export_gguf(
        tiny_qwen3.local_dir, tmp_path / "base", ["f16"], GGUFMetadata(name="base")
    ).files[0]
    ids = list(CHAT_INPUT_IDS)

    def llama_logits(name: str, lora: Path | None) -> torch.Tensor:
        job = {"model": str(base_gguf.path), "n_ctx": 64, "texts": [], "prompts": [], "max_new_tokens": 0}
        job |= {"sequences": [ids], "metadata_keys": [], "lora": str(lora) if lora else None}
        (tmp_path / name).mkdir()
        return torch.from_numpy(run_llama_worker(job, tmp_path / name)["logits"][0])

    base_logits = llama_logits("llama-base", None)
    for step in STEPS:
        lora = _write(_checkpoint(trl_run_dir, step), tiny_qwen3.local_dir, tmp_path / f"s{step}.gguf", step)
        merged_dir = tmp_path / f"merged-{step}"
        argv = ["merge", "--run-dir", str(trl_run_dir), "--step", str(step), "--out", str(merged_dir)]
        assert run_cli([*argv, "--endpoint", local_hub.endpoint, "--quiet"]) == 0
        model = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
        with torch.no_grad():
            merged = model(torch.tensor([ids])).logits[0]
        ours = llama_logits(f"lora-{step}", lora.path)
        # Each position's top logit and its runner-up, and their gap.
        checks = []
        for p in range(len(ids)):
            first, second = merged[p].topk(2).indices.tolist()
            checks += [
                (p, unit(model.config.vocab_size, (first, 1.0))),
                (p, unit(model.config.vocab_size, (second, 1.0))),
            ]
        bounds = rounding_bounds(model, ids, checks, "bf16")
        gaps = [abs(float(ours[p] @ d - merged[p] @ d)) for p, d in checks]
        moved = [abs(float(base_logits[p] @ d - merged[p] @ d)) for p, d in checks]
        print(
            f"step {step}: largest gap {max(gaps):.2e} (bound {max(b.worst for b in bounds):.2e}), "
            f"from the base alone {max(moved):.2e}"
        )
        assert all(g <= b.worst for g, b in zip(gaps, bounds, strict=True)), (step, gaps, bounds)
        # The adapter is applied: the base alone is further from the merged model than the bound allows, and
        # many times further than llama.cpp with the LoRA is.
        assert max(moved) > max(b.worst for b in bounds) and max(moved) > 10 * max(gaps), (step, moved, gaps)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"use_rslora": True}, "rsLoRA"),
        ({"alpha_pattern": {"q_proj": 3}}, "alpha_pattern"),
        ({"use_dora": True}, "DoRA"),
    ],
)
def test_an_adapter_llama_cpp_would_scale_otherwise_is_refused(
    trl_run_dir, tiny_qwen3, tmp_path, changes, message
):
    adapter = tmp_path / "adapter"
    shutil.copytree(_checkpoint(trl_run_dir, STEPS[0]), adapter)
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps({**config, **changes}))
    with pytest.raises(GGUFExportError, match=message) as refused:
        _write(adapter, tiny_qwen3.local_dir, tmp_path / "out" / "x.gguf", STEPS[0])
    assert "--gguf-lora" in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def lora_release(trl_run_dir: Path, local_hub) -> str:
    """The session's TRL run pushed with ``--gguf f16 --gguf-lora``; returns the adapter repo id."""
    repo_id = f"{TEST_NAMESPACE}/gguf-lora-{uuid.uuid4().hex[:8]}"
    argv = [*push_argv(trl_run_dir, repo_id, local_hub.endpoint), "--no-space", "--quiet"]
    assert run_cli([*argv, "--gguf", "f16", "--gguf-lora"]) == 0
    return repo_id


def test_a_push_with_gguf_lora_publishes_each_step_over_the_bases_file(
    lora_release: str, trl_run_dir, tiny_qwen3, hub_api, tmp_path
):
    name, gguf_id = lora_release.split("/")[1], f"{lora_release}-GGUF"
    loras = {step: f"lora/{name}-step-{step}-F16.gguf" for step in (1, 2, 3)}
    base_file = "base/tiny-qwen3-F16.gguf"
    files = set(hub_api.list_repo_files(gguf_id)) - {".gitattributes"}
    assert files == {"README.md", f"{name}-F16.gguf", base_file, *loras.values()}
    # Each is the file written from that step's vetted adapter (named for its step, over the Hub's base).
    for step, path in loras.items():
        expected = _write(
            _checkpoint(trl_run_dir, step), tiny_qwen3.local_dir, tmp_path / f"{step}.gguf", step
        )
        published = Path(hub_api.hf_hub_download(gguf_id, path))
        assert _tensors(published) == _tensors(expected.path), step
        fields = gguf.GGUFReader(published).fields
        assert fields["general.name"].contents() == f"{name}-step-{step}"
        assert fields["general.base_model.0.repo_url"].contents().endswith("/hubkit-test/tiny-qwen3")
    card = Path(hub_api.hf_hub_download(gguf_id, "README.md")).read_text()
    record = yaml.safe_load(card.split("---\n")[1])["hubkit_gguf"]
    assert {step: f["name"] for step, f in record["lora"].items()} == loras
    assert record["base"]["F16"]["name"] == base_file
    # The three ways, filled in for this repo.
    assert f"llama-cli -m {base_file} --lora {loras[3]}" in card
    assert f"llama-server -m {base_file} --lora {loras[2]} --lora {loras[3]}" in card
    assert f"FROM ./{base_file}\nADAPTER ./{loras[3]}" in card
    assert f"hf download {gguf_id} {base_file} {loras[3]} {loras[2]} --local-dir ." in card


@needs_llama_cpp
def test_the_cards_llama_cpp_lora_usage_runs_as_written(lora_release: str, hub_api, local_hub, tmp_path):
    """The card's llama.cpp way, `llama-cli -m BASE --lora LORA`, run as llama-cpp-python's equivalent (the
    card's Python snippet, as written): .venv-llama builds llama.cpp's libraries, not its CLI binaries."""
    card = Path(hub_api.hf_hub_download(f"{lora_release}-GGUF", "README.md")).read_text()
    snippets = re.findall(r"^```python\n(.*?)\n```$", card, flags=re.DOTALL | re.MULTILINE)
    (snippet,) = [s for s in snippets if "lora_path=" in s]
    env = {**os.environ, "HF_ENDPOINT": local_hub.endpoint, "HF_HUB_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [str(LLAMA_PYTHON), "-I", "-c", snippet], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()  # it answered with step 3's adapter applied
    assert {p.name for p in (tmp_path / "cache").rglob("*.gguf")} == {
        "tiny-qwen3-F16.gguf",
        f"{lora_release.split('/')[1]}-step-3-F16.gguf",
    }


def test_gguf_lora_without_gguf_types_is_refused_in_one_line(
    trl_run_dir, local_hub, hub_api, new_repo_id, capsys
):
    argv = [*push_argv(trl_run_dir, new_repo_id, local_hub.endpoint), "--no-space", "--gguf-lora"]
    assert run_cli(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "--gguf f16" in err and len(err.splitlines()) == 1
    assert not hub_api.repo_exists(new_repo_id)


def test_an_unchanged_gguf_lora_repush_writes_nothing(lora_release: str, trl_run_dir, local_hub, hub_api):
    gguf_id = f"{lora_release}-GGUF"
    before, start = commit_ids(hub_api, gguf_id), len(local_hub.request_log)
    argv = [*push_argv(trl_run_dir, lora_release, local_hub.endpoint), "--no-space", "--quiet"]
    assert run_cli([*argv, "--gguf", "f16", "--gguf-lora"]) == 0
    # The record (read back from the Hub's cardData) names every file the repo holds: nothing is written.
    assert commit_ids(hub_api, gguf_id) == before
    assert [r for r in write_requests(local_hub.request_log, start) if gguf_id in r[1]] == []
