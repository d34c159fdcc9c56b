"""Benchmark: an unchanged re-push with the merge enabled, at the seed's size, against `hf upload`'s
unchanged re-upload of the same files.

    .venv/bin/python bench/repush_merged.py [--rounds 3] [--workdir DIR] [--gguf q8_0]

    base     a Qwen3-4B-shaped bf16 model with random weights (hidden 2560, 36 layers, tied embeddings:
             8 GB in 512 MB shards), written shard by shard by bench/merge.py's builder
    run      10 TRL checkpoints of r=16 LoRA on q,k,v,o,gate,up,down (132 MB each; tests.support.runs)
    Hub      `hubkit hub serve` in its own process

A first `push_run` (merge enabled, no Space) publishes the adapters and merges the newest checkpoint into
the base. Then, for each round, with nothing changed:

    hubkit   push_run again (merge enabled): it finds the merged repo already holding this merge
    hf       `HfApi.upload_folder` (what `hf upload` runs) of the adapter files to a repo that holds them,
             plus of the merged model's files: the base's shards stand in for them (same names, sizes and
             count), re-uploaded to the base repo that holds them

Both run in this process after the first push has imported everything; the ratio hubkit / hf is printed
(the issue's target: at most 1.5x), with each round's times.

With ``--gguf TYPES`` every push also writes the merged model as GGUF files to ``<repo>-GGUF``: the first
push's time includes the export, and a re-push must find the GGUF repo holding this merge in every type
and export nothing. The hf side then still re-uploads only the adapters and the merged model's files
(not the GGUF files, which would only add to its time).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
import merge as merge_bench  # bench/merge.py: the base builder

from hubkit.adapters.base_check import read_off_config

TOKEN = "hubkit-bench-token"
BASE_REPO = "bench/qwen3-4b-bf16"
LAYERS = 36
CHECKPOINTS = 10
RANK = 16
TARGET = 1.5
ADAPTER_PATTERNS = ["checkpoint-*/adapter_model.safetensors", "checkpoint-*/adapter_config.json"]


def lora_shapes() -> dict[str, tuple[int, int]]:
    """(in, out) of every Linear of the Qwen3-4B-shaped base but lm_head, as the push reads them off its config."""
    shape = merge_bench.QWEN3_4B
    config = {
        "model_type": "qwen3",
        "hidden_size": shape["HIDDEN"],
        "intermediate_size": shape["INTERMEDIATE"],
        "num_attention_heads": shape["HEADS"],
        "num_key_value_heads": shape["KV_HEADS"],
        "head_dim": shape["HEAD_DIM"],
        "num_hidden_layers": LAYERS,
        "vocab_size": shape["VOCAB"],
    }
    return {name: s for name, s in (read_off_config(config) or {}).items() if name != "lm_head"}


def start_server(root: Path) -> tuple[str, subprocess.Popen]:
    """The local Hub in its own process, from this checkout."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    process = subprocess.Popen(
        [sys.executable, "-m", "hubkit", "hub", "serve", "--root", str(root)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    return process.stdout.readline().strip(), process  # type: ignore[union-attr]


def publish_base(api, base_dir: Path) -> None:
    api.create_repo(BASE_REPO, exist_ok=True)
    api.upload_folder(repo_id=BASE_REPO, folder_path=base_dir)


def timed(action) -> tuple[float, object]:
    os.sync()  # the previous round's writes flushed
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="where the Hub and the run go")
    parser.add_argument("--gguf", default="", help="comma-separated GGUF types every push also writes")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="hubkit-bench-repush-", dir=args.workdir))
    # The base on the Hub, in the client's cache, the merge's output while the first push runs, the
    # merged repo, the run and its copy in the adapter repos: about 36 GB at once.
    # With GGUF: each Q8_0 file (4.3 GB) in the push's staging and on the Hub, twice that for BF16.
    gguf_types = tuple(t for t in args.gguf.split(",") if t.strip())
    needed = 40e9 + 17e9 * len(gguf_types)
    if shutil.disk_usage(workdir).free < needed:
        raise SystemExit(f"{workdir} needs about {needed / 1e9:.0f} GB free")
    endpoint, server = start_server(workdir / "hub")
    try:
        from hubkit.localhub.client_env import use_local_hub

        use_local_hub(endpoint, str(workdir / "hf_home"), token=TOKEN)
        from huggingface_hub import HfApi, snapshot_download
        from huggingface_hub.utils import disable_progress_bars

        from hubkit.publish import PushRequest, push_run
        from tests.support.runs import make_run

        disable_progress_bars()
        api = HfApi(endpoint=endpoint, token=TOKEN)
        for name, value in merge_bench.QWEN3_4B.items():
            setattr(merge_bench, name, value)
        base_dir = workdir / "base"
        started = time.perf_counter()
        size = merge_bench.build_base(base_dir, LAYERS)
        if gguf_types:
            from tests.support.tiny import copy_tokenizer

            copy_tokenizer(base_dir)  # a GGUF file holds the tokenizer: the real Qwen3 one
        publish_base(api, base_dir)
        shutil.rmtree(base_dir)  # the Hub holds it now
        steps = tuple(range(10, 10 * CHECKPOINTS + 1, 10))
        run_dir = make_run(
            workdir / "runs",
            steps,
            base_model=BASE_REPO,
            shapes=lora_shapes(),
            rank=RANK,
            run_id="bench-repush",
        )
        adapter = (run_dir / "checkpoint-10" / "adapter_model.safetensors").stat().st_size
        print(
            f"base: {size / 1e9:.2f} GB bf16; run: {CHECKPOINTS} checkpoints of {adapter / 1e6:.0f} MB; "
            f"built and published in {time.perf_counter() - started:.0f} s; CPUs: {os.cpu_count()}",
            flush=True,
        )

        request = PushRequest(
            run_dir,
            repo_id="bench/hubkit-adapter",
            space=False,
            gguf=gguf_types,
            endpoint=endpoint,
            token=TOKEN,
        )
        first, report = timed(lambda: push_run(request))
        made = {r.repo_id.rsplit("-", 1)[-1]: r for r in report.repos}  # type: ignore[attr-defined]
        gguf = f" + GGUF {', '.join(request.gguf)}" if gguf_types else ""
        print(f"first push (adapters + merge of step {10 * CHECKPOINTS}{gguf}): {first:.1f} s", flush=True)
        if "merged" not in made or made["merged"].commit_sha is None:
            raise SystemExit("the first push made no merged repo")
        if gguf_types:
            if "GGUF" not in made or made["GGUF"].commit_sha is None:
                raise SystemExit("the first push made no GGUF repo")
            print(f"GGUF files uploaded: {made['GGUF'].bytes_uploaded / 1e9:.2f} GB", flush=True)

        # What hf re-uploads: the adapters to a repo holding them, the merged model's files (the base's
        # shards, in the client's cache since the merge read them) to the repo holding them.
        api.create_repo("bench/hf-adapter", exist_ok=True)
        api.upload_folder(repo_id="bench/hf-adapter", folder_path=run_dir, allow_patterns=ADAPTER_PATTERNS)
        base_snapshot = Path(snapshot_download(BASE_REPO))

        def hf_upload() -> None:
            api.upload_folder(
                repo_id="bench/hf-adapter", folder_path=run_dir, allow_patterns=ADAPTER_PATTERNS
            )
            api.upload_folder(repo_id=BASE_REPO, folder_path=base_snapshot)

        hubkit_times, hf_times = [], []
        for i in range(args.rounds):
            order = [("hubkit", lambda: push_run(request)), ("hf", hf_upload)]
            for tool, action in order if i % 2 == 0 else reversed(order):
                seconds, result = timed(action)
                if tool == "hubkit":
                    if any(r.commit_sha is not None for r in result.repos):  # type: ignore[attr-defined]
                        raise SystemExit("an unchanged re-push committed something")
                    hubkit_times.append(seconds)
                else:
                    hf_times.append(seconds)
            print(
                f"round {i + 1}: hubkit re-push {hubkit_times[-1]:.2f} s, hf upload {hf_times[-1]:.2f} s",
                flush=True,
            )
        hubkit_median, hf_median = statistics.median(hubkit_times), statistics.median(hf_times)
        print(f"hubkit re-push, merge enabled{gguf} (median): {hubkit_median:.2f} s")
        print(f"hf upload of the same files, unchanged (median): {hf_median:.2f} s")
        print(
            f"unchanged re-push with the merge / hf upload: {hubkit_median / hf_median:.2f}x (target {TARGET}x)"
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
