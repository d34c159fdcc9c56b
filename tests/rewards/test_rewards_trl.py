"""Real TRL GRPOTrainer steps on the tiny Qwen3 with hubkit's rewards: logged names and the advantages used."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hubkit.errors import RewardSpecError
from hubkit.rewards.aggregate import aggregate
from hubkit.rewards.build import aggregate_with_spec, build
from hubkit.rewards.spec import RewardComponent, RewardSpec, deepscaler_length_penalty
from hubkit.rewards.trl import HubkitGRPOTrainer, grpo_config_kwargs, reward_funcs, trl_matches
from tests.support.tiny import IM_END_ID

MAX_LEN = 8
NUM_GENERATIONS = 4


class CapturingTrainer(HubkitGRPOTrainer):
    """Records, per generation batch: TRL's rewards, TRL's own advantages, and the advantages training used."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches: list[tuple[torch.Tensor, np.ndarray, np.ndarray]] = []

    def _calculate_rewards(self, *args):
        self._captured_rewards = super()._calculate_rewards(*args).clone()
        return self._captured_rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        n = self._captured_rewards.shape[0]
        trl_own = np.asarray(list(self._logs["advantages"])[-n:])  # TRL logs the advantages it computed
        self.batches.append((self._captured_rewards, trl_own, output["advantages"].cpu().numpy()))
        return output


def _model_that_sometimes_stops(local_dir):
    """The tiny model with a random <|im_end|> output row, so completions end at varied lengths.

    A random model otherwise never samples EOS: every completion would be MAX_LEN tokens and the length
    penalty would not vary within a group.
    """
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(local_dir)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        model.lm_head.weight[IM_END_ID] = torch.randn(model.config.hidden_size, generator=generator) * 1.5
    return model


def test_reward_funcs_have_stable_names_and_read_trl_inputs():
    spec = RewardSpec(
        components=(
            RewardComponent("gsm8k_correctness"),
            RewardComponent("length_penalty", 0.5, {"max_completion_length": 10}),
        )
    )
    with build(spec) as reward:
        correctness, length = reward_funcs(reward)
        assert (correctness.__name__, length.__name__) == ("gsm8k_correctness", "length_penalty")
        completions = [
            [{"role": "assistant", "content": "<answer>\n7\n</answer>"}],
            [{"role": "assistant", "content": "8"}],
        ]
        ids = [[1, 2, 3, 4, 5], [9, 9]]
        assert correctness(
            prompts=["p", "p"], completions=completions, completion_ids=ids, answer=["#### 7"] * 2
        ) == [2.0, 0.0]
        # Token counts from completion_ids, not characters; no ground truth needed for the length term.
        assert length(prompts=["p", "p"], completions=["x" * 99, "y"], completion_ids=ids) == [-0.5, -0.2]
        with pytest.raises(RewardSpecError, match="no 'answer' column for gsm8k_correctness"):
            correctness(prompts=["p"], completions=["x"], completion_ids=[[1]])
    assert grpo_config_kwargs(spec) == {
        "reward_weights": [1.0, 0.5],
        "multi_objective_aggregation": "sum_then_normalize",
        "scale_rewards": "group",
    }


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
def test_grpo_trainer_logs_components_and_uses_hubkits_advantages(tiny_qwen3, tmp_path, aggregation):
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    if aggregation == "sum_then_normalize":
        # TRL's epsilon: TRL's own aggregation is already exact for this spec.
        spec = deepscaler_length_penalty(lam=0.5, max_len=MAX_LEN, epsilon=1e-4)
        assert trl_matches(spec)
    else:
        # GDPO without the batch z-score, verl's epsilon: differs from TRL, needs HubkitGRPOTrainer.
        spec = deepscaler_length_penalty(
            lam=0.5, max_len=MAX_LEN, aggregation=aggregation, batch_whiten=False
        )
        assert not trl_matches(spec)

    questions = [
        f"What is {a} + {b}? Put the answer in \\boxed{{}}." for a, b in [(2, 3), (7, 5), (4, 4), (9, 1)]
    ]
    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": q}] for q in questions],
            "answer": ["5", "12", "8", "10"],
        }
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3.local_dir, padding_side="left")
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        optim="adamw_torch",
        max_steps=2,
        per_device_train_batch_size=8,  # two prompts × NUM_GENERATIONS per step: two groups per batch
        num_generations=NUM_GENERATIONS,
        max_completion_length=MAX_LEN,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        gradient_checkpointing=False,
        seed=0,
        **grpo_config_kwargs(spec),
    )
    with build(spec, num_workers=1) as reward:
        trainer = CapturingTrainer(
            model=_model_that_sometimes_stops(tiny_qwen3.local_dir),
            reward_funcs=reward_funcs(reward),
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=LoraConfig(
                r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
            ),
            reward_spec=spec,
        )
        trainer.train()

    logged = [entry for entry in trainer.state.log_history if "rewards/length_penalty/mean" in entry]
    assert len(logged) == 2
    assert all("rewards/math_correctness/mean" in entry for entry in logged)
    assert all(-1.0 <= entry["rewards/length_penalty/mean"] < 0 for entry in logged)

    assert len(trainer.batches) == 2
    varied = False
    for rewards, trl_own, used in trainer.batches:
        scores = {
            "math_correctness": rewards[:, 0].double().numpy(),
            "length_penalty": rewards[:, 1].double().numpy(),
        }
        groups = [i // NUM_GENERATIONS for i in range(len(used))]
        expected = aggregate_with_spec(spec, scores, groups)
        assert used == pytest.approx(expected.advantages, abs=1e-5)
        # TRL's own computation in the same step: equal to hubkit's for the matching spec, and equal to
        # hubkit's GDPO with batch whitening and epsilon 1e-4 (TRL's normalize_then_sum) otherwise.
        trl_equivalent = aggregate(
            scores,
            spec.weights,
            groups,
            mode=spec.aggregation,
            epsilon=1e-4,
            batch_whiten=aggregation == "normalize_then_sum",
        )
        assert trl_own == pytest.approx(trl_equivalent.advantages, abs=1e-4)
        varied = varied or expected.zero_std_fraction < 1.0
        if aggregation == "normalize_then_sum" and expected.zero_std_fraction < 1.0:
            assert not np.allclose(trl_own, used, atol=1e-3)  # the subclass changed what training used
    assert varied, "completion lengths never varied within a group: the test would prove nothing"


def test_trainer_refuses_weights_that_do_not_match_the_spec(tiny_qwen3, tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    spec = RewardSpec(
        components=(RewardComponent("length_penalty", 0.5, {"max_completion_length": MAX_LEN}),)
    )
    wrong = grpo_config_kwargs(spec) | {"reward_weights": [0.25]}
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=NUM_GENERATIONS,
        max_completion_length=MAX_LEN,
        report_to="none",
        **wrong,
    )
    dataset = Dataset.from_dict({"prompt": ["What is 1 + 1?"] * 4, "answer": ["2"] * 4})
    with build(spec) as reward, pytest.raises(RewardSpecError, match="reward_weights"):
        HubkitGRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir),
            reward_funcs=reward_funcs(reward),
            args=args,
            train_dataset=dataset,
            processing_class=AutoTokenizer.from_pretrained(tiny_qwen3.local_dir, padding_side="left"),
            reward_spec=spec,
        )
