"""Benchmark `hubkit push` against `hf upload` of the same files, on a local Hub.

    .venv/bin/python bench/push.py [--checkpoints 10] [--adapter-mb 8] [--repeats 5]

A synthetic TRL run of N checkpoints (PEFT-format LoRA adapters) is pushed to fresh repos with
`hubkit push`, and the exact files of its plan are uploaded to other fresh repos with
`HfApi.upload_folder` (what `hf upload REPO FOLDER` runs), alternating, in the same process, after
one uncounted warm-up round of each; the medians are compared.
hubkit's time includes building the plan: validating and normalizing every adapter and hashing
every file. Then an unchanged re-push is timed and its uploaded bytes and write requests counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hubkit.localhub import LocalHub

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=10)
    parser.add_argument("--adapter-mb", type=float, default=8.0, help="approximate size of each adapter")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="hubkit-bench-push-"))
    hub = LocalHub(workdir / "hub").start()
    # The client reads these at import time: set them before anything imports huggingface_hub.
    os.environ.update(HF_ENDPOINT=hub.endpoint, HF_HUB_DISABLE_XET="1", HF_HOME=str(workdir / "hf_home"))
    os.environ.pop("HF_TOKEN", None)
    try:
        run(args, workdir, hub)
    finally:
        hub.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def run(args: argparse.Namespace, workdir: Path, hub: LocalHub) -> None:
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars

    from hubkit.cli import main as hubkit_main
    from hubkit.publish import diff_push, hub_client, plan_push, prepare_adapters, select_checkpoints
    from hubkit.publish.commit import commit_repo
    from hubkit.runs import load_run

    sys.path.insert(0, str(ROOT / "tests"))
    from test_publish_support import make_run, qwen3_shapes

    disable_progress_bars()
    import hubkit.adapters  # noqa: F401  (torch and peft imported before timing, as for hf upload's imports)

    # q_proj + v_proj LoRA (r=4) on L layers of hidden 1024: 4 * 4 * (1024 + 2048 + 1024 + 1024) bytes per layer.
    layers = max(1, round(args.adapter_mb * 1e6 / (16 * (1024 + 2048 + 1024 + 1024))))
    shapes = qwen3_shapes(hidden=1024, q_out=2048, v_out=1024, layers=layers)
    # The push checks adapters against the base's config.json: publish one whose q_proj/v_proj fit.
    base_config = {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": layers,
        "intermediate_size": 64,
        "vocab_size": 128,
    }
    base_api = HfApi(endpoint=hub.endpoint)
    base_api.create_repo("bench/base")
    base_api.upload_file(
        path_or_fileobj=json.dumps(base_config).encode(), path_in_repo="config.json", repo_id="bench/base"
    )
    run_dir = make_run(
        workdir / "runs", tuple(range(1, args.checkpoints + 1)), base_model="bench/base", shapes=shapes
    )

    # The baseline uploads exactly the files hubkit publishes, laid out as in the repo.
    run_obj = load_run(run_dir)
    plan = plan_push(
        run_obj, "bench/layout", prepare_adapters(run_obj, select_checkpoints(run_obj), workdir / "stage")
    )
    folder = workdir / "folder"
    for planned in plan.repos[0].files:
        target = folder / planned.path_in_repo
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(planned.read_bytes())
    total_bytes = plan.repos[0].total_size

    api = HfApi(endpoint=hub.endpoint)
    hubkit_times, hf_times = [], []
    # Round 0 warms both up (imports, the base model's shapes) and is not counted.
    for i in range(args.repeats + 1):
        start = time.perf_counter()  # `hf upload` creates the repo, then uploads the folder
        api.create_repo(f"bench/hf-{i}", exist_ok=True)
        api.upload_folder(repo_id=f"bench/hf-{i}", folder_path=folder)
        hf_times.append(time.perf_counter() - start)

        start = time.perf_counter()
        try:
            hubkit_main(
                [
                    "push",
                    "--run-dir",
                    str(run_dir),
                    "--repo-id",
                    f"bench/hubkit-{i}",
                    "--quiet",
                    "--no-merged",
                ]
            )
        except SystemExit as e:
            if e.code:
                raise
        hubkit_times.append(time.perf_counter() - start)

    # Unchanged re-push, through the library so that the uploaded bytes can be read off the result.
    client = hub_client(hub.endpoint, None)
    log_start = len(hub.request_log)
    start = time.perf_counter()
    run_obj = load_run(run_dir)
    plan = plan_push(
        run_obj, "bench/hubkit-0", prepare_adapters(run_obj, select_checkpoints(run_obj), workdir / "stage2")
    )
    results = [commit_repo(client, diff) for diff in diff_push(client, plan)]
    repush_time = time.perf_counter() - start
    writes = [r for r in hub.request_log[log_start:] if r[0] == "PUT" or "/commit/" in r[1]]

    hubkit_times, hf_times = hubkit_times[1:], hf_times[1:]
    hubkit_median, hf_median = statistics.median(hubkit_times), statistics.median(hf_times)
    print(
        f"run: {args.checkpoints} checkpoints, {len(plan.repos[0].files)} files, {total_bytes / 1e6:.1f} MB"
    )
    print(
        f"first push, hf upload (baseline): {hf_median:.3f} s  (runs: {', '.join(f'{t:.3f}' for t in hf_times)})"
    )
    print(
        f"first push, hubkit push:          {hubkit_median:.3f} s  (runs: {', '.join(f'{t:.3f}' for t in hubkit_times)})"
    )
    print(f"first push ratio hubkit / hf upload: {hubkit_median / hf_median:.2f}x")
    uploaded = sum(r.uploaded_bytes for r in results)
    commits = sum(r.commit_sha is not None for r in results)
    print(
        f"unchanged re-push: {repush_time:.3f} s, {uploaded} bytes uploaded, {commits} commits, {len(writes)} write requests"
    )


if __name__ == "__main__":
    main()
