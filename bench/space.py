"""Benchmark the Space's engine (`spaces/compare/engine.py`): what its batching saves, how fast it switches,
and (--memory) the memory it needs on a CPU at the seed's size.

Speed. A Qwen3-style model built from config (random weights, the real Qwen3 tokenizer; --hidden and --layers set
its size) and 5 LoRA checkpoints (r=16 on every linear layer, random non-zero weights) are published to an
embedded local Hub and loaded by the app's own engine, on this machine's CPU (or GPU), in float32. Every
generation makes exactly --new-tokens tokens (greedy, end of text suppressed), so the work compared is equal.
The timings are medians over --repeats rounds, the variants in rotating order within each round:

    side by side   base and one checkpoint in one mixed-adapter `generate` (what the app does), against two
                   sequential generations (base with the adapter disabled, then the checkpoint): target <= 0.65
    trajectory     5 checkpoints in one mixed-adapter `generate`, against one single generation: target <= 2.0
    switch         `ensure_loaded` of an already loaded checkpoint (the app's only step when the user picks
                   another loaded one), against loading a new one from the Hub: target <= 100 ms

    $ .venv/bin/python bench/space.py [--hidden 256] [--layers 4] [--new-tokens 64] [--repeats 3] [--threads N]

On a CPU the 151,669-token output layer dominates a small model, and a small-batch matrix product there costs
about rows x one row's (more on an oversubscribed machine, where --threads 1 is also faster): the targets
are for a GPU, where one decoding step of a few rows costs about as much as one row's.

Memory (--memory). A Qwen3-4B-shaped base (36 layers, hidden 2560, tied embeddings; random weights, bf16
shards: 8.0 GB) and two r=16 all-linear checkpoints, built with bench/merge.py's builders; the checkpoints
on an embedded local Hub, the base read from its folder (as from the Hub's cache). A fresh child process
runs the engine as the app does on a CPU (dtype "auto", one adapter at a time) and reports its peak RSS
(VmHWM): with the base and one checkpoint loaded (the weights are memory-mapped, resident once read),
after a side-by-side answer of --answer-tokens tokens, and after switching to the other checkpoint. Each is printed against the size of the bf16 weights; the
target is a free CPU Space's memory with room to spare: <= 10 GB.

    $ .venv/bin/python bench/space.py --memory [--answer-tokens 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hubkit.localhub import LocalHub

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = 5
TARGETS = {"side_by_side": 0.65, "trajectory": 2.0, "switch_ms": 100.0}
PROMPT = "A baker makes 12 trays of 24 cookies and sells all but 30 of them. How many cookies does she sell?"
TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# Qwen3-4B: hidden, intermediate, attention heads, KV heads, head dim, vocabulary (padded); 36 layers.
QWEN3_4B_SHAPE = (2560, 9728, 32, 8, 128, 151936)
QWEN3_4B_LAYERS = 36
MEMORY_TARGET_BYTES = 10e9
SEED_STEPS = (100, 200)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256, help="hidden size (4 query heads of hidden/4)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads  [default: torch's]")
    parser.add_argument("--memory", action="store_true", help="measure peak RSS at the seed's size instead")
    parser.add_argument("--answer-tokens", type=int, default=8, help="--memory: tokens of the answer")
    parser.add_argument(
        "--memory-worker", nargs=2, metavar=("BASE_DIR", "ADAPTER_REPO"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.memory_worker:
        print(
            json.dumps(memory_worker(Path(args.memory_worker[0]), args.memory_worker[1], args.answer_tokens))
        )
        return
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    workdir = Path(tempfile.mkdtemp(prefix="hubkit-bench-space-"))
    hub = LocalHub(workdir / "hub").start()
    # The client reads these at import time: set them before anything imports huggingface_hub.
    os.environ.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(workdir / "hf_home"))
    os.environ.pop("HF_TOKEN", None)
    try:
        if args.memory:
            run_memory(args, workdir)
        else:
            run(args, workdir)
    finally:
        hub.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def publish(args: argparse.Namespace, workdir: Path) -> tuple[str, str]:
    """The base model and an adapter repo (5 checkpoints, the newest also at the root) on the local Hub."""
    import torch
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars
    from peft import LoraConfig, get_peft_model
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    sys.path.insert(0, str(ROOT))  # tests.support
    from tests.support.tiny import ENDOFTEXT_ID, IM_END_ID, copy_tokenizer

    disable_progress_bars()
    base_dir = workdir / "base"
    config = Qwen3Config(
        vocab_size=copy_tokenizer(base_dir),
        hidden_size=args.hidden,
        intermediate_size=3 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=args.hidden // 4,
        tie_word_embeddings=False,
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=IM_END_ID,
        pad_token_id=ENDOFTEXT_ID,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[IM_END_ID, ENDOFTEXT_ID], pad_token_id=ENDOFTEXT_ID
    )
    model.save_pretrained(base_dir)
    api = HfApi()
    api.create_repo("bench/base")
    api.upload_folder(repo_id="bench/base", folder_path=base_dir)

    adapters_dir = workdir / "adapters"
    for i in range(1, CHECKPOINTS + 1):
        torch.manual_seed(i)
        lora = LoraConfig(r=16, lora_alpha=32, target_modules=TARGET_MODULES, init_lora_weights=False)
        peft_model = get_peft_model(Qwen3ForCausalLM.from_pretrained(base_dir), lora)
        peft_model.peft_config["default"].base_model_name_or_path = "bench/base"
        folders = [adapters_dir / "checkpoints" / f"global_step_{20 * i}"]
        if i == CHECKPOINTS:
            folders.append(adapters_dir)
        for folder in folders:
            peft_model.save_pretrained(folder)
    for tokenizer_file in base_dir.glob("*token*"):
        shutil.copy(tokenizer_file, adapters_dir)
    for tokenizer_file in ("vocab.json", "merges.txt"):
        shutil.copy(base_dir / tokenizer_file, adapters_dir)
    api.create_repo("bench/run")
    api.upload_folder(repo_id="bench/run", folder_path=adapters_dir)
    return "bench/base", "bench/run"


def run(args: argparse.Namespace, workdir: Path) -> None:
    import torch

    sys.path.insert(0, str(ROOT / "spaces" / "compare"))
    from checkpoints import Adapter, list_repo_checkpoints
    from config import FINAL, AppConfig, RunConfig
    from engine import BASE, Engine

    base_repo, adapter_repo = publish(args, workdir)
    config = AppConfig(
        title="bench",
        base_model=base_repo,
        runs=(RunConfig("bench", adapter_repo),),
        dtype="float32",
        max_new_tokens=args.new_tokens,
        max_loaded_adapters=CHECKPOINTS + 1,
        cpu_max_loaded_adapters=CHECKPOINTS + 1,  # all five at once, also on a CPU
    )
    engine = Engine(config)
    values = [Adapter("bench", v) for v in list_repo_checkpoints(adapter_repo, None) if v != FINAL]
    assert len(values) == CHECKPOINTS, values
    load_started = time.perf_counter()
    names = engine.ensure_loaded(values)
    load_s = (time.perf_counter() - load_started) / CHECKPOINTS
    model = engine.model
    prompt_ids = engine.encode(PROMPT)

    def generate(rows: int, adapter_names: list[str] | None = None) -> None:
        input_ids = torch.tensor([prompt_ids] * rows, device=engine.device)
        kwargs = {"adapter_names": adapter_names} if adapter_names else {}
        with torch.inference_mode():
            output = model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                do_sample=False,
                pad_token_id=engine.pad_id,
                **kwargs,
            )
        assert output.shape[1] == len(prompt_ids) + args.new_tokens

    def sequential() -> None:
        with model.disable_adapter():
            generate(1)
        model.set_adapter(names[0])
        generate(1)

    variants = {
        "mixed pair": lambda: generate(2, [BASE, names[0]]),
        "two sequential": sequential,
        "single": lambda: (model.set_adapter(names[0]), generate(1)),
        "trajectory x5": lambda: generate(CHECKPOINTS, list(names)),
        # Not a target: a batch of two rows with one adapter shows what batching alone costs on this device.
        "same-adapter pair": lambda: (model.set_adapter(names[0]), generate(2)),
    }
    generate(2, [BASE, names[0]])  # warm-up, uncounted
    times: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants)
    for round_index in range(args.repeats):
        for name in order[round_index % len(order) :] + order[: round_index % len(order)]:
            started = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - started)
    median = {name: statistics.median(values) for name, values in times.items()}

    switches = []
    for value in values * 20:
        started = time.perf_counter()
        engine.ensure_loaded([value])
        switches.append(time.perf_counter() - started)
    switch_ms = statistics.median(switches) * 1000
    switch_max_ms = max(switches) * 1000

    side_by_side = median["mixed pair"] / median["two sequential"]
    trajectory = median["trajectory x5"] / median["single"]
    print(
        f"model: hidden {args.hidden}, {args.layers} layers, vocab {engine.base.config.vocab_size}; "
        f"{CHECKPOINTS} LoRA r=16 checkpoints; {args.new_tokens} new tokens; device {engine.device}, "
        f"{torch.get_num_threads()} threads; medians of {args.repeats}"
    )
    for name, seconds in median.items():
        print(f"  {name:<16} {seconds:7.3f} s")
    print(
        f"side by side, mixed batch / two sequential: {side_by_side:.2f} (target <= {TARGETS['side_by_side']})"
    )
    print(f"trajectory of 5 / one single generation:    {trajectory:.2f} (target <= {TARGETS['trajectory']})")
    print(
        f"switch to a loaded checkpoint: {switch_ms:.3f} ms median, {switch_max_ms:.3f} ms max "
        f"(target <= {TARGETS['switch_ms']:.0f} ms; loading a new one from the Hub: {load_s * 1000:.0f} ms)"
    )


# --- Memory at the seed's size ------------------------------------------------------------------------------


def build_seed_size(workdir: Path) -> tuple[Path, str, int]:
    """The Qwen3-4B-shaped bf16 base in a folder and an adapter repo with two checkpoints on the local Hub.

    Returns:
        The base's folder, the adapter repo and the size of the base's bf16 shards in bytes.
    """
    import merge  # bench/merge.py, beside this file
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars

    sys.path.insert(0, str(ROOT))  # tests.support
    from tests.support.tiny import copy_tokenizer

    disable_progress_bars()
    # merge.py's builders read the model's shape from its module constants (Qwen3-1.7B's): set Qwen3-4B's.
    merge.HIDDEN, merge.INTERMEDIATE, merge.HEADS, merge.KV_HEADS, merge.HEAD_DIM, merge.VOCAB = (
        QWEN3_4B_SHAPE
    )
    base_dir = workdir / "base-4b"
    started = time.perf_counter()
    weights_bytes = merge.build_base(base_dir, QWEN3_4B_LAYERS)
    copy_tokenizer(base_dir)
    api = HfApi()
    repo = "bench/run-4b"
    api.create_repo(repo)
    for step in SEED_STEPS:
        adapter_dir = workdir / f"adapter-{step}"
        merge.build_adapter(base_dir, adapter_dir, QWEN3_4B_LAYERS)
        api.upload_folder(
            repo_id=repo, folder_path=adapter_dir, path_in_repo=f"checkpoints/global_step_{step}"
        )
        shutil.rmtree(adapter_dir)
    print(
        f"built the seed-size base and {len(SEED_STEPS)} checkpoints in {time.perf_counter() - started:.0f} s"
    )
    return base_dir, repo, weights_bytes


def memory_worker(base_dir: Path, adapter_repo: str, answer_tokens: int) -> dict[str, float]:
    """In a fresh process: the engine on this CPU, as the app builds it; peak RSS at each stage (bytes)."""
    import merge

    sys.path.insert(0, str(ROOT / "spaces" / "compare"))
    from checkpoints import Adapter, list_repo_checkpoints
    from config import AppConfig, RunConfig
    from engine import Engine, Settings

    def peak() -> float:
        return merge.peak_rss_mib() * 2**20

    run = RunConfig("bench", adapter_repo)
    config = AppConfig(title="bench", base_model=str(base_dir), runs=(run,), chat_template="base")
    started = time.perf_counter()
    engine = Engine(config, device="cpu")
    values = [Adapter("bench", v) for v in list_repo_checkpoints(adapter_repo, None)]
    engine.ensure_loaded([values[0]])
    result = {"load_s": time.perf_counter() - started, "loaded": peak(), "dtype": str(engine.dtype)}
    result["default_max_new_tokens"] = engine.default_max_new_tokens
    prompt_ids = engine.encode(PROMPT)
    started = time.perf_counter()
    answers = engine.generate(prompt_ids, [None, values[0]], Settings(max_new_tokens=answer_tokens))
    result["answer_s"] = time.perf_counter() - started
    result["answer_tokens"] = max(answer.tokens for answer in answers)
    result["answered"] = peak()
    engine.ensure_loaded([values[1]])
    result["switched"] = peak()
    result["adapters_loaded"] = len(engine.loaded)
    return result


def run_memory(args: argparse.Namespace, workdir: Path) -> None:
    base_dir, adapter_repo, weights_bytes = build_seed_size(workdir)
    os.sync()  # the builder's writes are not the worker's to wait for
    command = [sys.executable, __file__, "--memory-worker", str(base_dir), adapter_repo]
    command += ["--answer-tokens", str(args.answer_tokens)]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    gb = 1e9
    print(
        f"Qwen3-4B-shaped base, bf16 weights {weights_bytes / gb:.2f} GB; engine on this CPU: dtype "
        f"{measured['dtype'].removeprefix('torch.')}, {measured['adapters_loaded']} adapter loaded at a time, "
        f"default answer {measured['default_max_new_tokens']} tokens"
    )
    print(f"  loading the base and one checkpoint: {measured['load_s']:.1f} s")
    print(
        f"  side-by-side answer, 2 rows x {measured['answer_tokens']} tokens: {measured['answer_s']:.1f} s "
        f"(prompt included)"
    )
    # Until a generate reads them, the memory-mapped weights are not resident: the answer's peak is the one.
    stages = {
        "base + one checkpoint, unread": "loaded",
        "after a side-by-side answer": "answered",
        "after switching checkpoints": "switched",
    }
    for label, key in stages.items():
        peak = measured[key]
        verdict = "ok" if peak <= MEMORY_TARGET_BYTES else "MISSED"
        print(
            f"  peak RSS {label:<29} {peak / gb:5.2f} GB = {peak / weights_bytes:.2f}x the bf16 weights "
            f"(target <= {MEMORY_TARGET_BYTES / gb:.0f} GB: {verdict})"
        )


if __name__ == "__main__":
    main()
