"""A merged model checked against the adapter it came from, each loaded as a user loads it.

    check = check_merged(MergedCheckInput(base_dir, adapter_dir, adapter_tokenizer_dir, merged_dir,
                                           questions, system_prompt, artifact=MERGED.default_repo_id(...)))
    check.failures  # () when the merged folder is the adapter's model

The adapter side is `PeftModel.from_pretrained(base, adapter_dir)` with the run's tokenizer (its chat
template) and the base's generation config; the merged side is `AutoModelForCausalLM.from_pretrained` of the
merged folder with the merged folder's own tokenizer and generation config. Compared, in order:

  prompt ids     each question rendered by each side's chat template (in the bounded render process)
  end tokens     the EOS / end-of-turn ids each side stops at (generation config and tokenizer)
  logits         the adapter's own greedy answer to each prompt, teacher-forced through both models: the
                 largest |Δ| of the next-token logits over every answer position, within `logit_bound`
  top-1          agreement of the two models' argmax at those positions; a position whose adapter top-1
                 leads its runner-up by more than twice the bound must agree
  effect         the adapter against the base (its adapters disabled, same load): the logits must move by
                 more than `EFFECT_MARGIN` times the merged model's measured difference, else the comparison
                 could not tell the merged model from the base (an adapter that loads as a no-op moves none)

The two models are loaded one after the other (the adapter's model freed first), each at the base's dtype,
so the peak is one model and the logits of a few short answers.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubkit.formats.model_config import CONFIG, read_model_config

# One rounding of a value to the dtype, relative (the unit roundoff: half the spacing of numbers near 1).
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}
BOUND_FACTOR = 8.0  # see `logit_bound` and docs/design.md ("The merged model verified")
ROUNDED_LINEARS_PER_LAYER = 7  # q, k, v, o, gate, up, down: each merged weight rounded once
EFFECT_MARGIN = 2.0  # the adapter's effect against the merged model's measured |Δ| (module docstring)
DEFAULT_QUESTIONS = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
    "How much did she earn?",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?",
)
MAX_QUESTIONS = 3
MAX_NEW_TOKENS = 24


@dataclass(frozen=True)
class MergedCheckInput:
    """What the check loads: the base, the adapter and the tokenizer it trained with, the merged folder."""

    base_dir: Path
    adapter_dir: Path
    adapter_tokenizer_dir: Path  # the run's tokenizer and chat template (the base's when it saved none)
    merged_dir: Path
    questions: tuple[str, ...]
    system_prompt: str | None
    artifact: str  # how messages name the merged model (its repo id)
    adapter: str  # how messages name the adapter (e.g. "step 3")
    max_new_tokens: int = MAX_NEW_TOKENS


@dataclass(frozen=True)
class MergedCheck:
    """The check's result, as the push refuses from it and the cards and manifest record it.

    Attributes:
        artifact: the merged model checked; adapter: what it was compared with.
        dtype: the merged weights' dtype, which sets `bound`.
        prompts: the prompts compared; tokens: the answer positions teacher-forced.
        max_delta: the largest |Δ next-token logit| merged against adapter; bound: what it must stay within.
        agreement: the share of positions where both models' top-1 token agree.
        adapter_effect: the largest |Δ logit| adapter against base (must exceed `EFFECT_MARGIN`·`max_delta`).
        failures: one phrase per failed comparison; empty when the merged model is the adapter's.
    """

    artifact: str
    adapter: str
    dtype: str
    prompts: int
    tokens: int
    max_delta: float
    bound: float
    agreement: float
    adapter_effect: float
    failures: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    def refusal(self) -> str:
        """One line: which artifact, what differs and by how much."""
        return f"{self.artifact} is not the model of {self.adapter}: {'; '.join(self.failures)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "artifact": self.artifact,
            "adapter": self.adapter,
            "dtype": self.dtype,
            "prompts": self.prompts,
            "tokens": self.tokens,
            "max_abs_logit_diff": _rounded(self.max_delta),
            "bound": _rounded(self.bound),
            "top1_agreement": round(self.agreement, 4),
            "adapter_effect": _rounded(self.adapter_effect),
            "passed": self.passed,
        }


def _rounded(value: float) -> float:
    return float(f"{value:.3g}")


def logit_bound(dtype: str, layers: int, logit_scale: float) -> float:
    """The largest |Δ logit| rounding alone explains between a merged model and its adapter at `dtype`.

    Each merged weight is W + s·B·A rounded once to the dtype (relative error ≤ u, the unit roundoff), where
    PEFT rounds W·x and s·B·A·x separately: each of the `ROUNDED_LINEARS_PER_LAYER`·`layers` Linears on the
    path perturbs the residual stream by about u relative, independent errors that add in quadrature
    (√n), and a logit moves by that relative error times its scale (the largest |logit|, at least 1).
    `BOUND_FACTOR` covers the constant (fan-in sums, norms); docs/design.md gives the measured figures.
    """
    u = UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF["bfloat16"])
    return BOUND_FACTOR * u * math.sqrt(ROUNDED_LINEARS_PER_LAYER * max(layers, 1)) * max(logit_scale, 1.0)


def questions_of(samples: Sequence[Any]) -> tuple[str, ...]:
    """The check's held-out prompts: the run's first evaluated problems, else a few GSM8K-style ones."""
    seen = dict.fromkeys(s.problem for s in sorted(samples, key=lambda s: s.problem_index))
    return tuple(seen)[:MAX_QUESTIONS] or DEFAULT_QUESTIONS


def _forced_logits(model: Any, sequences: Sequence[tuple[int, int, list[int]]]) -> list[Any]:
    """Each sequence's next-token logits (float32) at its answer positions: (prompt length, end, ids)."""
    import torch

    device = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for start, end, ids in sequences:
            logits = model(torch.tensor([ids], device=device)).logits[0, start - 1 : end - 1]
            out.append(logits.float().cpu())
    return out


