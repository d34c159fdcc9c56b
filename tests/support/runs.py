"""Synthetic TRL-layout runs: real PEFT-format adapters with random (seeded) weights, written as TRL
saves them, for tests and benchmarks. The one writer of such runs.

    run_dir = make_run(tmp_path, (1, 2, 3), base_model="me/base", shapes=TINY_SHAPES)

Weights are drawn with numpy and written with ``safetensors.numpy``: benchmarks fork children, and
torch's thread pool does not survive a fork. Tensors a test builds itself (torch or numpy) are written as
they are.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hubkit.runs.manifest import LoraSettings, Manifest


def qwen3_shapes(hidden: int, q_out: int, v_out: int, layers: int) -> dict[str, tuple[int, int]]:
    """LoRA target shapes (in, out) for q_proj and v_proj of a Qwen3-style model."""
    shapes = {}
    for layer in range(layers):
        shapes[f"model.layers.{layer}.self_attn.q_proj"] = (hidden, q_out)
        shapes[f"model.layers.{layer}.self_attn.v_proj"] = (hidden, v_out)
    return shapes


# Shapes of the tiny Qwen3's q_proj and v_proj (hidden 64, 4 heads x 16, 2 KV heads x 16, 2 layers).
TINY_SHAPES = qwen3_shapes(hidden=64, q_out=64, v_out=32, layers=2)


def random_lora(
    shapes: Mapping[str, tuple[int, int]],
    rank: int,
    *,
    seed: int,
    scale: float = 0.2,
    fill: float | None = None,
) -> dict[str, np.ndarray]:
    """lora_A (r × in) and lora_B (out × r) for each module, float32, in PEFT's saved key names.

    Args:
        shapes: module path (e.g. "model.layers.0.self_attn.q_proj") → (in_features, out_features).
        rank: the LoRA rank.
        seed: the generator's seed.
        scale: the standard deviation of the values.
        fill: a constant for every value (e.g. NaN) instead of random ones.
    """
    generator = np.random.default_rng(seed)
    tensors = {}
    for module, (fan_in, fan_out) in shapes.items():
        prefix = f"base_model.model.{module}"
        for key, shape in (
            (f"{prefix}.lora_A.weight", (rank, fan_in)),
            (f"{prefix}.lora_B.weight", (fan_out, rank)),
        ):
            values = generator.standard_normal(shape, dtype=np.float32) * np.float32(scale)
            tensors[key] = values if fill is None else np.full(shape, fill, dtype=np.float32)
    return tensors


def lora_config(base_model: str, rank: int, targets: object, **changes: Any) -> dict[str, Any]:
    """An ``adapter_config.json`` as PEFT saves a plain LoRA (alpha = 2 r), with `changes` applied."""
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "target_modules": targets,
        "bias": "none",
    }
    config.update(changes)
    return config


def _save_weights(tensors: Mapping[str, Any], path: Path) -> None:
    if all(isinstance(t, np.ndarray) for t in tensors.values()):
        from safetensors.numpy import save_file
    else:
        # Imported only for tensors a test made with torch (0.9 s, and no fork after it).
        from safetensors.torch import save_file
    save_file(dict(tensors), path, metadata={"format": "pt"})


def write_checkpoint(
    run_dir: Path,
    step: int,
    *,
    base_model: str,
    shapes: Mapping[str, tuple[int, int]] | None = None,
    rank: int = 4,
    tensors: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    state: Mapping[str, Any] | None = None,
    training_state: bool = True,
    tokenizer_dir: Path | None = None,
    seed: int | None = None,
    scale: float = 0.2,
    fill: float | None = None,
    log_every: int = 1,
    max_steps: int = 1000,
) -> Path:
    """Write ``checkpoint-<step>/`` as TRL saves it: adapter, trainer_state.json, optimizer state, tokenizer.

    Args:
        run_dir: the run (or its checkpoints) folder.
        step: the global step.
        base_model: what the adapter config names as its base.
        shapes: the adapted modules, for random weights (see `random_lora`).
        rank: their rank.
        tensors: the weights as they are to be saved, instead of random ones.
        config: the whole adapter config, instead of `lora_config`'s.
        state: the whole trainer_state.json instead of one with a log entry every `log_every` steps.
        training_state: also write optimizer state and training arguments (pickles a push must never publish).
        tokenizer_dir: copy its files in, as TRL saves the tokenizer with each checkpoint.
        seed: the weights' seed (default: the step).
        scale: the standard deviation of random weights.
        fill: a constant for every random weight (e.g. NaN).
        log_every: steps between the generated state's log entries.
        max_steps: the generated state's planned length (the run counts as finished once a checkpoint
            reaches it).
    """
    path = run_dir / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if tensors is None:
        tensors = random_lora(shapes or {}, rank, seed=step if seed is None else seed, scale=scale, fill=fill)
    _save_weights(tensors, path / "adapter_model.safetensors")
    if config is None:
        config = lora_config(base_model, rank, sorted({m.rsplit(".", 1)[-1] for m in shapes or {}}))
    (path / "adapter_config.json").write_text(json.dumps(config, indent=2))
    if training_state:
        (path / "optimizer.pt").write_bytes(b"\x80\x04 pickled optimizer state")  # must never be published
        (path / "training_args.bin").write_bytes(b"\x80\x04 pickled args")
    if tokenizer_dir is not None:
        for item in tokenizer_dir.iterdir():
            if item.is_file():
                shutil.copy(item, path / item.name)
    if state is None:
        history = [
            {"step": s, "loss": 0.1 * s, "reward": 0.5 + 0.01 * s}
            for s in range(log_every, step + 1, log_every)
        ]
        state = {"global_step": step, "max_steps": max_steps, "log_history": history}
    (path / "trainer_state.json").write_text(json.dumps(state))
    return path


def make_run(
    root: Path,
    steps: tuple[int, ...],
    *,
    base_model: str,
    shapes: Mapping[str, tuple[int, int]],
    rank: int = 4,
    tokenizer_dir: Path | None = None,
    run_id: str = "synthetic-run",
    manifest: bool = True,
    **checkpoint_options: Any,
) -> Path:
    """A TRL run directory with a manifest and one checkpoint per step (see `write_checkpoint`).

    With `manifest` False the run is as a plain TRL script leaves it: no ``hubkit.json``, the base named
    only by the adapters' config.
    """
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    targets = tuple(sorted({m.rsplit(".", 1)[-1] for m in shapes}))
    if manifest:
        Manifest(
            run_id=run_id,
            framework="trl",
            base_model=base_model,
            lora=LoraSettings(r=rank, alpha=2 * rank, target_modules=targets),
            started_at="2026-01-01T00:00:00Z",
        ).save(run_dir)
    for step in steps:
        write_checkpoint(
            run_dir,
            step,
            base_model=base_model,
            shapes=shapes,
            rank=rank,
            tokenizer_dir=tokenizer_dir,
            **checkpoint_options,
        )
    return run_dir


def finish_run(run_dir: Path) -> None:
    """Record the end of training in the manifest (what a recipe does last)."""
    Manifest.load(run_dir).with_updates(finished_at="2026-01-01T01:00:00Z").save(run_dir)
