"""Benchmark: the merged model's check against its adapter (`hubkit.verify.merged`) beside the merge it
follows in a push, at Qwen3-4B's widths and vocabulary.

Builds a synthetic Qwen3-4B-shaped base (bf16 shards, tied embeddings, the real Qwen3 tokenizer and chat
template) and an r=16 all-linear LoRA (bench/merge.py's builders), merges it with hubkit, then runs, each in
a process of its own, the merge and the check, and prints each one's wall time (after imports) and peak
resident memory, the check's against the bf16 weights' size (target <= 1.2, as `hubkit eval`).

    $ .venv/bin/python bench/verify.py [--layers 36]      # 36: the seed's size
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import merge as merge_bench  # bench/merge.py: the base and adapter builders

TARGET_RSS = 1.2


def work_merge(base: Path, adapter: Path, out: Path) -> float:
    from hubkit.merge import merge_adapter

    start = time.perf_counter()
    merge_adapter(base, adapter, out)
    return time.perf_counter() - start


def work_verify(base: Path, adapter: Path, out: Path) -> float:
    from hubkit.verify.merged import DEFAULT_QUESTIONS, MergedCheckInput, check_merged

    start = time.perf_counter()
    check = check_merged(
        MergedCheckInput(base, adapter, base, out, DEFAULT_QUESTIONS, None, "merged", "adapter")
    )
    elapsed = time.perf_counter() - start
    print(json.dumps(check.to_dict()), file=sys.stderr)
    return elapsed


WORKERS = {"merge": work_merge, "verify": work_verify}


def run_worker(name: str, base: Path, adapter: Path, out: Path) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", name, str(base), str(adapter), str(out)]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    if result.stderr.strip():
        print(f"[{name}] {result.stderr.strip().splitlines()[-1]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        name, base, adapter, out = args.worker
        wall = WORKERS[name](Path(base), Path(adapter), Path(out))
        print(json.dumps({"wall_s": wall, "peak_rss_mib": merge_bench.peak_rss_mib()}))
        return

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
    from tests.support.tiny import copy_tokenizer

    vars(merge_bench).update(merge_bench.QWEN3_4B)
    with tempfile.TemporaryDirectory(prefix="hubkit-bench-verify-") as tmp:
        base, adapter, out = Path(tmp) / "base", Path(tmp) / "adapter", Path(tmp) / "merged"
        weights = merge_bench.build_base(base, args.layers)
        copy_tokenizer(base)
        merge_bench.build_adapter(base, adapter, args.layers)
        print(f"base: {args.layers} layers at Qwen3-4B's widths, {weights / 1e9:.2f} GB of bf16 weights")
        merged = run_worker("merge", base, adapter, out)
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
            if (base / name).is_file() and not (out / name).exists():
                (out / name).write_bytes((base / name).read_bytes())
        checked = run_worker("verify", base, adapter, out)
        for name, result in (("merge", merged), ("verify", checked)):
            print(f"{name}: {result['wall_s']:.1f} s, peak RSS {result['peak_rss_mib'] / 1024:.2f} GiB")
        ratio = checked["peak_rss_mib"] * 2**20 / weights
        print(f"verify peak RSS / bf16 weights: {ratio:.2f} (target <= {TARGET_RSS})")
        print(f"verify time / merge time: {checked['wall_s'] / merged['wall_s']:.2f}")


if __name__ == "__main__":
    main()
