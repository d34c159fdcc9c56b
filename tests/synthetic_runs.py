"""Synthetic TRL-layout runs for the publishing tests (holds no tests; the real training runs are fixtures).

The adapters are real PEFT-format safetensors that `hubkit.adapters.prepare_adapter` validates; their
shapes fit the tiny Qwen3 test model so that they also load with PEFT.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from hubkit.cli import main
from hubkit.runs.manifest import LoraSettings, Manifest

TARGETS = ("q_proj", "v_proj")


def write_checkpoint(
    run_dir: Path,
    step: int,
    *,
    base_model: str,
    shapes: dict[str, tuple[int, int]],
    rank: int = 4,
    tokenizer_dir: Path | None = None,
    seed: int | None = None,
    fill: float | None = None,
) -> Path:
    """Write `checkpoint-<step>/` as TRL saves it: adapter, trainer_state.json, tokenizer files.

    Args:
        shapes: module path (e.g. "model.layers.0.self_attn.q_proj") -> (in_features, out_features).
        fill: a constant for every weight (e.g. NaN) instead of random values.
    """
    path = run_dir / f"checkpoint-{step}"
    path.mkdir(parents=True)
    generator = torch.Generator().manual_seed(seed if seed is not None else step)
    tensors = {}
    for module, (fan_in, fan_out) in shapes.items():
        a = torch.randn(rank, fan_in, generator=generator) * 0.2
        b = torch.randn(fan_out, rank, generator=generator) * 0.2
        if fill is not None:
            a.fill_(fill)
            b.fill_(fill)
        tensors[f"base_model.model.{module}.lora_A.weight"] = a
        tensors[f"base_model.model.{module}.lora_B.weight"] = b
    save_file(tensors, path / "adapter_model.safetensors", metadata={"format": "pt"})
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "target_modules": sorted({m.rsplit(".", 1)[-1] for m in shapes}),
        "bias": "none",
    }
    (path / "adapter_config.json").write_text(json.dumps(config))
    (path / "optimizer.pt").write_bytes(b"\x80\x04 pickled optimizer state")  # must never be published
    (path / "training_args.bin").write_bytes(b"\x80\x04 pickled args")
    if tokenizer_dir is not None:
        for item in tokenizer_dir.iterdir():
            if item.is_file():
                shutil.copy(item, path / item.name)
    state = {
        "global_step": step,
        "max_steps": 1000,
        "log_history": [{"step": s, "loss": 0.1 * s, "reward": 0.5 + 0.01 * s} for s in range(1, step + 1)],
    }
    (path / "trainer_state.json").write_text(json.dumps(state))
    return path


def make_run(
    root: Path,
    steps: tuple[int, ...],
    *,
    base_model: str,
    shapes: dict[str, tuple[int, int]],
    tokenizer_dir: Path | None = None,
    run_id: str = "synthetic-run",
) -> Path:
    """A TRL run directory with a manifest and one checkpoint per step."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    Manifest(
        run_id=run_id,
        framework="trl",
        base_model=base_model,
        lora=LoraSettings(r=4, alpha=8, target_modules=TARGETS),
        started_at="2026-01-01T00:00:00Z",
    ).save(run_dir)
    for step in steps:
        write_checkpoint(run_dir, step, base_model=base_model, shapes=shapes, tokenizer_dir=tokenizer_dir)
    return run_dir


def finish_run(run_dir: Path) -> None:
    """Record the end of training in the manifest (what a recipe does last)."""
    manifest = Manifest.load(run_dir)
    manifest.with_updates(finished_at="2026-01-01T01:00:00Z").save(run_dir)


def qwen3_shapes(hidden: int, q_out: int, v_out: int, layers: int) -> dict[str, tuple[int, int]]:
    """LoRA target shapes for q_proj and v_proj of a Qwen3-style model."""
    shapes = {}
    for layer in range(layers):
        shapes[f"model.layers.{layer}.self_attn.q_proj"] = (hidden, q_out)
        shapes[f"model.layers.{layer}.self_attn.v_proj"] = (hidden, v_out)
    return shapes


# Shapes of the tiny Qwen3's q_proj and v_proj (hidden 64, 4 heads x 16, 2 KV heads x 16, 2 layers).
TINY_SHAPES = qwen3_shapes(hidden=64, q_out=64, v_out=32, layers=2)


# A short chat-formatted prompt in the Qwen3 tokenizer's ids: logits on it compare two models.
CHAT_INPUT_IDS = (151644, 872, 198, 3838, 374, 220, 17, 10, 18, 30, 151645)


def chat_logits(model) -> torch.Tensor:
    """The model's logits on `CHAT_INPUT_IDS` (eval mode, no gradients)."""
    with torch.no_grad():
        return model.eval()(torch.tensor([CHAT_INPUT_IDS])).logits


def push_argv(run_dir: Path, repo_id: str, endpoint: str) -> list[str]:
    """`hubkit push`'s arguments for `run_dir` to `repo_id` on `endpoint` (options are added after)."""
    return ["push", "--run-dir", str(run_dir), "--repo-id", repo_id, "--endpoint", endpoint]


def push_adapters(run_dir: Path, repo_id: str, endpoint: str, *extra: str) -> int:
    """`hubkit push` of the adapter repo only (quiet, --no-merged, --no-space); returns the exit status."""
    return run_cli([*push_argv(run_dir, repo_id, endpoint), "--quiet", "--no-merged", "--no-space", *extra])


def commit_ids(hub_api, repo_id: str) -> list[str]:
    """The repo's commits, newest first."""
    return [c.commit_id for c in hub_api.list_repo_commits(repo_id)]


def write_requests(request_log: list, start: int) -> list[tuple[str, str, int]]:
    """Requests to the local Hub since `start` that upload bytes or change a repo."""
    return [r for r in request_log[start:] if r[0] in ("PUT", "DELETE") or "/commit/" in r[1]]


def run_cli(argv: list[str]) -> int:
    """Run `hubkit ARGV` in this process; returns the exit status (`main` exits only on errors)."""
    try:
        main(argv)
    except SystemExit as exited:
        return exited.code if isinstance(exited.code, int) else 1
    return 0
