"""Make a real verl 0.6.1 LoRA run on a tiny model: FSDP2 on CPU (gloo), checkpoints in verl's layout.

Run with verl's own environment, two ranks::

    torchrun --nproc_per_node=2 make_verl_run.py --model-dir M --tokenizer-dir T --out RUN/checkpoints \\
        --reference-dir RUN_REF --steps 4 --save-freq 2

It uses verl's code wherever it is callable without Ray: `apply_fsdp2` for sharding, verl's GRPO advantage
and loss aggregation, `FSDPCheckpointManager.save_checkpoint` for the shards, `layered_summon_lora_params`
for the adapter, and `Tracking` with the ``file`` backend for metrics (path from ``VERL_FILE_LOGGER_PATH``).
Two pieces are Ray-bound methods in verl and are followed line by line here instead:
`ActorRolloutRefWorker.save_checkpoint` (the ``lora_adapter/`` block) and
`RayPPOTrainer._save_checkpoint` (``latest_checkpointed_iteration.txt``).

Rollouts are random token sequences rather than sampled text (generation is not what is under test); the
reward is the share of even token ids, so advantages and the LoRA update are non-zero. After every save,
rank 0 records the trained model's logits on fixed inputs in ``--reference-dir/global_step_N.pt``, the
reference a rebuilt adapter must reproduce.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict

import numpy as np
import torch
import torch.distributed as dist

# verl calls get_torch_device().empty_cache(), which some CPU builds of torch lack (research: verl.md §8).
if not hasattr(torch.cpu, "empty_cache"):
    torch.cpu.empty_cache = lambda: None

from peft import LoraConfig, TaskType, get_peft_model
from safetensors.torch import save_file
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.trainer.ppo.core_algos import agg_loss, compute_grpo_outcome_advantage
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
from verl.utils.fsdp_utils import apply_fsdp2, fsdp2_clip_grad_norm_, layered_summon_lora_params
from verl.utils.torch_functional import get_constant_schedule_with_warmup, logprobs_from_logits
from verl.utils.tracking import Tracking

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PROMPTS_PER_RANK = 2
ROLLOUTS = 4
PROMPT_LEN = 6
RESPONSE_LEN = 8
# Fixed inputs the reference logits are computed on (token ids well inside any Qwen vocabulary).
REFERENCE_IDS = torch.tensor([[151644, 872, 198, 3838, 374, 220, 17, 488, 220, 18, 30, 151645]])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--tokenizer-dir", required=True)
    parser.add_argument("--out", required=True, help="verl's trainer.default_local_dir")
    parser.add_argument("--reference-dir", required=True)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--save-freq", type=int, default=2)
    parser.add_argument("--lora-r", type=int, default=8)
    parser.add_argument("--lora-alpha", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def build_actor(args: argparse.Namespace) -> torch.nn.Module:
    """The PeftModel as verl's ActorRolloutRefWorker._build_model_optimizer builds it, sharded with FSDP2."""
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.float32)
    lora_config = {
        "task_type": TaskType.CAUSAL_LM,
        "r": args.lora_r,
        "lora_alpha": args.lora_alpha,
        "target_modules": TARGETS,
        "exclude_modules": None,
        "bias": "none",
    }
    model = get_peft_model(model, LoraConfig(**lora_config))
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("fsdp",))
    mp_policy = MixedPrecisionPolicy(
        param_dtype=torch.float32, reduce_dtype=torch.float32, cast_forward_inputs=True
    )
    apply_fsdp2(model, {"mesh": mesh, "mp_policy": mp_policy, "reshard_after_forward": True}, {})
    return model


