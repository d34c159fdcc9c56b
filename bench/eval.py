"""Benchmark `hubkit eval`: its mixed-adapter pass against loading each checkpoint separately, and (--memory)
the memory it needs on a CPU at the seed's size.

Speed. Builds the tiny Qwen3 (random weights, the real Qwen3 tokenizer) and 5 LoRA checkpoints (r=8 on every
linear layer, random non-zero weights) in a temporary folder, then answers the same GSM8K-style problems
for the base and the 5 checkpoints two ways, greedy, on this machine's CPU or GPU:

    mixed      load the base once and every checkpoint as a named adapter; one `generate` per batch of
               problems answers them for all 6 models (PEFT mixed-adapter batches)
    separate   for each model: load the base (and that one adapter), answer the problems, drop it

and prints the wall-time ratio mixed / separate (target <= 0.35), problems per second (each answered by all
6 models) and answers per second for both, and how many answers agree between the two ways (all of them in
float32; in bfloat16, `hubkit eval`'s default, a batch of other rows can round a near tie the other way).

    $ .venv/bin/python bench/eval.py [--problems 16] [--max-new-tokens 32] [--batch-size 8] [--repeat 3]
                                     [--dtype bfloat16]

A sweep (--sweep). 3 runs of 3 checkpoints each (9 adapters built the same way) and the base: the one pass
`hubkit eval --sweep` makes (one mixed-adapter job of the base and all 9 checkpoints) against `hubkit eval` of
each run (3 jobs of the base and its 3 checkpoints); prints the ratio (target <= 0.5), what bounds it, and how
many checkpoint answers agree.

    $ .venv/bin/python bench/eval.py --sweep [--problems 16] [--max-new-tokens 32] [--repeat 3]

Memory (--memory). A Qwen3-4B-shaped base (36 layers, hidden 2560, tied embeddings; random weights, bf16
shards: 8.0 GB, built shard by shard with bench/merge.py's builder) published to an embedded local Hub, and
a run with two r=16 all-linear checkpoints (132 MB each) pushed there as a release. A fresh child process
runs `hubkit eval --repo-id` of both checkpoints and the base (--problems problems, --max-new-tokens tokens,
greedy) on this CPU, downloading the release and the base through the Hub cache as a user's machine does,
and reports its peak RSS (VmHWM), printed against the size of the bf16 weights. Target: <= 11 GB (a 24 GB
GPU's memory with room for the KV cache, and a 16 GB machine's). --float32 measures `--dtype float32` too.

    $ .venv/bin/python bench/eval.py --memory [--problems 2] [--max-new-tokens 4] [--float32]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
PROBLEM_FILES = (
    REPO_ROOT / "tests" / "data" / "gsm8k_heldout.jsonl",
    REPO_ROOT / "tests" / "data" / "gsm8k_mini.jsonl",
)
CHECKPOINTS = 5
TARGET_RATIO = 0.35
SWEEP_RUNS, SWEEP_CHECKPOINTS, SWEEP_TARGET = 3, 3, 0.5
# Qwen3-4B: hidden, intermediate, attention heads, KV heads, head dim, vocabulary (padded); 36 layers.
QWEN3_4B_SHAPE = (2560, 9728, 32, 8, 128, 151936)
QWEN3_4B_LAYERS = 36
MEMORY_TARGET_BYTES = 11e9
SEED_STEPS = (100, 200)
BASE_REPO, RELEASE_REPO = "bench/qwen3-4b-shaped", "bench/run-4b"
SYSTEM_PROMPT = "Respond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>"


def build(workdir: Path, count: int = CHECKPOINTS) -> tuple[Path, dict[str, Path]]:
    """The tiny base model and `count` adapters (seeded, so every run benchmarks the same models)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
    from tests.support.tiny import build_tiny_qwen3

    base_dir = build_tiny_qwen3(workdir / "tiny-qwen3")
    adapters = {}
    for i in range(1, count + 1):
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


