"""Benchmark: the bytes a push actually sends through Xet, against the size of the files pushed.

    .venv/bin/python bench/xet_bytes.py [--layers 36] [--link-rate 100] [--workdir DIR]

    base     a Qwen3-4B-shaped bf16 model with random weights (bench/merge.py's builder; 36 layers: 8 GB)
    merged   hubkit's merge of an r=16 LoRA on every Linear into it: embeddings and norms stay the base's
    GGUF     hubkit's q8_0 export of the merged model
    Hub      `hubkit hub serve` in its own process, behind bench/throttle.py, which counts the bytes

Every upload is `HfApi.upload_folder` (what hubkit's push calls) in a process of its own, with Xet on, as
against huggingface.co. The vendor's base is uploaded with a client cache of its own, so the user's pushes
can dedup against it only through the Hub's global dedup API, as against a base they never uploaded:

    (a) an unchanged re-push: the merged model again, to the repo that holds it
    (a') the same from another machine (an empty client cache: a CI runner, a colleague)
    (b) the merged model to a new repo, the base already on the Hub (uploaded by someone else)
    (c) a GGUF re-push: the same GGUF file to a second repo (a revision, a copy for another org)

Prints, for each, the bytes sent up the link against the files' size, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
import gguf_export as gguf_bench
import merge as merge_bench
from push import start_link, start_server

from tests.support.tiny import copy_tokenizer

TOKEN = "hubkit-bench-token"
_UPLOAD = """
import sys
from huggingface_hub import HfApi
api = HfApi(token=sys.argv[3])
api.create_repo(sys.argv[1], exist_ok=True)
api.upload_folder(repo_id=sys.argv[1], folder_path=sys.argv[2])
"""


def upload(endpoint: str, repo_id: str, folder: Path, hf_home: Path, count: Path) -> tuple[int, float]:
    """Upload `folder` to `repo_id` in a fresh process; the bytes it sent up the link, and the seconds."""
    before = json.loads(count.read_text())["up"]
    env = {
        **os.environ,
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(hf_home),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    env.pop("HF_HUB_DISABLE_XET", None)
    env.pop("HF_XET_CACHE", None)  # the client cache is HF_HOME's: one per simulated machine
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _UPLOAD, repo_id, str(folder), TOKEN], env=env, check=True)
    seconds = time.perf_counter() - start
    time.sleep(0.3)  # the count file is rewritten every 0.1 s
    return json.loads(count.read_text())["up"] - before, seconds


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--layers", type=int, default=36, help="of Qwen3-4B's 36")
    parser.add_argument("--link-rate", type=float, default=100.0, help="MB/s each way (default 100)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="hubkit-bench-xet-"))
    base, adapter, merged, gguf = (workdir / name for name in ("base", "adapter", "merged", "gguf"))
    for constant, value in merge_bench.QWEN3_4B.items():  # bench/merge.py's default shapes are smaller
        setattr(merge_bench, constant, value)
    merge_bench.build_base(base, args.layers)
    copy_tokenizer(base)  # the GGUF export reads it
    merge_bench.build_adapter(base, adapter, args.layers)
    merge_bench.work_hubkit(base, adapter, merged)
    gguf_bench.work_hubkit(merged, gguf, ["q8_0"])
    count = workdir / "link-count.json"
    endpoint, server = start_server(workdir / "hub")
    link_endpoint, link = start_link(endpoint, args.link_rate, count)
    try:
        while not count.exists():
            time.sleep(0.05)
        vendor, user = workdir / "vendor-home", workdir / "user-home"
        upload(link_endpoint, "vendor/base", base, vendor, count)
        rows = [
            (
                "(b) merged model, base on the Hub",
                *upload(link_endpoint, "me/merged", merged, user, count),
                merged,
            )
        ]
        rows.append(
            (
                "(a) unchanged re-push of the merged model",
                *upload(link_endpoint, "me/merged", merged, user, count),
                merged,
            )
        )
        rows.append(
            (
                "(a') the same from an empty client cache",
                *upload(link_endpoint, "me/merged", merged, workdir / "other-home", count),
                merged,
            )
        )
        upload(link_endpoint, "me/gguf", gguf, user, count)
        rows.append(
            (
                "(c) GGUF re-push to a second repo",
                *upload(link_endpoint, "me/gguf-2", gguf, user, count),
                gguf,
            )
        )
    finally:
        for process in (link, server):
            process.terminate()
            process.wait()
    print(f"Xet bytes sent, {args.layers} layers of Qwen3-4B's shapes, a {args.link_rate:g} MB/s link:")
    for label, sent, seconds, folder in rows:
        size = folder_size(folder)
        print(
            f"  {label:45s} {sent / 1e6:10.3f} MB sent of {size / 1e6:8.1f} MB  {sent / size:7.4f}x  {seconds:6.1f} s"
        )
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
