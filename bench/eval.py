"""Benchmark: `hubkit eval`'s mixed-adapter pass against evaluating each checkpoint by loading it separately.

Builds the tiny Qwen3 (random weights, the real Qwen3 tokenizer) and 5 LoRA checkpoints (r=8 on every
linear layer, random non-zero weights) in a temporary folder, then answers the same GSM8K-style problems
for the base and the 5 checkpoints two ways, greedy, on this machine's CPU or GPU:

    mixed      load the base once and every checkpoint as a named adapter; one `generate` per batch of
               problems answers them for all 6 models (PEFT mixed-adapter batches)
    separate   for each model: load the base (and that one adapter), answer the problems, drop it

and prints the wall-time ratio mixed / separate (target <= 0.35), problems per second (each answered by all
6 models) and answers per second for both, and how many answers agree between the two ways.

    $ .venv/bin/python bench/eval.py [--problems 16] [--max-new-tokens 32] [--batch-size 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PROBLEM_FILES = (
    REPO_ROOT / "tests" / "data" / "gsm8k_heldout.jsonl",
    REPO_ROOT / "tests" / "data" / "gsm8k_mini.jsonl",
)
CHECKPOINTS = 5
TARGET_RATIO = 0.35
SYSTEM_PROMPT = "Respond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>"


def build(workdir: Path) -> tuple[Path, dict[str, Path]]:
    """The tiny base model and CHECKPOINTS adapters (seeded, so every run benchmarks the same models)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from hubkit.demo.tiny import build_tiny_qwen3

    base_dir = build_tiny_qwen3(workdir / "tiny-qwen3")
    adapters = {}
    for i in range(1, CHECKPOINTS + 1):
        torch.manual_seed(i)
        model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(base_dir),
            LoraConfig(
                r=8,
                lora_alpha=16,
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                init_lora_weights=False,
            ),
        )
        name = f"global_step_{20 * i}"
        model.save_pretrained(workdir / name)
        adapters[name] = workdir / name
    return base_dir, adapters


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each way, alternating; medians are printed"
    )
    args = parser.parse_args()

    from hubkit.evaluate import backend_transformers
    from hubkit.evaluate.chat import load_tokenizer, prompt_ids, stop_token_ids
    from hubkit.evaluate.generation import GenerationJob, GenerationSettings
    from hubkit.evaluate.results import BASE_NAME

    questions = [
        json.loads(line)["question"] for path in PROBLEM_FILES for line in path.read_text().splitlines()
    ]
    questions = questions[: args.problems]
    with tempfile.TemporaryDirectory(prefix="hubkit-bench-eval-") as tmp:
        base_dir, adapters = build(Path(tmp))
        tokenizer = load_tokenizer(base_dir)
        models = (BASE_NAME, *adapters)
        job = GenerationJob(
            base_dir=base_dir,
            models=models,
            adapters=tuple(adapters.items()),
            prompts=tuple(tuple(prompt_ids(tokenizer, q, SYSTEM_PROMPT)) for q in questions),
            settings=GenerationSettings(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size),
            stop_ids=stop_token_ids(base_dir, tokenizer),
            pad_id=tokenizer.pad_token_id,
        )

        def mixed() -> dict[str, list[list[int]]]:
            return backend_transformers.run(job)

        def separate() -> dict[str, list[list[int]]]:
            answers = {}
            for name in models:
                own = {name: adapters[name]} if name in adapters else {}
                single = GenerationJob(
                    job.base_dir,
                    (name,),
                    tuple(own.items()),
                    job.prompts,
                    job.settings,
                    job.stop_ids,
                    job.pad_id,
                )
                answers |= backend_transformers.run(single)
            return answers

        times: dict[str, list[float]] = {"mixed": [], "separate": []}
        answers: dict[str, dict[str, list[list[int]]]] = {}
        for i in range(args.repeat):
            for label, way in (("mixed", mixed), ("separate", separate))[:: 1 if i % 2 == 0 else -1]:
                start = time.perf_counter()
                answers[label] = way()
                times[label].append(time.perf_counter() - start)

    mixed_s, separate_s = statistics.median(times["mixed"]), statistics.median(times["separate"])
    ratio = mixed_s / separate_s
    n, m = len(questions), len(models)
    same = sum(
        a == b
        for name in models
        for a, b in zip(answers["mixed"][name], answers["separate"][name], strict=True)
    )
    print(
        f"{n} problems x {m} models (base + {CHECKPOINTS} checkpoints), {args.max_new_tokens} new tokens, greedy"
    )
    print(
        f"  mixed-adapter pass   {mixed_s:7.2f} s   {n / mixed_s:6.2f} problems/s   {n * m / mixed_s:6.2f} answers/s"
    )
    print(
        f"  each loaded alone    {separate_s:7.2f} s   {n / separate_s:6.2f} problems/s   {n * m / separate_s:6.2f} answers/s"
    )
    print(
        f"  ratio mixed/separate {ratio:.2f} (target <= {TARGET_RATIO}): {'ok' if ratio <= TARGET_RATIO else 'MISSED'}"
    )
    print(f"  identical answers    {same} of {n * m}")


if __name__ == "__main__":
    main()
