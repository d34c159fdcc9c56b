"""The verl recipe run by verl 0.6.1 itself: `launch.sh` → `main_ppo` on CPU (tests.support.verl_cpu fills
the CPU/gloo gaps only), then published with `hubkit push --run-id` and no other flag.

The first tests each fail on the recipe before its three fixes: a list-valued TARGET_MODULES stopped every
worker at start-up; the file logger died after step 1 on the batch balancer's tensor metrics; and the file
logger never flushed, so a finished run could end with an empty `metrics.jsonl`. The run is shared by the
session (`verl_run_dir`) and published while verl trained (`PUSH_TO`). GDPO's aggregation is checked in
verl's own reward manager and estimator (tests/rewards/test_rewards_verl.py), not by a second run: a verl run is
minutes of the suite's time on two cores.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import gguf
import numpy
import pytest
import torch
from fixtures_hub import TEST_TOKEN
from fixtures_runs import (
    VERL_LORA_ALPHA,
    VERL_LORA_R,
    VERL_PUSH_TO,
    VERL_RUN_ID,
    VERL_STEPS,
    copy_verl_run,
    verl_reference_dir,
    verl_watch_hub,
)
from gguf_bounds import q8_0_error
from helpers import LLAMA_PYTHON, logits, push_adapters, run_cli, run_llama_worker
from safetensors.torch import load_file

from hubkit.adapters.prepare import prepare_adapters
from hubkit.runs import load_run
from hubkit.runs.manifest import Manifest

pytestmark = [pytest.mark.verl, pytest.mark.slow]

SEED_TARGET_MODULES = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
LAMBDA, MAX_COMPLETION_LENGTH = 0.5, 32


def _metric_records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _rollouts(run_dir: Path) -> list[dict]:
    """Every rollout verl dumped (``trainer.rollout_data_dir``), in step order."""
    files = sorted((run_dir / "rollouts").glob("*.jsonl"), key=lambda p: int(p.stem))
    return [json.loads(line) for path in files for line in path.read_text().splitlines() if line]


def _groups(rollouts: list[dict]) -> dict[tuple[int, str], list[dict]]:
    """Rollouts by (step, prompt): verl samples ``ROLLOUTS_PER_PROMPT`` answers to each prompt of a step."""
    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for rollout in rollouts:
        groups[(rollout["step"], rollout["input"])].append(rollout)
    return groups


def _saved_adapter(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(run_dir / f"global_step_{step}" / "actor" / "lora_adapter" / "adapter_model.safetensors")


# --- the three recipe bugs --------------------------------------------------------------------------


def test_the_seed_target_modules_reach_every_worker(verl_run_dir: Path) -> None:
    # TARGET_MODULES as a list stopped every worker at start-up: verl 0.6.1 types it as one string.
    assert Manifest.load(verl_run_dir).lora.target_modules == ("all-linear",)
    for step in range(1, VERL_STEPS + 1):
        config = json.loads(
            (verl_run_dir / f"global_step_{step}/actor/lora_adapter/adapter_config.json").read_text()
        )
        modules = config["target_modules"]
        assert len(modules) == 2 * 7, modules  # 2 layers x the seed's seven projections, nothing else
        assert {module.rsplit(".", 1)[1] for module in modules} == SEED_TARGET_MODULES
        assert (config["r"], config["lora_alpha"]) == (VERL_LORA_R, VERL_LORA_ALPHA)


def test_batch_balancing_stays_on_and_its_metrics_are_logged_as_numbers(verl_run_dir: Path) -> None:
    # verl's file logger died after step 1 on the balancer's metrics (0-d tensors) with balance_batch=True.
    records = _metric_records(verl_run_dir)
    assert [record["step"] for record in records] == list(range(1, VERL_STEPS + 1))
    for record in records:
        balance = {k: v for k, v in record["data"].items() if k.startswith("global_seqlen/")}
        assert {"global_seqlen/min", "global_seqlen/max", "global_seqlen/mean"} <= set(balance)
        assert all(isinstance(value, int | float) for value in balance.values())


def test_the_metrics_file_holds_the_last_step_when_the_run_ends(verl_run_dir: Path) -> None:
    # verl's file logger never flushed and the file closed only when the trainer was collected: the run
    # finished with an empty metrics.jsonl.
    assert Manifest.load(verl_run_dir).finished_at is not None
    text = (verl_run_dir / "metrics.jsonl").read_text()
    assert text.endswith("\n")
    last = _metric_records(verl_run_dir)[-1]
    assert last["step"] == VERL_STEPS and last["data"]["training/global_step"] == VERL_STEPS


# --- what was trained -------------------------------------------------------------------------------


def test_answers_vary_in_length_within_groups_and_the_adapter_moves(verl_run_dir: Path) -> None:
    rollouts = _rollouts(verl_run_dir)
    assert len(rollouts) == VERL_STEPS * 2 * 4  # 2 prompts x 4 answers a step
    groups = _groups(rollouts)
    for step in range(1, VERL_STEPS + 1):
        lengths = [[r["num_tokens"] for r in g] for (s, _), g in groups.items() if s == step]
        assert any(len(set(group)) > 1 for group in lengths), f"step {step}: no group varies: {lengths}"
    # The seed's formula, summed before normalizing: correctness + λ·(−tokens / max_len).
    for rollout in rollouts:
        assert rollout["length_penalty"] == pytest.approx(-rollout["num_tokens"] / MAX_COMPLETION_LENGTH)
        expected = rollout["math_correctness"] + LAMBDA * rollout["length_penalty"]
        assert rollout["score"] == pytest.approx(expected, abs=1e-6)
    for step in range(1, VERL_STEPS + 1):
        lora_b = [t for k, t in _saved_adapter(verl_run_dir, step).items() if "lora_B" in k]
        assert max(t.abs().max().item() for t in lora_b) > 0, f"step {step}: lora_B is still zero"


# --- the run published with `hubkit push --run-id` --------------------------------------------------


@pytest.fixture(scope="module")
def verl_release(verl_run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A copy of the run pushed again, to the session's Hub, with ``hubkit push --run-id`` and nothing else:
    to the repo the recipe recorded (PUSH_TO); (repo id, the copy)."""
    runs_dir = tmp_path_factory.mktemp("verl-release")
    run_dir = copy_verl_run(verl_run_dir, runs_dir / VERL_RUN_ID)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HUBKIT_RUNS_DIR", str(runs_dir))
        assert run_cli(["push", "--run-id", VERL_RUN_ID, "--quiet"]) == 0
    return VERL_PUSH_TO, run_dir