def rollout_batch(step: int, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """This rank's sequences (prompt + response), response mask, and group ids (one group per prompt)."""
    generator = torch.Generator().manual_seed(1000 * step + dist.get_rank())
    prompts = torch.randint(0, vocab_size, (PROMPTS_PER_RANK, PROMPT_LEN), generator=generator)
    responses = torch.randint(0, vocab_size, (PROMPTS_PER_RANK * ROLLOUTS, RESPONSE_LEN), generator=generator)
    sequences = torch.cat([prompts.repeat_interleave(ROLLOUTS, dim=0), responses], dim=1)
    mask = torch.ones_like(responses, dtype=torch.float32)
    index = np.array(
        [f"r{dist.get_rank()}p{i}" for i in range(PROMPTS_PER_RANK) for _ in range(ROLLOUTS)], dtype=object
    )
    return sequences, mask, index


def train_step(model, optimizer, scheduler, step: int, vocab_size: int) -> dict[str, float]:
    sequences, mask, index = rollout_batch(step, vocab_size)
    responses = sequences[:, PROMPT_LEN:]
    scores = (responses % 2 == 0).float().mean(dim=1)
    token_rewards = torch.zeros_like(mask)
    token_rewards[:, -1] = scores  # outcome reward on the last response token, as verl's reward managers do
    advantages, _ = compute_grpo_outcome_advantage(token_rewards, mask, index)
    logits = model(input_ids=sequences).logits[:, PROMPT_LEN - 1 : -1]
    log_probs = logprobs_from_logits(logits, responses)
    loss = agg_loss(-advantages * log_probs, mask, "token-mean")
    optimizer.zero_grad()
    loss.backward()
    grad_norm = fsdp2_clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    scheduler.step()
    return {
        "actor/pg_loss": loss.item(),
        "actor/grad_norm": grad_norm.item(),
        "actor/lr": scheduler.get_last_lr()[0],
        "critic/score/mean": scores.mean().item(),
        "response_length/mean": float(RESPONSE_LEN),
    }


def save_lora_adapter(model, actor_dir: str) -> None:
    """Follows verl 0.6.1 `fsdp_workers.ActorRolloutRefWorker.save_checkpoint`'s LoRA block (a Ray method)."""
    lora_save_path = os.path.join(actor_dir, "lora_adapter")
    peft_config = {}
    if dist.get_rank() == 0:
        os.makedirs(lora_save_path, exist_ok=True)
        peft_config = asdict(model.peft_config.get("default", {}))
        peft_config["task_type"] = peft_config["task_type"].value
        peft_config["peft_type"] = peft_config["peft_type"].value
        peft_config["target_modules"] = list(peft_config["target_modules"])
    lora_params = layered_summon_lora_params(model)
    if dist.get_rank() == 0:
        save_file(lora_params, os.path.join(lora_save_path, "adapter_model.safetensors"))
        with open(os.path.join(lora_save_path, "adapter_config.json"), "w", encoding="utf-8") as f:
            json.dump(peft_config, f, ensure_ascii=False, indent=4)
    dist.barrier()


def record_reference(model, path: str) -> None:
    """Logits of the trained (sharded) model on fixed inputs; every rank takes part in the forward."""
    with torch.no_grad():
        logits = model(input_ids=REFERENCE_IDS).logits
    if dist.get_rank() == 0:
        torch.save({"input_ids": REFERENCE_IDS, "logits": logits.detach().clone()}, path)


def main() -> None:
    args = parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    model = build_actor(args)
    vocab_size = model.config.vocab_size
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    scheduler = get_constant_schedule_with_warmup(optimizer, num_warmup_steps=0)
    checkpoints = FSDPCheckpointManager(model, optimizer, scheduler, processing_class=tokenizer)
    tracking = (
        Tracking("hubkit-tests", "tiny-verl", default_backend=["file"]) if dist.get_rank() == 0 else None
    )
    os.makedirs(args.reference_dir, exist_ok=True)

    for step in range(1, args.steps + 1):
        metrics = train_step(model, optimizer, scheduler, step, vocab_size)
        if tracking is not None:
            tracking.log(data=metrics, step=step)
        if step % args.save_freq == 0 or step == args.steps:
            actor_dir = os.path.join(args.out, f"global_step_{step}", "actor")
            checkpoints.save_checkpoint(local_path=actor_dir, global_step=step)
            dist.barrier()
            save_lora_adapter(model, actor_dir)
            record_reference(model, os.path.join(args.reference_dir, f"global_step_{step}.pt"))
            if dist.get_rank() == 0:  # RayPPOTrainer._save_checkpoint, after every rank saved
                with open(os.path.join(args.out, "latest_checkpointed_iteration.txt"), "w") as f:
                    f.write(str(step))
            dist.barrier()
    if tracking is not None:
        tracking.logger["file"].finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
