"""Run hubkit's verl reward manager and advantage estimator through verl 0.6.1's own code paths.

Runs in verl's environment (.venv-verl). Loads ``hubkit/integrations/verl_reward.py`` the way verl does
(``load_reward_manager`` with ``custom_reward_function.path``), scores a real `DataProto` with
``compute_reward``, and computes advantages with ``ray_trainer.compute_advantage`` for the estimator
named on the command line. Writes what it saw as JSON for the test to compare with hubkit's core.

Usage: python rewards_check.py TOKENIZER_DIR REQUEST_JSON OUT_JSON
REQUEST_JSON: a list of cases {"spec": {...}, "rollouts": [{"uid", "prompt", "response", "ground_truth"}],
              "estimators": ["hubkit", "grpo"], "validate": false}.
OUT_JSON: {"cases": one result per case, "spec_loading": how reward_kwargs are read, with the errors}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.ray_trainer import compute_advantage, compute_response_mask
from verl.trainer.ppo.reward import compute_reward, load_reward_manager

REWARD_FILE = Path(__file__).resolve().parents[2] / "hubkit" / "integrations" / "verl_reward.py"


def make_batch(tokenizer, rollouts: list[dict]) -> DataProto:
    """Left-padded prompts and right-padded responses, as verl's rollout produces them."""
    prompts = [tokenizer(r["prompt"], add_special_tokens=False).input_ids for r in rollouts]
    # The model ended each response with <|im_end|>, which counts as a response token.
    eos = tokenizer.eos_token_id
    responses = [[*tokenizer(r["response"], add_special_tokens=False).input_ids, eos] for r in rollouts]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses)) + 2
    pad = tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    prompt_mask = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) for p in prompts])
    response_mask = torch.tensor([[1] * len(r) + [0] * (r_len - len(r)) for r in responses])
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": torch.cat([prompt_mask, response_mask], dim=1),
        },
        non_tensors={
            "uid": np.array([r["uid"] for r in rollouts], dtype=object),
            "data_source": np.array(["hubkit-test"] * len(rollouts), dtype=object),
            "reward_model": np.array([{"ground_truth": r["ground_truth"]} for r in rollouts], dtype=object),
        },
    )


def run_case(tokenizer, case: dict) -> dict:
    config = OmegaConf.create(
        {
            "custom_reward_function": {"path": str(REWARD_FILE), "name": "compute_score"},
            "reward_model": {"reward_manager": "hubkit"},
            "data": {"reward_fn_key": "data_source"},
        }
    )
    # Training runs one spec per process; this script runs several, so it forgets the previous one.
    if "custom_module" in sys.modules:
        sys.modules["custom_module"]._active_spec = None
    manager = load_reward_manager(
        config, tokenizer, num_examine=0, spec=json.dumps(case["spec"]), num_workers=1
    )
    batch = make_batch(tokenizer, case["rollouts"])
    if case.get("validate"):
        batch.meta_info["validate"] = True
    reward_tensor, extra = compute_reward(batch, manager)
    out = {
        "manager_class": type(manager).__name__,
        "reward_tensor_sum": reward_tensor.sum(-1).tolist(),
        # where the reward sits: the last response token
        "reward_positions": [int(row.nonzero()[-1]) if row.any() else -1 for row in reward_tensor],
        "extra": {k: [float(x) for x in v] for k, v in extra.items()},
        "advantages": {},
    }
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = reward_tensor
    batch.batch["response_mask"] = compute_response_mask(batch)
    for estimator in case.get("estimators", []):
        result = compute_advantage(
            batch, adv_estimator=estimator, num_repeat=1, config=AlgoConfig(adv_estimator=estimator)
        )
        advantages = result.batch["advantages"]
        mask = result.batch["response_mask"].bool()
        # One advantage per response, broadcast over its tokens: check that, then report it once.
        per_row = []
        for row, row_mask in zip(advantages, mask, strict=True):
            values = row[row_mask]
            if not torch.allclose(values, values[0].expand_as(values)) or row[~row_mask].abs().sum() != 0:
                raise SystemExit(f"{estimator}: advantages are not one value per response over its tokens")
            per_row.append(float(values[0]))
        out["advantages"][estimator] = per_row
    manager.reward.close()
    return out


def spec_loading(work_dir: Path, spec: dict) -> dict:
    """How `load_spec` reads reward_kwargs: a manifest file, inline JSON, and the errors a user can cause."""
    from hubkit.errors import RewardSpecError

    module = sys.modules["custom_module"]  # verl_reward.py, as verl loaded it
    manifest = work_dir / "hubkit.json"
    # A run manifest as the recipe writes it (write_manifest.py): read through `Manifest`.
    run = {"run_id": "r", "framework": "verl", "base_model": "Qwen/Qwen3-4B", "reward": spec}
    manifest.write_text(json.dumps(run))
    out = {"from_manifest": module.load_spec(spec_file=str(manifest)).to_dict()}
    out["from_json"] = module.load_spec(spec=json.dumps(spec)).to_dict()
    out["from_hydra"] = module.load_spec(spec=OmegaConf.create(spec)).to_dict()
    errors = {
        "neither": {},
        "both": {"spec": json.dumps(spec), "spec_file": str(manifest)},
        "missing_file": {"spec_file": str(work_dir / "nope.json")},
        "bad_json": {"spec": "{not json"},
        "unknown_component": {"spec": json.dumps({"components": [{"name": "eval"}]})},
    }
    out["errors"] = {}
    for name, kwargs in errors.items():
        try:
            module.load_spec(**kwargs)
            out["errors"][name] = None
        except RewardSpecError as e:
            out["errors"][name] = str(e)
    return out


def main() -> None:
    tokenizer_dir, request_path, out_path = sys.argv[1:4]
    cases = json.loads(Path(request_path).read_text())
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    results = [run_case(tokenizer, case) for case in cases]
    loading = spec_loading(Path(out_path).parent, cases[0]["spec"])
    Path(out_path).write_text(json.dumps({"cases": results, "spec_loading": loading}))


if __name__ == "__main__":
    main()
