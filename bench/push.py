"""Benchmark `hubkit push` (the library's `push_run`) against `hf upload` of the same checkpoints.

    .venv/bin/python bench/push.py [--scale seed|small|both] [--rounds 6] [--workdir DIR] [--link-rate MB/s]

Two generated TRL-layout runs (random weights, seeded), each pushed with `merged=False, space=False` to a
local Hub that runs as `hubkit hub serve` in its own process (its CPU is not this process's), reached
directly (loopback: a 132 MB upload takes ~0.35 s) or, with `--link-rate`, through bench/throttle.py, a proxy
that passes that many MB per second each way (a realistic link; pushes and uploads go through it alike):

    seed    10 checkpoints of Qwen3-4B's LoRA shape: r=16 on q,k,v,o,gate,up,down, 36 layers, fp32 (132 MB
            each, 1.32 GB); the base repo holds only Qwen3-4B's config.json
    small   10 checkpoints of 8.9 MB (r=4 on q_proj and v_proj of a 1024-wide, 109-layer Qwen3 config)

The baseline is `HfApi.upload_folder` (what `hf upload REPO RUN_DIR --include "checkpoint-*/adapter_*"`
runs) of the same checkpoint folders' adapter files, to the same Hub. Every push and every upload runs in a
forked child of one process that has already imported what both import (a warm-up push and upload
in children list the modules; the parent imports them), so neither pays interpreter start-up or
imports, and the child starts with no hubkit state in memory: each push is what a fresh `hubkit push`
does once its imports are done. Between first pushes the run's `.hubkit/` cache is deleted.

    first push      push_run to a fresh repo vs upload_folder to a fresh repo
    re-push         push_run again, nothing changed (the run's cache kept) vs upload_folder again
    add one         a new checkpoint saved; push_run vs upload_folder of that checkpoint folder alone
    ... command line  adding one, an unchanged re-push, and a first push of the first checkpoints to new repos,
                    as a user runs them (and how much of hubkit's time is Python starting and importing):
                    `hubkit push --no-merged --no-space` vs `hf upload` of the folder(s), each a new process
                    (interpreter start and imports included; no target)
    peak RSS        VmHWM of the first push's child (from /proc/self/status), minus that of the same push
                    of a one-checkpoint run whose adapter is near-empty (the interpreter, imports and
                    fixed costs), compared with the tensors of one adapter

The disk is synced before each push, and which of hf and hubkit goes first alternates from round to round:
on a cloud disk the second of two large uploads in a row can meet a slower disk, by 0.5 s in a 3 s first
push. So each time is the mean of two medians, of the rounds a tool went first and of those it went second
(`counterbalanced`): a plain median of such two-valued times lands on either side of the gap depending on
a single round. Every round's time is printed too. Ratios are hubkit / hf, one per line. hubkit's time
includes the adapter card (rendered, with its charts, at every push); its median is printed too.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
from push_runs import Scale, make_scale_run, seed_scale, small_scale, tiny_scale, write_scale_checkpoint

TOKEN = "hubkit-bench-token"
T = TypeVar("T")

# --- children -------------------------------------------------------------------------------------------


def peak_rss() -> int:
    """This process's peak resident set (VmHWM), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def in_child(action: Callable[..., object], *args: object, **kwargs: object) -> tuple[float, int, object]:
    """Run `action(*args, **kwargs)` in a forked child; return its seconds, its peak RSS in bytes, and its
    result."""
    os.sync()  # the previous upload's writes flushed: no write-back of its bytes during this one
    # The child inherits the garbage collector's counts: without this, the bench's own allocations (runs
    # generated, results kept) would decide whether a child's first collections scan every object the
    # parent imported (0.15 s each), which a process that has just finished its imports would not do.
    gc.collect()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            start = time.perf_counter()
            result = action(*args, **kwargs)
            payload = (time.perf_counter() - start, peak_rss(), result, None)
        except BaseException:
            payload = (0.0, 0, None, traceback.format_exc())
        with os.fdopen(write_fd, "wb") as f:
            pickle.dump(payload, f)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    seconds, rss, result, error = pickle.loads(data)
    if error is not None:
        raise SystemExit(f"a benchmarked child failed:\n{error}")
    return seconds, rss, result