def alternated(ways: dict[str, Any], repeat: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Each way's median seconds over `repeat` rounds (which goes first alternating), and its last answers."""
    times: dict[str, list[float]] = {label: [] for label in ways}
    answers: dict[str, Any] = {}
    for i in range(repeat):
        for label, way in list(ways.items())[:: 1 if i % 2 == 0 else -1]:
            start = time.perf_counter()
            answers[label] = way()
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(t) for label, t in times.items()}, answers


def same_answers(first: dict, second: dict, names: Any) -> int:
    """How many answers of the named models are the same token ids both ways."""
    return sum(a == b for name in names for a, b in zip(first[name], second[name], strict=True))


def answers_job(base_dir: Path, prompts: Any, adapters: dict[str, Path], args: argparse.Namespace) -> Any:
    """The `GenerationJob` of the base and `adapters` answering `prompts` with the benchmark's settings."""
    from hubkit.evaluate.chat import load_tokenizer, stop_token_ids
    from hubkit.evaluate.generation import GenerationJob, GenerationSettings
    from hubkit.runs.eval_results import BASE_NAME

    tokenizer = load_tokenizer(base_dir)
    return GenerationJob(
        base_dir=base_dir,
        models=(BASE_NAME, *adapters),
        adapters=tuple(adapters.items()),
        prompts=prompts,
        settings=GenerationSettings(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size),
        stop_ids=stop_token_ids(base_dir, tokenizer),
        pad_id=tokenizer.pad_token_id,
        dtype=args.dtype,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problems", type=int, default=None, help="[default: 16; --memory: 2]")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="[default: 32; --memory: 4]")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each way, alternating; medians are printed"
    )
    parser.add_argument("--dtype", default="bfloat16", help="the base's dtype (speed)  [default: bfloat16]")
    parser.add_argument("--memory", action="store_true", help="measure peak RSS at the seed's size instead")
    parser.add_argument(
        "--sweep", action="store_true", help="a sweep's one pass against each run's own pass instead"
    )
    parser.add_argument("--float32", action="store_true", help="--memory: also measure --dtype float32")
    if sys.argv[1:2] == ["--memory-worker"]:  # the child of --memory: the rest is `hubkit`'s command line
        print(json.dumps(memory_worker(sys.argv[2:])))
        return
    args = parser.parse_args()
    if args.memory:
        run_memory(args.problems or 2, args.max_new_tokens or 4, args.float32)
        return
    args.problems, args.max_new_tokens = args.problems or 16, args.max_new_tokens or 32

    from hubkit.evaluate import backend_transformers
    from hubkit.evaluate.chat import render_prompts
    from hubkit.runs.eval_results import BASE_NAME

    questions = [
        json.loads(line)["question"] for path in PROBLEM_FILES for line in path.read_text().splitlines()
    ]
    questions = questions[: args.problems]
    if args.sweep:
        run_sweep(questions, args)
        return
    with tempfile.TemporaryDirectory(prefix="hubkit-bench-eval-") as tmp:
        base_dir, adapters = build(Path(tmp))
        models = (BASE_NAME, *adapters)
        job = answers_job(base_dir, render_prompts(base_dir, questions, SYSTEM_PROMPT), adapters, args)

        def mixed() -> dict[str, list[list[int]]]:
            return backend_transformers.run(job)

        def separate() -> dict[str, list[list[int]]]:
            answers = {}
            for name in models:
                own = {name: adapters[name]} if name in adapters else {}
                single = dataclasses.replace(job, models=(name,), adapters=tuple(own.items()))
                answers |= backend_transformers.run(single)
            return answers

        seconds, answers = alternated({"mixed": mixed, "separate": separate}, args.repeat)

    mixed_s, separate_s = seconds["mixed"], seconds["separate"]
    ratio = mixed_s / separate_s
    n, m = len(questions), len(models)
    same = same_answers(answers["mixed"], answers["separate"], models)
    print(
        f"{n} problems x {m} models (base + {CHECKPOINTS} checkpoints), {args.max_new_tokens} new tokens, greedy, "
        f"{args.dtype}"
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


# --- A sweep's one pass -------------------------------------------------------------------------------------


def run_sweep(questions: list[str], args: argparse.Namespace) -> None:
    """SWEEP_RUNS runs of SWEEP_CHECKPOINTS checkpoints each: `hubkit eval --sweep`'s one pass (the base and
    all the checkpoints in one mixed-adapter job) against `hubkit eval` of each run (the base and its own
    checkpoints, one job per run), the jobs each path builds (`execute_evals`, `execute_eval`)."""
    from hubkit.evaluate import backend_transformers
    from hubkit.evaluate.chat import render_prompts

    with tempfile.TemporaryDirectory(prefix="hubkit-bench-eval-sweep-") as tmp:
        base_dir, adapters = build(Path(tmp), SWEEP_RUNS * SWEEP_CHECKPOINTS)
        names = list(adapters)
        runs = [names[i * SWEEP_CHECKPOINTS : (i + 1) * SWEEP_CHECKPOINTS] for i in range(SWEEP_RUNS)]
        prompts = render_prompts(base_dir, questions, SYSTEM_PROMPT)  # once: both ways ask the same

        def job(checkpoints: list[str]) -> Any:
            return answers_job(base_dir, prompts, {name: adapters[name] for name in checkpoints}, args)

        one_pass, run_by_run = job(names), [job(run) for run in runs]  # built before the clock starts
        ways = {
            "one pass": lambda: backend_transformers.run(one_pass),
            "each run": lambda: {
                k: v for own in run_by_run for k, v in backend_transformers.run(own).items()
            },
        }
        seconds, answers = alternated(ways, args.repeat)
    one, each = seconds["one pass"], seconds["each run"]
    n = len(questions)
    rows_one, rows_each = n * (1 + len(names)), n * SWEEP_RUNS * (1 + SWEEP_CHECKPOINTS)
    same = same_answers(answers["one pass"], answers["each run"], names)
    print(
        f"{SWEEP_RUNS} runs x {SWEEP_CHECKPOINTS} checkpoints + the base, {n} problems, {args.max_new_tokens} new "
        f"tokens, greedy, {args.dtype}, batch {args.batch_size}"
    )
    print(f"  one pass (hubkit eval --sweep)   {one:7.2f} s   {rows_one} answers")
    print(
        f"  each run (hubkit eval per run)   {each:7.2f} s   {rows_each} answers (the base {SWEEP_RUNS} times)"
    )
    print(f"  ratio one pass / each run {one / each:.2f} (target <= {SWEEP_TARGET})")
    print(
        f"  what bounds it: the answers to compute, {rows_one} against {rows_each} ({rows_one / rows_each:.2f}); "
        "a CPU's decoding cost grows with the rows of a batch, so one pass saves the base's repeated answers "
        "and model loads, not the checkpoints' answers"
    )
    print(f"  identical checkpoint answers {same} of {n * len(names)}")


# --- Memory at the seed's size ------------------------------------------------------------------------------


def build_release(workdir: Path, endpoint: str) -> int:
    """The Qwen3-4B-shaped base on the local Hub, and a pushed release of two checkpoints trained on it.

    Returns:
        The size of the base's bf16 shards in bytes.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
    import merge  # bench/merge.py, beside this file
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars

    from hubkit.publish import PushRequest, push_run
    from tests.support.runs import make_run
    from tests.support.tiny import copy_tokenizer

    disable_progress_bars()
    # merge.py's builder reads the model's shape from its module constants (Qwen3-1.7B's): set Qwen3-4B's.
    merge.HIDDEN, merge.INTERMEDIATE, merge.HEADS, merge.KV_HEADS, merge.HEAD_DIM, merge.VOCAB = (
        QWEN3_4B_SHAPE
    )
    started = time.perf_counter()
    base_dir = workdir / "base-4b"
    weights_bytes = merge.build_base(base_dir, QWEN3_4B_LAYERS)
    copy_tokenizer(base_dir)
    api = HfApi(endpoint=endpoint)
    api.create_repo(BASE_REPO)
    api.upload_folder(repo_id=BASE_REPO, folder_path=base_dir)
    shutil.rmtree(base_dir)  # the eval downloads it from the Hub, as a user's machine does
    hidden, inter, heads, kv_heads, head_dim, _vocab = QWEN3_4B_SHAPE
    per_layer = {
        "self_attn.q_proj": (hidden, heads * head_dim),
        "self_attn.k_proj": (hidden, kv_heads * head_dim),
        "self_attn.v_proj": (hidden, kv_heads * head_dim),
        "self_attn.o_proj": (heads * head_dim, hidden),
        "mlp.gate_proj": (hidden, inter),
        "mlp.up_proj": (hidden, inter),
        "mlp.down_proj": (inter, hidden),
    }
    shapes = {f"model.layers.{i}.{m}": s for i in range(QWEN3_4B_LAYERS) for m, s in per_layer.items()}
    run_dir = make_run(
        workdir / "runs",
        SEED_STEPS,
        base_model=BASE_REPO,
        shapes=shapes,
        rank=16,
        run_id="run-4b",
        scale=0.01,
    )
    push_run(PushRequest(run_dir, RELEASE_REPO, merged=False, space=False, endpoint=endpoint))
    shutil.rmtree(run_dir)
    print(
        f"built and published the seed-size base and {len(SEED_STEPS)} checkpoints in "
        f"{time.perf_counter() - started:.0f} s"
    )
    return weights_bytes


def memory_worker(argv: list[str]) -> dict[str, float]:
    """In a fresh process: `hubkit eval ARGV` on this CPU; its peak RSS in bytes and its wall time."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import merge

    from hubkit.cli import main as hubkit

    started = time.perf_counter()
    hubkit(argv)
    return {"wall_s": time.perf_counter() - started, "peak_rss": merge.peak_rss_mib() * 2**20}


def run_memory(problems: int, max_new_tokens: int, float32: bool) -> None:
    from hubkit.localhub import LocalHub

    workdir = Path(tempfile.mkdtemp(prefix="hubkit-bench-eval-memory-"))
    hub = LocalHub(workdir / "hub").start()
    # The client reads these at import time: set them before anything imports huggingface_hub.
    os.environ.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(workdir / "hf_home"))
    os.environ.pop("HF_TOKEN", None)
    try:
        weights_bytes = build_release(workdir, hub.endpoint)
        rows = [json.loads(line)["question"] for line in PROBLEM_FILES[0].read_text().splitlines()]
        problem_file = workdir / "problems.jsonl"
        answers = [json.loads(line)["answer"] for line in PROBLEM_FILES[0].read_text().splitlines()]
        problem_file.write_text(
            "".join(
                json.dumps({"question": q, "answer": a}) + "\n" for q, a in zip(rows, answers, strict=True)
            )
        )
        argv = ["eval", "--repo-id", RELEASE_REPO, "--problems", str(problem_file), "--n", str(problems)]
        argv += ["--max-new-tokens", str(max_new_tokens), "--metric", "gsm8k_correctness", "--quiet"]
        measured = {}
        # The first run downloads the base into the Hub cache; a download streams to disk, holding little.
        for dtype in ("bfloat16", "float32") if float32 else ("bfloat16",):
            os.sync()  # the builder's writes are not the worker's to wait for
            out = ["--out", str(workdir / f"eval-{dtype}"), "--dtype", dtype]
            command = [sys.executable, __file__, "--memory-worker", *argv, *out]
            result = subprocess.run(command, check=True, capture_output=True, text=True)
            measured[dtype] = json.loads(result.stdout.strip().splitlines()[-1])
    finally:
        hub.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    gb = 1e9
    print(
        f"Qwen3-4B-shaped base, bf16 weights {weights_bytes / gb:.2f} GB; `hubkit eval --repo-id` of the base and "
        f"{len(SEED_STEPS)} checkpoints (r=16, all linear layers), {problems} problems x {max_new_tokens} tokens, "
        "on this CPU"
    )
    for dtype, m in measured.items():
        verdict = "ok" if m["peak_rss"] <= MEMORY_TARGET_BYTES else "MISSED"
        print(
            f"  --dtype {dtype:<9} peak RSS {m['peak_rss'] / gb:5.2f} GB = {m['peak_rss'] / weights_bytes:4.2f}x "
            f"the bf16 weights (target <= {MEMORY_TARGET_BYTES / gb:.0f} GB: {verdict}), {m['wall_s']:.0f} s"
        )


if __name__ == "__main__":
    main()
