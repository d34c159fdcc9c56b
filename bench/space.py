"""Benchmark the Space's engine (`spaces/compare/engine.py`): what its batching saves, and how fast it switches.

A Qwen3-style model built from config (random weights, the real Qwen3 tokenizer; --hidden and --layers set
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
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256, help="hidden size (4 query heads of hidden/4)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads  [default: torch's]")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    workdir = Path(tempfile.mkdtemp(prefix="hubkit-bench-space-"))
    hub = LocalHub(workdir / "hub").start()
    # The client reads these at import time: set them before anything imports huggingface_hub.
    os.environ.update(HF_ENDPOINT=hub.endpoint, HF_HUB_DISABLE_XET="1", HF_HOME=str(workdir / "hf_home"))
    os.environ.pop("HF_TOKEN", None)
    try:
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

    from hubkit.demo.tiny import ENDOFTEXT_ID, IM_END_ID, copy_tokenizer

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
    from config import AppConfig
    from engine import BASE, FINAL, Engine

    base_repo, adapter_repo = publish(args, workdir)
    config = AppConfig(
        title="bench",
        base_model=base_repo,
        adapter_repo=adapter_repo,
        dtype="float32",
        max_new_tokens=args.new_tokens,
        max_loaded_adapters=CHECKPOINTS + 1,
    )
    engine = Engine(config)
    values = [v for v in engine.list_checkpoints() if v != FINAL]
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


if __name__ == "__main__":
    main()