def test_every_step_loads_by_subfolder_and_by_branch_as_verl_saved_it(verl_release, verl_base) -> None:
    from peft import PeftModel

    repo_id, run_dir = verl_release
    for step in range(1, VERL_STEPS + 1):
        reference = torch.load(verl_reference_dir(run_dir) / f"global_step_{step}.pt", weights_only=True)
        by_folder = PeftModel.from_pretrained(
            verl_base(), repo_id, subfolder=f"checkpoints/global_step_{step}"
        )
        by_branch = PeftModel.from_pretrained(verl_base(), repo_id, revision=f"step-{step}")
        for model in (by_folder, by_branch):
            torch.testing.assert_close(logits(model.eval(), reference["input_ids"]), reference["logits"])
    final = PeftModel.from_pretrained(verl_base(), repo_id).eval()
    torch.testing.assert_close(logits(final, reference["input_ids"]), reference["logits"])
    assert (logits(verl_base(), reference["input_ids"]) - reference["logits"]).abs().max() > 1e-4


def test_the_rollouts_verl_dumped_load_back_from_the_samples_dataset(verl_release) -> None:
    from datasets import load_dataset

    from hubkit.runs.completions import MAX_ROWS_PER_STEP

    repo_id, run_dir = verl_release
    dumped = _rollouts(run_dir)
    kept = [
        r
        for step in sorted({r["step"] for r in dumped})
        for r in [d for d in dumped if d["step"] == step][:MAX_ROWS_PER_STEP]
    ]
    rows = load_dataset(f"{repo_id}-samples", "rollouts", split="train")
    assert [(r["step"], r["prompt"], r["completion"]) for r in rows] == [
        (r["step"], r["input"], r["output"]) for r in kept
    ]
    assert [json.loads(r["rewards"])["score"] for r in rows] == pytest.approx([r["score"] for r in kept])


def test_the_card_shows_verls_metrics_as_verl_named_them(verl_release, hub_api) -> None:
    repo_id, _ = verl_release
    card = Path(hub_api.hf_hub_download(repo_id, "README.md")).read_text()
    for name in (
        "response_length/mean",
        "critic/score/mean",
        "actor/ppo_kl",
        "actor/entropy",
        "actor/grad_norm",
    ):
        assert f"`{name}`" in card, name
    assert "all-linear" in card


def test_the_merged_model_is_the_base_plus_the_delta(verl_release, hub_api, tiny_qwen3_tied) -> None:
    repo_id, run_dir = verl_release
    merged = load_file(hub_api.hf_hub_download(f"{repo_id}-merged", "model.safetensors"))
    base = load_file(Path(tiny_qwen3_tied.local_dir) / "model.safetensors")
    adapter = _saved_adapter(run_dir, VERL_STEPS)
    scale = VERL_LORA_ALPHA / VERL_LORA_R
    assert set(merged) == set(base)
    changed = 0
    for name, weight in base.items():
        prefix = "base_model.model." + name.removesuffix(".weight")
        if f"{prefix}.lora_A.weight" not in adapter:
            assert torch.equal(merged[name], weight), name
            continue
        delta = scale * adapter[f"{prefix}.lora_B.weight"] @ adapter[f"{prefix}.lora_A.weight"]
        expected = weight + delta
        # float32 rounding of one product and one sum: a few units in the last place of the larger term.
        bound = 4 * torch.finfo(torch.float32).eps * (weight.abs() + delta.abs() + expected.abs())
        assert ((merged[name] - expected).abs() <= bound).all(), name
        changed += 1
    assert changed == 2 * 7