def _answers(
    model: Any, prompts: Sequence[tuple[int, ...]], stop_ids: Sequence[int], limit: int
) -> list[Any]:
    import torch
    from transformers import GenerationConfig

    device = next(model.parameters()).device
    config = GenerationConfig(
        max_new_tokens=limit, do_sample=False, eos_token_id=list(stop_ids), pad_token_id=stop_ids[0]
    )
    sequences = []
    with torch.no_grad():
        for prompt in prompts:
            ids = model.generate(torch.tensor([prompt], device=device), generation_config=config)[0].tolist()
            sequences.append((len(prompt), len(ids), ids))
    return sequences


def check_merged(given: MergedCheckInput) -> MergedCheck:
    """Compare the merged folder with the adapter, loaded as users load them (module docstring).

    Raises:
        EvalError: a chat template cannot render the prompts.
    """
    import torch

    from hubkit.evaluate.backend_transformers import load_model
    from hubkit.evaluate.chat import load_tokenizer, render_prompts, stop_token_ids

    failures: list[str] = []
    questions = given.questions[:MAX_QUESTIONS]
    ours = render_prompts(given.adapter_tokenizer_dir, questions, given.system_prompt)
    theirs = render_prompts(given.merged_dir, questions, given.system_prompt)
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    if differing:
        failures.append(f"the chat template renders other prompt token ids ({len(differing)} of {len(ours)})")
    stops = stop_token_ids(given.base_dir, load_tokenizer(given.adapter_tokenizer_dir))
    merged_stops = stop_token_ids(given.merged_dir, load_tokenizer(given.merged_dir))
    if set(stops) != set(merged_stops):
        failures.append(f"end tokens {sorted(merged_stops)} instead of {sorted(stops)}")

    config = read_model_config(given.merged_dir / CONFIG)
    dtype, layers = config.dtype, config.num_hidden_layers or 1
    if failures:  # the two sides are not asked the same: their logits would compare nothing
        return MergedCheck(
            given.artifact, given.adapter, dtype, len(ours), 0, 0.0, 0.0, 0.0, 0.0, tuple(failures)
        )
    model = load_model(given.base_dir, {"adapter": given.adapter_dir}, dtype="auto")
    sequences = _answers(model, ours, stops, given.max_new_tokens)
    adapter_logits = _forced_logits(model, sequences)
    with model.disable_adapter():
        base_logits = _forced_logits(model, sequences)
    del model  # freed before the merged model loads: one model in memory at a time
    gc.collect()
    merged_model = load_model(given.merged_dir, {}, dtype="auto")
    merged_logits = _forced_logits(merged_model, sequences)
    del merged_model
    gc.collect()

    adapter, merged, base = (torch.cat(x) for x in (adapter_logits, merged_logits, base_logits))
    bound = logit_bound(dtype, layers, float(adapter.abs().max()))
    max_delta = float((merged - adapter).abs().max())
    effect = float((adapter - base).abs().max())
    agree = merged.argmax(-1) == adapter.argmax(-1)
    top2 = adapter.topk(2, dim=-1).values
    decided = (top2[:, 0] - top2[:, 1]) > 2 * bound
    if max_delta > bound:
        failures.append(f"logits differ by up to {max_delta:.3g} (bound {bound:.3g} at {dtype})")
    if bool((decided & ~agree).any()):
        failures.append(f"top-1 token differs at {int((decided & ~agree).sum())} of {len(agree)} positions")
    if effect <= EFFECT_MARGIN * max_delta or effect == 0.0:
        failures.append(
            f"{given.adapter} moves the base's logits by only {effect:.3g}, not clear of the merged model's own "
            f"difference {max_delta:.3g}: the merged model cannot be told from the base (an update this small is "
            f"rounded away at {dtype}: train longer, or --no-merged publishes the adapters alone)"
        )
    return MergedCheck(
        artifact=given.artifact,
        adapter=given.adapter,
        dtype=dtype,
        prompts=len(ours),
        tokens=len(agree),
        max_delta=max_delta,
        bound=bound,
        agreement=float(agree.float().mean()),
        adapter_effect=effect,
        failures=tuple(failures),
    )
