"""The demo's base model: a tiny Qwen3 that answers in the run's format some of the time.

A GRPO run can only reinforce what the model already does now and then: a random model never writes
``<reasoning>…</reasoning><answer>…</answer>``, so every reward is 0 and nothing is learned. The demo
therefore builds its base model in three short steps, all on CPU:

1. the tokenizer: Qwen3's own (pre-tokenization, special tokens, chat template), retrained on the demo's
   problems to a few hundred tokens. With the full 151,669-token vocabulary the output layer is over 95 %
   of the compute, and the run would take many minutes instead of seconds;
2. the model: `Qwen3ForCausalLM` built from config with `hubkit.demo.tiny`'s sizes, random weights;
3. a supervised warm-up on the warm-up problems, where only `FORMAT_SHARE` of the answers use the run's
   format and the others are a plain sentence ("The answer is 12."). The base model thus knows the format
   but prefers the sentence: greedy decoding rarely gives the format, sampling gives it now and then,
   which is what the run's format rewards then turn into a habit.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hubkit.demo.problems import Problem
from hubkit.rewards.gsm8k import SYSTEM_PROMPT

VOCAB_SIZE = 512
FORMAT_SHARE = 0.4
WARMUP_STEPS = 1200
WARMUP_BATCH = 16
WARMUP_LEARNING_RATE = 3e-3
PROGRESS_EVERY = 200


def formatted_answer(problem: Problem) -> str:
    """The answer in the run's format (`SYSTEM_PROMPT`), as the strict format reward wants it."""
    return f"<reasoning>\n{problem.working}\n</reasoning>\n<answer>\n{problem.result}\n</answer>"


def plain_answer(problem: Problem) -> str:
    """The answer as a sentence: right, but worth no format reward."""
    return f"The answer is {problem.result}."


def chat(question: str) -> list[dict[str, str]]:
    """The run's prompt for one question: the seed's system prompt, then the question."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def build_tokenizer(problems: Sequence[Problem], out_dir: Path) -> Any:
    """Qwen3's tokenizer retrained on the prompts and answers of `problems` (`VOCAB_SIZE` tokens), saved in
    `out_dir`.

    Raises:
        TinyModelError: the Qwen3 tokenizer files are not installed.
    """
    from transformers import AutoTokenizer

    from hubkit.demo.tiny import qwen3_tokenizer_dir

    qwen3 = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())

    def texts() -> Iterator[str]:
        for problem in problems:  # each prompt's text without its special tokens, and both answers
            yield "\n".join(("system", SYSTEM_PROMPT, "user", problem.question, "assistant"))
            yield formatted_answer(problem)
            yield plain_answer(problem)

    tokenizer = qwen3.train_new_from_iterator(texts(), vocab_size=VOCAB_SIZE, show_progress=False)
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def build_model(tokenizer: Any, seed: int) -> Any:
    """A `Qwen3ForCausalLM` with `hubkit.demo.tiny`'s sizes and random weights for `tokenizer`."""
    from hubkit.demo.tiny import tiny_causal_lm

    eos, pad = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    return tiny_causal_lm(
        "qwen3", vocab_size=len(tokenizer), eos_id=eos, pad_id=pad, tie_word_embeddings=False, seed=seed
    )


def warm_up(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    *,
    seed: int,
    steps: int = WARMUP_STEPS,
    progress: Callable[[int, float], None] | None = None,
) -> None:
    """Supervised training on the answers to `problems` (`FORMAT_SHARE` in the run's format), in place:
    `steps` optimizer steps of `WARMUP_BATCH` examples, `seed` ordering the batches and picking which
    answers use the format; `progress` is called with (step, loss) every `PROGRESS_EVERY` steps and at the
    last."""
    import torch

    rng = random.Random(seed)
    eos, pad = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    examples = []
    for problem in problems:
        prompt = tokenizer.apply_chat_template(
            chat(problem.question), tokenize=True, add_generation_prompt=True, return_dict=False
        )
        answer = formatted_answer(problem) if rng.random() < FORMAT_SHARE else plain_answer(problem)
        examples.append((list(prompt), [*tokenizer(answer)["input_ids"], eos]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=WARMUP_LEARNING_RATE, weight_decay=0.0)
    # Decaying to 0, so that the last batches' mix of formats does not decide the model's preference.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: 0.5 * (1 + math.cos(math.pi * i / steps))
    )
    model.train()
    for step in range(1, steps + 1):
        batch = rng.sample(examples, WARMUP_BATCH)
        length = max(len(p) + len(a) for p, a in batch)
        input_ids = torch.full((len(batch), length), pad)
        labels = torch.full((len(batch), length), -100)
        attention_mask = torch.zeros((len(batch), length), dtype=torch.long)
        for row, (prompt, answer) in enumerate(batch):
            end = len(prompt) + len(answer)
            input_ids[row, :end] = torch.tensor(prompt + answer)
            labels[row, len(prompt) : end] = torch.tensor(answer)  # the loss is on the answer only
            attention_mask[row, :end] = 1
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if progress is not None and (step % PROGRESS_EVERY == 0 or step == steps):
            progress(step, loss.item())
    model.eval()


def model_card(steps: int, problems: int) -> str:
    """The base model's README.md: what it is and how it was made (Apache-2.0, as the Qwen3 tokenizer is)."""
    return f"""---
license: apache-2.0
library_name: transformers
pipeline_tag: text-generation
tags:
- hubkit-demo
---

# A tiny Qwen3 for hubkit's demo

`Qwen3ForCausalLM` with random weights, built from config, and Qwen3's tokenizer retrained on the demo's
arithmetic word problems. A supervised warm-up of {steps} steps on {problems} problems taught it to
answer; {FORMAT_SHARE:.0%} of those answers used the `<reasoning>…</reasoning><answer>…</answer>` format
and the others a plain sentence, so it answers in the format only some of the time. `make demo` then
trains it with GRPO.
"""


def build_base_model(
    out_dir: Path,
    problems: Sequence[Problem],
    *,
    seed: int = 0,
    steps: int = WARMUP_STEPS,
    progress: Callable[[int, float], None] | None = None,
) -> Path:
    """Tokenizer, model and warm-up (see the module docstring; `seed` for the weights and the warm-up), saved
    in `out_dir` as a model folder (config.json, generation_config.json, model.safetensors, tokenizer files,
    README.md), which it returns.

    Raises:
        TinyModelError: the Qwen3 tokenizer files are not installed.
    """
    tokenizer = build_tokenizer(problems, out_dir)
    model = build_model(tokenizer, seed)
    warm_up(model, tokenizer, problems, seed=seed, steps=steps, progress=progress)
    model.save_pretrained(out_dir)
    (out_dir / "README.md").write_text(model_card(steps, len(problems)), encoding="utf-8")
    return out_dir