def test_gguf_q8_0_is_written_from_the_merged_model(verl_release, hub_api, tmp_path: Path) -> None:
    repo_id, run_dir = verl_release
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HUBKIT_RUNS_DIR", str(run_dir.parent))
        assert run_cli(["push", "--run-id", VERL_RUN_ID, "--gguf", "q8_0", "--quiet"]) == 0
    name = f"{repo_id.split('/')[1]}-Q8_0.gguf"  # named after the repo
    path = hub_api.hf_hub_download(f"{repo_id}-GGUF", name)
    merged = load_file(hub_api.hf_hub_download(f"{repo_id}-merged", "model.safetensors"))
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    query = tensors["blk.0.attn_q.weight"]
    assert query.tensor_type == gguf.GGMLQuantizationType.Q8_0
    weight = merged["model.layers.0.self_attn.q_proj.weight"]
    values = torch.from_numpy(gguf.quants.dequantize(query.data, query.tensor_type).copy()).reshape(
        weight.shape
    )
    assert ((values - weight).abs() <= q8_0_error(weight)).all()
    if LLAMA_PYTHON.exists():  # llama.cpp itself loads the file and computes finite logits
        job = {
            "model": path,
            "n_ctx": 32,
            "texts": [],
            "prompts": [],
            "max_new_tokens": 0,
            "sequences": [[151644, 872, 198, 3838, 374]],
            "metadata_keys": ["general.architecture"],
        }
        result = run_llama_worker(job, tmp_path)
        assert result["metadata"]["general.architecture"] == "qwen3"
        assert numpy.isfinite(result["logits"][0]).all()


def test_the_adapter_rebuilt_from_real_shards_equals_the_one_verl_saved(
    verl_run_dir: Path, tmp_path: Path, local_hub, hub_api, new_repo_id: str
) -> None:
    # verl versions that write no lora_adapter/: hubkit rebuilds each adapter from the FSDP shards.
    run_dir = copy_verl_run(verl_run_dir, tmp_path / "no-adapters")
    for step in range(1, VERL_STEPS + 1):
        (run_dir / f"global_step_{step}/actor/lora_adapter").rename(tmp_path / f"saved-{step}")
    run = load_run(run_dir)
    rebuilt = prepare_adapters(run, run.checkpoints, tmp_path / "rebuilt")
    assert all(adapter.rebuilt for adapter in rebuilt)
    assert push_adapters(run_dir, new_repo_id, local_hub.endpoint) == 0
    for adapter in rebuilt:
        saved = load_file(tmp_path / f"saved-{adapter.step}" / "adapter_model.safetensors")
        made = load_file(adapter.dir / "adapter_model.safetensors")
        published = load_file(
            hub_api.hf_hub_download(
                new_repo_id, f"checkpoints/global_step_{adapter.step}/adapter_model.safetensors"
            )
        )
        assert sorted(made) == sorted(saved) == sorted(published)
        for key, tensor in saved.items():
            assert torch.equal(made[key], tensor) and torch.equal(published[key], tensor), key


# --- published while verl trained ----------------------------------------------------------------


def test_push_to_published_each_checkpoint_while_verl_trained(verl_run_dir: Path, tmp_path: Path) -> None:
    from huggingface_hub import HfApi

    from hubkit.localhub import LocalHub

    manifest = Manifest.load(verl_run_dir)
    assert manifest.push_to == VERL_PUSH_TO and manifest.reward.aggregation == "sum_then_normalize"
    assert f"Pushed to {VERL_PUSH_TO}" in (verl_run_dir.parents[1] / "launch.log").read_text()
    with LocalHub(verl_watch_hub(verl_run_dir), token=TEST_TOKEN) as hub:
        api = HfApi(endpoint=hub.endpoint, token=TEST_TOKEN)
        # Each checkpoint in a commit of its own, the first before verl finished.
        finished = datetime.fromisoformat(manifest.finished_at.replace("Z", "+00:00"))
        commits = [c for c in reversed(api.list_repo_commits(VERL_PUSH_TO)) if ": steps " in c.title]
        pushed = [(c.title.split(": steps ", 1)[1], c.created_at) for c in commits]
        assert [steps for steps, _ in pushed][:VERL_STEPS] == [str(s) for s in range(1, VERL_STEPS + 1)], (
            pushed
        )
        assert pushed[0][1] < finished, "step 1 was published only after training ended"
        # Nothing half-saved: every published step is the adapter verl finished saving.
        for step in range(1, VERL_STEPS + 1):
            name = f"checkpoints/global_step_{step}/adapter_model.safetensors"
            published = load_file(api.hf_hub_download(VERL_PUSH_TO, name, cache_dir=tmp_path))
            saved = _saved_adapter(verl_run_dir, step)
            assert sorted(published) == sorted(saved)
            assert all(torch.equal(published[k], saved[k]) for k in saved)
        assert api.file_exists(f"{VERL_PUSH_TO}-merged", "model.safetensors")
