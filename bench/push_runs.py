"""The runs bench/push.py pushes: each `Scale` (a base config and the LoRA shapes of its adapted modules)
and its TRL-layout run, built with `tests.support.runs` (random weights, seeded)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from hubkit.adapters.base_check import read_off_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
from tests.support.runs import make_run, write_checkpoint

BASE_REPO = "bench/qwen3-4b"

# Qwen3-4B's config.json (the architecture fields the push checks adapters against).
QWEN3_4B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2560,
    "initializer_range": 0.02,
    "intermediate_size": 9728,
    "max_position_embeddings": 40960,
    "max_window_layers": 36,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


@dataclass(frozen=True)
class Scale:
    """One benchmarked run: its base config and the (in, out) features of every adapted module."""

    name: str
    base_repo: str
    base_config: dict
    rank: int
    modules: dict[str, tuple[int, int]]
    checkpoints: int = 10
    targets: bool = False  # the targets are set at the seed's scale

    @property
    def adapter_bytes(self) -> int:
        return sum(4 * self.rank * (i + o) for i, o in self.modules.values())


def seed_scale() -> Scale:
    # Every Linear of the base but lm_head, as the push checks them against the base's config.
    linears = read_off_config(QWEN3_4B_CONFIG) or {}
    modules = {name: shape for name, shape in linears.items() if name != "lm_head"}
    return Scale("seed", BASE_REPO, QWEN3_4B_CONFIG, 16, modules, targets=True)


def small_scale() -> Scale:
    layers = 109  # 4 bytes * r=4 * (1024+2048 + 1024+1024) per layer: 8.9 MB
    config = {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": layers,
        "intermediate_size": 64,
        "vocab_size": 128,
    }
    modules = {}
    for layer in range(layers):
        modules[f"model.layers.{layer}.self_attn.q_proj"] = (1024, 2048)
        modules[f"model.layers.{layer}.self_attn.v_proj"] = (1024, 1024)
    return Scale("small", "bench/small-base", config, 4, modules)


def tiny_scale(scale: Scale) -> Scale:
    """The same base with a near-empty adapter (r=1 on one module): what a push costs besides the adapters."""
    module, shape = next(iter(scale.modules.items()))
    return Scale(f"{scale.name}-empty", scale.base_repo, scale.base_config, 1, {module: shape}, checkpoints=1)


# --- the run on disk ----------------------------------------------------------------------------------


def write_scale_checkpoint(run_dir: Path, scale: Scale, step: int) -> None:
    """checkpoint-<step>/ as TRL saves it (`tests.support.runs`): the PEFT adapter and trainer_state.json."""
    write_checkpoint(
        run_dir,
        step,
        base_model=scale.base_repo,
        shapes=scale.modules,
        rank=scale.rank,
        scale=0.02,
        log_every=10,
        training_state=False,
    )


def make_scale_run(root: Path, scale: Scale) -> Path:
    steps = tuple(10 * n for n in range(1, scale.checkpoints + 1))
    return make_run(
        root,
        steps,
        base_model=scale.base_repo,
        shapes=scale.modules,
        rank=scale.rank,
        run_id=f"bench-{scale.name}",
        scale=0.02,
        log_every=10,
        training_state=False,
    )