def run_command(argv: list[str | Path]) -> float:
    """Run a command as a user does (a new process); its seconds."""
    os.sync()
    start = time.perf_counter()
    subprocess.run([str(a) for a in argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def hf_upload(endpoint: str, repo_id: str, folder: Path, path_in_repo: str = "", create: bool = False) -> str:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=TOKEN)
    if create:  # `hf upload` creates the repo when it is missing
        api.create_repo(repo_id, exist_ok=True)
    info = api.upload_folder(
        repo_id=repo_id,
        folder_path=folder,
        path_in_repo=path_in_repo or None,
        allow_patterns=["adapter_model.safetensors", "adapter_config.json", "checkpoint-*/adapter_*"],
    )
    return info.oid


def hubkit_push(endpoint: str, run_dir: Path, repo_id: str) -> tuple[str | None, int, float]:
    """One push: its commit (None: unchanged), the bytes it uploaded, and the seconds its card took."""
    import hubkit.publish.repos  # where the push's builder looks the card renderer up
    from hubkit.publish import PushRequest, push_run

    card_seconds = []
    render = hubkit.publish.repos.adapter_card_files

    def timed_card(*args: object, **kwargs: object) -> dict[str, bytes]:  # in this child process only
        start = time.perf_counter()
        try:
            return render(*args, **kwargs)
        finally:
            card_seconds.append(time.perf_counter() - start)

    hubkit.publish.repos.adapter_card_files = timed_card
    request = PushRequest(run_dir, repo_id=repo_id, merged=False, space=False, endpoint=endpoint, token=TOKEN)
    (repo,) = push_run(request).repos
    return repo.commit_sha, repo.bytes_uploaded, sum(card_seconds)


def listed_modules(action: Callable[[], object]) -> list[str]:
    """The modules a warm-up of `action` imports (it runs in a child)."""

    def run() -> list[str]:
        action()
        return sorted(sys.modules)

    return in_child(run)[2]  # type: ignore[return-value]


def warm_imports(names: list[str]) -> None:
    import importlib

    for name in names:
        if name not in sys.modules and not name.startswith("__"):
            with contextlib.suppress(Exception):  # a module that imports only in its own context
                importlib.import_module(name)


def api_call(endpoint: str, method: str, *args, **kwargs) -> object:
    """One HfApi call, made in a child (the parent keeps no connection across forks)."""
    from huggingface_hub import HfApi

    return getattr(HfApi(endpoint=endpoint, token=TOKEN), method)(*args, **kwargs)


def child_call(endpoint: str, method: str, *args, **kwargs) -> object:
    return in_child(api_call, endpoint, method, *args, **kwargs)[2]


# --- the benchmark ------------------------------------------------------------------------------------------


def publish_base(endpoint: str, scale: Scale) -> None:
    child_call(endpoint, "create_repo", scale.base_repo, exist_ok=True)
    child_call(
        endpoint,
        "upload_file",
        path_or_fileobj=json.dumps(scale.base_config, indent=2).encode(),
        path_in_repo="config.json",
        repo_id=scale.base_repo,
    )


def median(values: list[float]) -> float:
    return statistics.median(values)


def counterbalanced(values: list[float], first_in_even_rounds: bool) -> float:
    """A tool's time over rounds that alternate which tool goes first: the mean of its median in the rounds
    it went first and its median in the rounds it went second (the plain median with one round)."""
    firsts = values[0::2] if first_in_even_rounds else values[1::2]
    seconds = values[1::2] if first_in_even_rounds else values[0::2]
    if not firsts or not seconds:
        return median(values)
    return (median(firsts) + median(seconds)) / 2


def bench_scale(scale: Scale, endpoint: str, workdir: Path, rounds: int) -> None:
    name = scale.name
    publish_base(endpoint, scale)
    run_dir = make_scale_run(workdir, scale)
    print(
        f"[{name}] run: {scale.checkpoints} checkpoints of {scale.adapter_bytes / 1e6:.1f} MB "
        f"({scale.checkpoints * scale.adapter_bytes / 1e9:.2f} GB), {rounds} rounds",
        flush=True,
    )
    hf, hubkit, card = defaultdict(list), defaultdict(list), defaultdict(list)

    def push(kind: str, repo_id: str) -> tuple[str | None, int, int]:
        seconds, rss, (commit, uploaded, card_seconds) = in_child(hubkit_push, endpoint, run_dir, repo_id)
        hubkit[kind].append(seconds)
        card[kind].append(card_seconds)
        return commit, uploaded, rss

    def both(i: int, hf_call: Callable[[], float], hubkit_call: Callable[[], T]) -> tuple[float, T]:
        """One round of each: hf first in even rounds, hubkit first in odd ones."""
        if i % 2:
            result = hubkit_call()
            return hf_call(), result
        seconds = hf_call()
        return seconds, hubkit_call()

    def fresh_push(repo_id: str) -> int:
        shutil.rmtree(run_dir / ".hubkit", ignore_errors=True)  # what hubkit remembers of the run
        return push("first", repo_id)[2]

    # First push: fresh repos; round -1 is a warm-up (page cache, the server's first writes).
    rss_first = []
    for i in range(-1, rounds):
        hf_repo, hubkit_repo = f"bench/hf-{name}-{i + 1}", f"bench/hubkit-{name}-{i + 1}"
        hf_seconds, rss = both(
            i,
            partial(lambda repo: in_child(hf_upload, endpoint, repo, run_dir, create=True)[0], hf_repo),
            partial(fresh_push, hubkit_repo),
        )
        rss_first.append(rss)
        if i < 0:
            hubkit["first"].clear()
            card["first"].clear()
        else:
            hf["first"].append(hf_seconds)
        if i < rounds - 1:  # the last pair of repos stays for the re-push and add-one rounds
            for repo in (hf_repo, hubkit_repo):
                child_call(endpoint, "delete_repo", repo)

    for i in range(rounds):  # nothing changed
        hf_seconds, (commit, uploaded, _) = both(
            i,
            lambda: in_child(hf_upload, endpoint, hf_repo, run_dir)[0],
            lambda: push("re-push", hubkit_repo),
        )
        hf["re-push"].append(hf_seconds)
        if commit is not None or uploaded:
            raise SystemExit("an unchanged re-push uploaded something")

    for i in range(rounds):  # a new checkpoint each round
        step = (scale.checkpoints + 1 + i) * 10
        write_scale_checkpoint(run_dir, scale, step)
        folder = run_dir / f"checkpoint-{step}"
        hf_seconds, (commit, uploaded, _) = both(
            i,
            partial(lambda f: in_child(hf_upload, endpoint, hf_repo, f, path_in_repo=f.name)[0], folder),
            lambda: push("add one", hubkit_repo),
        )
        hf["add one"].append(hf_seconds)
        if commit is None or uploaded < scale.adapter_bytes:
            raise SystemExit("adding a checkpoint did not upload it")

    # The same, as a user runs it: each command in a new process (interpreter start and imports included).
    bin_dir = Path(sys.executable).parent
    push_command = [bin_dir / "hubkit", "push", "--run-dir", run_dir, "--repo-id", hubkit_repo]
    for i in range(max(1, rounds // 2)):
        step = (scale.checkpoints + 1 + rounds + i) * 10
        write_scale_checkpoint(run_dir, scale, step)
        folder = run_dir / f"checkpoint-{step}"
        hf_seconds, hubkit_seconds = both(
            i,
            partial(run_command, [bin_dir / "hf", "upload", hf_repo, folder, folder.name, "--quiet"]),
            partial(run_command, [*push_command, "--quiet", "--no-merged", "--no-space"]),
        )
        hf["add one, command line"].append(hf_seconds)
        hubkit["add one, command line"].append(hubkit_seconds)
    # Nothing changed since, as a user runs it; and of hubkit's time, starting Python and importing the push.
    every_adapter = [
        a for c in sorted(run_dir.glob("checkpoint-*")) for a in ("--include", f"{c.name}/adapter_*")
    ]
    for i in range(max(1, rounds // 2)):
        hf_seconds, hubkit_seconds = both(
            i,
            partial(run_command, [bin_dir / "hf", "upload", hf_repo, run_dir, "--quiet", *every_adapter]),
            partial(run_command, [*push_command, "--quiet", "--no-merged", "--no-space"]),
        )
        hf["re-push, command line"].append(hf_seconds)
        hubkit["re-push, command line"].append(hubkit_seconds)
        imports = run_command([sys.executable, "-c", "import hubkit.cli.push, hubkit.publish.push"])
        hubkit["starting and importing the push"].append(imports)
    # And the first push of the first checkpoints, to new repos, as a user runs it.
    first_steps = [(i + 1) * 10 for i in range(scale.checkpoints)]
    for i in range(max(1, rounds // 2)):
        hf_cli, hubkit_cli = f"bench/hf-{name}-cli-{i}", f"bench/hubkit-{name}-cli-{i}"

        def first_push_command(repo_id: str) -> float:
            shutil.rmtree(run_dir / ".hubkit", ignore_errors=True)
            steps = ",".join(map(str, first_steps))
            return run_command(
                [*push_command[:-1], repo_id, "--steps", steps, "--quiet", "--no-merged", "--no-space"]
            )

        hf_seconds, hubkit_seconds = both(
            i,
            partial(
                run_command,
                [bin_dir / "hf", "upload", hf_cli, run_dir, "--quiet"]
                + [a for step in first_steps for a in ("--include", f"checkpoint-{step}/adapter_*")],
            ),
            partial(first_push_command, hubkit_cli),
        )
        hf["first push, command line"].append(hf_seconds)
        hubkit["first push, command line"].append(hubkit_seconds)
        for repo in (hf_cli, hubkit_cli):
            child_call(endpoint, "delete_repo", repo)

    # The same push of a near-empty adapter: the interpreter, its imports and a push's fixed costs.
    empty_run = make_scale_run(workdir / "empty", tiny_scale(scale))
    rss_empty = in_child(hubkit_push, endpoint, empty_run, f"bench/empty-{name}")[1]
    for repo in (hf_repo, hubkit_repo, f"bench/empty-{name}"):
        child_call(endpoint, "delete_repo", repo)
    shutil.rmtree(empty_run, ignore_errors=True)
    shutil.rmtree(run_dir, ignore_errors=True)

    hf_time = {kind: counterbalanced(values, first_in_even_rounds=True) for kind, values in hf.items()}
    hubkit_time = {
        kind: counterbalanced(values, first_in_even_rounds=False) for kind, values in hubkit.items()
    }

    def runs(time: float, values: list[float]) -> str:
        return f"{time:.2f} s ({', '.join(f'{v:.2f}' for v in values)})"

    for kind, baseline in (
        ("first", "hf upload"),
        ("re-push", "hf re-upload"),
        ("add one", "hf upload of it"),
    ):
        print(
            f"[{name}] {kind}: {baseline} {runs(hf_time[kind], hf[kind])}; "
            f"hubkit {runs(hubkit_time[kind], hubkit[kind])}, "
            f"of which the card {median(card[kind]):.2f} s"
        )
    print(
        f"[{name}] of `hubkit push`'s time, starting Python and importing the push: "
        f"{median(hubkit['starting and importing the push']):.2f} s"
    )
    for kind in ("add one, command line", "first push, command line", "re-push, command line"):
        print(
            f"[{name}] {kind}: `hf upload` {runs(hf_time[kind], hf[kind])}; "
            f"`hubkit push` {runs(hubkit_time[kind], hubkit[kind])}"
        )
    peak = max(rss_first)
    print(
        f"[{name}] peak RSS (VmHWM of each push's process): first push {peak / 1e6:.0f} MB, the same push "
        f"of a near-empty adapter {rss_empty / 1e6:.0f} MB, one adapter's tensors "
        f"{scale.adapter_bytes / 1e6:.0f} MB"
    )
    ratios = (
        ("first push / hf upload", hubkit_time["first"] / hf_time["first"], "1.25x"),
        ("unchanged re-push / hf re-upload", hubkit_time["re-push"] / hf_time["re-push"], "1.5x"),
        ("add one checkpoint / hf upload of it", hubkit_time["add one"] / hf_time["add one"], "1.25x"),
    )
    for label, ratio, target in ratios:
        print(f"[{name}] ratio {label}: {ratio:.2f}x" + (f" (target <= {target})" if scale.targets else ""))
    for label, kind in (
        ("add one checkpoint, command line / hf upload of it", "add one, command line"),
        ("first push, command line / hf upload", "first push, command line"),
        ("unchanged re-push, command line / hf upload", "re-push, command line"),
    ):
        print(f"[{name}] ratio {label}: {hubkit_time[kind] / hf_time[kind]:.2f}x")
    print(
        f"[{name}] ratio peak RSS above the near-empty push / one adapter's tensors: "
        f"{(peak - rss_empty) / scale.adapter_bytes:.2f}" + (" (target <= 1)" if scale.targets else ""),
        flush=True,
    )


def start_server(root: Path) -> tuple[str, subprocess.Popen]:
    hubkit = Path(sys.executable).parent / "hubkit"
    process = subprocess.Popen(
        [str(hubkit), "hub", "serve", "--root", str(root)], stdout=subprocess.PIPE, text=True
    )
    return process.stdout.readline().strip(), process


def start_link(
    upstream: str, megabytes_per_second: float, count: Path | None = None
) -> tuple[str, subprocess.Popen]:
    """bench/throttle.py in front of `upstream` (counting into `count`): its endpoint and its process."""
    throttle = Path(__file__).with_name("throttle.py")
    counting = ["--count", str(count)] if count else []
    process = subprocess.Popen(
        [
            sys.executable,
            str(throttle),
            "--upstream",
            upstream,
            "--rate",
            str(megabytes_per_second * 1e6),
            *counting,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    return process.stdout.readline().strip(), process


def add_link_rate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--link-rate",
        type=float,
        default=None,
        help="reach the Hub through a link of this many MB/s each way (default: loopback, unlimited)",
    )


def start_hub(root: Path, link_rate: float | None) -> tuple[str, list[subprocess.Popen], str]:
    """The local Hub in its own process, behind bench/throttle.py when `link_rate` is given: its endpoint,
    the processes (the Hub first), and the link in words."""
    endpoint, server = start_server(root)
    if link_rate is None:
        return endpoint, [server], "loopback"
    endpoint, link = start_link(endpoint, link_rate)
    return endpoint, [server, link], f"a {link_rate:g} MB/s link (bench/throttle.py)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", choices=("seed", "small", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=6, help="an even number: each goes first as often")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="where the runs and the Hub go (default: a temp dir)"
    )
    add_link_rate(parser)
    args = parser.parse_args()
    scales = {"seed": [seed_scale()], "small": [small_scale()], "both": [small_scale(), seed_scale()]}[
        args.scale
    ]
    needed = max(s.adapter_bytes for s in scales) * 10 * 6  # the run, plus the repos alive at once
    workdir = Path(tempfile.mkdtemp(prefix="hubkit-bench-push-", dir=args.workdir))
    free = shutil.disk_usage(workdir).free
    if free < needed:
        raise SystemExit(
            f"{workdir} has {free / 1e9:.1f} GB free; this benchmark needs about {needed / 1e9:.1f} GB"
        )
    endpoint, processes, link = start_hub(workdir / "hub", args.link_rate)
    try:
        from hubkit.localhub.client_env import use_local_hub

        use_local_hub(endpoint, str(workdir / "hf_home"), token=TOKEN)
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
        # Import in the parent what a push and an upload import, so that the forked children do not.
        warm = small_scale()
        warm_run = make_scale_run(workdir / "warm", tiny_scale(warm))
        publish_base(endpoint, warm)
        warm_imports(listed_modules(lambda: hubkit_push(endpoint, warm_run, "bench/warm-hubkit")))
        warm_imports(listed_modules(lambda: hf_upload(endpoint, "bench/warm-hf", warm_run, create=True)))
        print(
            f"CPUs: {os.cpu_count()}; Hub: hubkit hub serve (own process), through {link}; "
            f"workdir free: {free / 1e9:.0f} GB"
        )
        for scale in scales:
            bench_scale(scale, endpoint, workdir, args.rounds)
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
