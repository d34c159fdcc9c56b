"""Benchmark: a push with nothing to do. An unchanged re-push of a small run (3 tiny checkpoints), as a user
runs it (`hubkit push` in a new process, with its default companions), against `hf upload` of the same
files of the run folder in a new process, and where hubkit's time goes; and `hubkit --help`'s start-up.

    .venv/bin/python bench/repush_small.py [--rounds 10] [--link-rate MB/s]

The Hub runs as `hubkit hub serve` in its own process, reached directly or through bench/throttle.py. The
base is the tests' tiny Qwen3 (64 wide, 2 layers, the real Qwen3 tokenizer; 78 MB). The run is a
TRL-layout run of 3 checkpoints (r=4 adapters, 12 KB each, and the tokenizer's files, as TRL saves them
with every checkpoint) with metrics, pushed once as the rounds push it: the adapter repo, the merged
model and the Space (the run saved no completions: no samples dataset). `hf upload` uploads the same
checkpoints' adapter and tokenizer files to its own repo once before the rounds. Each round runs both,
which goes first alternating; each time is the median. Python writes bytecode caches here (as pip does
for installed packages), so neither command compiles its sources at every start.

Where the time goes is measured in a child that runs the same push through the command line's entry point,
with a clock around the imports and each stage of `PushSession.push` (prepare, read, decide, execute),
over the same rounds; the rest of that child's time is Python starting and leaving (module teardown).
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

from push import TOKEN, add_link_rate, start_hub

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
from hubkit.demo.tiny import qwen3_tokenizer_dir
from tests.support.runs import TINY_SHAPES, make_run
from tests.support.tiny import TOKENIZER_FILES, build_tiny_qwen3, publish_model

HELP_TARGET_S = 0.5  # the command line starts without importing the libraries it drives
TARGET = 2.0
BASE_REPO = "bench/tiny-qwen3"
PUSH_OPTIONS = ["--quiet"]  # the default companions: the merged model and the Space

# Run in a child: the push through the command line's entry point, each stage timed; prints JSON.
STAGES = """
import json, sys, time
started = time.perf_counter()
import hubkit.cli
import hubkit.publish.push as push
imported = time.perf_counter()
times = {"importing hubkit's command line and the push": imported - started}
def timed(name, method):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            times[name] = time.perf_counter() - start
    return wrapper
for name, attribute in (("prepare locally", "_prepare_locally"), ("read the Hub", "_read_hub"),
                        ("decide", "_decide"), ("execute", "_execute")):
    setattr(push.PushSession, attribute, timed(name, getattr(push.PushSession, attribute)))
sys.argv = ["hubkit", "push", *sys.argv[1:]]
try:
    hubkit.cli.main()
except SystemExit as e:
    if e.code:
        raise
times["the command's own work besides the stages"] = (
    time.perf_counter() - imported - sum(v for k, v in times.items() if not k.startswith("importing"))
)
print(json.dumps(times), file=sys.stderr)
"""


def run_command(argv: list[str | Path]) -> float:
    """Run a command as a user does (a new process); its seconds."""
    start = time.perf_counter()
    subprocess.run([str(a) for a in argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def stage_times(push_args: list[str | Path]) -> dict[str, float]:
    """One push in a child with each stage timed, and the rest of the child's time."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", STAGES, *map(str, push_args)], check=True, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    times = json.loads(result.stderr.strip().splitlines()[-1])
    times["starting and leaving Python (the process's other time)"] = wall - sum(times.values())
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10, help="an even number: each goes first as often")
    add_link_rate(parser)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="hubkit-bench-repush-small-"))
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # both commands start from compiled bytecode
    endpoint, processes, link = start_hub(workdir / "hub", args.link_rate)
    # The local Hub speaks classic LFS only: `hf upload` is told so (hubkit tells its own client itself).
    os.environ.update(HF_ENDPOINT=endpoint, HF_TOKEN=TOKEN, HF_HOME=str(workdir / "hf_home"))
    try:
        from huggingface_hub import HfApi

        api = HfApi(endpoint=endpoint, token=TOKEN)
        publish_model(api, build_tiny_qwen3(workdir / "base"), BASE_REPO)
        run_dir = make_run(
            workdir / "runs",
            (1, 2, 3),
            base_model=BASE_REPO,
            shapes=TINY_SHAPES,
            run_id="tiny",
            tokenizer_dir=qwen3_tokenizer_dir(),
        )
        bin_dir = Path(sys.executable).parent
        push_args: list[str | Path] = ["--run-dir", run_dir, "--repo-id", "bench/tiny-hubkit", *PUSH_OPTIONS]
        hf_command = [
            bin_dir / "hf",
            "upload",
            "bench/tiny-hf",
            run_dir,
            "--quiet",
            *(f"--include=checkpoint-*/{name}" for name in ("adapter_*", *TOKENIZER_FILES)),
        ]
        run_command([bin_dir / "hubkit", "push", *push_args])  # the first push
        run_command(hf_command)  # the first upload
        print(
            f"CPUs: {os.cpu_count()}; Hub: hubkit hub serve (own process), through {link}; {args.rounds} rounds"
        )
        hubkit_times, hf_times = [], []
        for i in range(args.rounds):
            pair = [("hf", hf_command), ("hubkit", [bin_dir / "hubkit", "push", *push_args])]
            for name, command in pair if i % 2 == 0 else reversed(pair):
                (hf_times if name == "hf" else hubkit_times).append(run_command(command))
            print(
                f"round {i + 1}: hubkit {hubkit_times[-1]:.2f} s, hf upload {hf_times[-1]:.2f} s", flush=True
            )
        stages = [stage_times(push_args) for _ in range(args.rounds)]
        help_times = [run_command([bin_dir / "hubkit", "--help"]) for _ in range(args.rounds)]
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)
    hubkit_median, hf_median = statistics.median(hubkit_times), statistics.median(hf_times)
    print(f"unchanged re-push, hubkit push (median): {hubkit_median:.2f} s")
    print(f"the same unchanged files, hf upload (median): {hf_median:.2f} s")
    print("where hubkit's time goes (medians):")
    for name in stages[0]:
        print(f"  {name:<56} {statistics.median(s[name] for s in stages):.3f} s")
    print(f"ratio unchanged re-push / hf upload: {hubkit_median / hf_median:.2f}x (target <= {TARGET}x)")
    help_median = statistics.median(help_times)
    print(f"hubkit --help (median): {help_median:.2f} s (target < {HELP_TARGET_S} s)")


if __name__ == "__main__":
    main()
