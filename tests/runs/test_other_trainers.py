"""Runs of TRL's other trainers and of its subclassed configs, as people's own scripts make them: an
SFTTrainer run publishes a card that says SFT (its settings, no GRPO claim), and a GRPO run whose
arguments are an open-r1-style subclass of `GRPOConfig` (defined in the script's own package) publishes
with its hyperparameters and says GRPO."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from fixtures_runs import TINY_GRPO_ARGS
from helpers import push_argv, run_cli

from hubkit.runs import load_run
from hubkit.runs.algorithm import run_algorithm

PROMPTS = [f"What is {a} + {a}?" for a in range(8)]


def _lora(**options):
    from peft import LoraConfig

    return LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM", **options
    )


def train_sft(output_dir: Path, model_dir: Path, **lora_options) -> Path:
    """SFTTrainer with LoRA on prompt-completion pairs (loss on the completions only), a save every step."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    config = SFTConfig(
        output_dir=str(output_dir),
        max_steps=2,
        save_steps=1,
        learning_rate=5e-3,
        per_device_train_batch_size=4,
        max_length=32,
        packing=False,
        completion_only_loss=True,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
        seed=3,
    )
    data = Dataset.from_dict({"prompt": PROMPTS, "completion": [f" {2 * a}" for a in range(8)]})
    SFTTrainer(
        model=str(model_dir), args=config, train_dataset=data, peft_config=_lora(**lora_options)
    ).train()
    return output_dir


def _card_of(hub_api, repo_id: str) -> tuple[dict, str]:
    card = Path(hub_api.hf_hub_download(repo_id, "README.md")).read_text()
    _, front, body = card.split("---\n", 2)
    return yaml.safe_load(front), body


def test_an_sft_run_is_published_as_sft(tmp_path, tiny_qwen3, local_hub, hub_api):
    run_dir = train_sft(tmp_path / "sft-run", Path(tiny_qwen3.local_dir))
    run = load_run(run_dir, base_model=tiny_qwen3.repo_id)
    assert run_algorithm(run).name == "SFT" and run.trainer_settings is not None
    assert run.trainer_settings.config_class == "trl.trainer.sft_config.SFTConfig"
    argv = [*push_argv(run_dir, "me/sft-run", local_hub.endpoint), "--base-model", tiny_qwen3.repo_id]
    assert run_cli([*argv, "--quiet", "--no-space"]) == 0
    for repo_id in ("me/sft-run", "me/sft-run-merged"):
        metadata, body = _card_of(hub_api, repo_id)
        assert "sft" in metadata["tags"] and not {"grpo", "gdpo"} & set(metadata["tags"])
        assert "GRPO" not in body and "DeepSeekMath" not in body and "## Reward" not in body
        assert "SFT (TRL" in body and "## Citations" not in body  # no paper of an algorithm it did not use
    _, body = _card_of(hub_api, "me/sft-run")
    for setting in (
        "max_length` | 32 |",
        "packing` | false |",
        "completion_only_loss` | true |",
        "loss_type` | nll",
    ):
        assert setting in body
    assert "| algorithm | SFT | training_args.bin (SFTConfig) |" in body


def test_the_card_states_ranks_and_alphas_by_module_and_the_adapted_layers(
    tmp_path, tiny_qwen3, local_hub, hub_api
):
    layout = {"rank_pattern": {"v_proj": 8}, "alpha_pattern": {"v_proj": 32}, "layers_to_transform": [1]}
    run_dir = train_sft(tmp_path / "patterned", Path(tiny_qwen3.local_dir), **layout)
    argv = [*push_argv(run_dir, "me/patterned", local_hub.endpoint), "--base-model", tiny_qwen3.repo_id]
    assert run_cli([*argv, "--quiet", "--no-space", "--no-merged"]) == 0
    _, body = _card_of(hub_api, "me/patterned")
    assert "| LoRA rank by module | v\\_proj: 8 | `adapter_config.json` |" in body
    assert "| LoRA alpha by module | v\\_proj: 32 | `adapter_config.json` |" in body
    assert "| LoRA on layers | 1 | `adapter_config.json` |" in body


OPEN_R1_CONFIGS = '''
    from dataclasses import dataclass, field

    import trl


    @dataclass
    class GRPOConfig(trl.GRPOConfig):
        """open-r1's own arguments beside TRL's (src/open_r1/configs.py)."""

        benchmarks: list[str] = field(default_factory=list)
        chat_template: str | None = None
        system_prompt: str | None = None
'''


def digit_reward(completion_ids: list[list[int]], **_: object) -> list[float]:
    return [sum(1 for i in ids if i % 10 < 5) / max(len(ids), 1) for ids in completion_ids]


@pytest.fixture
def open_r1_package(tmp_path, monkeypatch):
    """An `open_r1` package on the path whose `configs.GRPOConfig` subclasses TRL's, as open-r1 defines it."""
    package = tmp_path / "src" / "open_r1"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "configs.py").write_text(textwrap.dedent(OPEN_R1_CONFIGS))
    monkeypatch.syspath_prepend(str(package.parent))
    yield
    for name in [m for m in sys.modules if m == "open_r1" or m.startswith("open_r1.")]:
        del sys.modules[name]


def test_a_subclassed_grpo_config_publishes_with_its_hyperparameters(
    open_r1_package, tmp_path, tiny_qwen3, local_hub, hub_api
):
    from datasets import Dataset
    from open_r1.configs import GRPOConfig
    from trl import GRPOTrainer

    output_dir = tmp_path / "open-r1-run"
    config = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=1,
        save_steps=1,
        learning_rate=5e-3,
        seed=11,
        report_to="none",
        benchmarks=["math_500"],
        **TINY_GRPO_ARGS,
    )
    trainer = GRPOTrainer(
        model=str(tiny_qwen3.local_dir),
        reward_funcs=[digit_reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        peft_config=_lora(),
    )
    trainer.train()
    run = load_run(output_dir, base_model=tiny_qwen3.repo_id)
    assert run.trainer_settings.config_class == "open_r1.configs.GRPOConfig"
    assert run.trainer_settings.values["seed"] == 11 and run_algorithm(run).name == "GRPO"
    argv = [*push_argv(output_dir, "me/open-r1-run", local_hub.endpoint), "--base-model", tiny_qwen3.repo_id]
    assert run_cli([*argv, "--quiet", "--no-merged", "--no-space"]) == 0
    metadata, body = _card_of(hub_api, "me/open-r1-run")
    assert "grpo" in metadata["tags"] and "| `seed` | 11 | `training_args.bin` |" in body
    assert "| algorithm | GRPO | training_args.bin (GRPOConfig) |" in body
