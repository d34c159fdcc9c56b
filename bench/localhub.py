"""Benchmark: upload and download throughput of the local Hub through the real client, against a plain copy.

Writes one file of random bytes (200 MB by default), then times, best of --repeat runs:

    copy        shutil.copyfile of the same bytes (what the disk allows): the baseline
    sha256      hashing the file once, for scale: an upload hashes twice (the client for the oid, the
                server to verify it), a download not at all
    upload      HfApi.upload_file: preupload, LFS batch, PUT (multipart above 64 MiB), verify, commit
    download    hf_hub_download into an empty cache: HEAD, 302 to the CDN, GET

and prints each as MB/s and as a ratio to the copy time (1.0 = as fast as copying the file). Then a team at
once: --clients clients (threads), each doing --rounds rounds of one download of a --concurrent-mb file into
an empty cache and one commit of a small file, all to one repo; its throughput (rounds per second) is
printed as a ratio to one client doing the same alone, and every download and commit is checked. The Hub
runs as `hubkit hub serve` in its own process (as a user runs it), or in this process with --in-process.

    $ .venv/bin/python bench/localhub.py [--size-mb 200] [--repeat 3] [--in-process]
                                         [--clients 8] [--rounds 3] [--concurrent-mb 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hubkit.hub.hashing import hash_file


def best_time(action: Callable[[int], None], repeat: int) -> float:
    times = []
    for attempt in range(repeat):
        start = time.perf_counter()
        action(attempt)
        times.append(time.perf_counter() - start)
    return min(times)


def sha256_of(path: Path) -> str:
    return hash_file(path, git_sha1=False).sha256


def write_random_file(path: Path, size: int) -> None:
    with path.open("wb") as f:
        left = size
        while left:
            block = os.urandom(min(left, 8 << 20))
            f.write(block)
            left -= len(block)


def start_server(root: Path, in_process: bool) -> tuple[str, Callable[[], None]]:
    """Start the Hub; return its endpoint and a function that stops it."""
    if in_process:
        from hubkit.localhub import LocalHub

        hub = LocalHub(root).start()
        return hub.endpoint, hub.stop
    hubkit = Path(sys.executable).parent / "hubkit"
    process = subprocess.Popen(
        [str(hubkit), "hub", "serve", "--root", str(root)], stdout=subprocess.PIPE, text=True
    )
    endpoint = process.stdout.readline().strip()

    def stop() -> None:
        process.terminate()
        process.wait(timeout=30)

    return endpoint, stop


def team_round_trips(api, work: Path, clients: int, rounds: int, expected: str, tag: str) -> float:
    """Seconds for `clients` threads to each download the shared file and commit a small file, `rounds`
    times; then checks that every download is intact and every commit landed."""
    from huggingface_hub import hf_hub_download

    barrier = threading.Barrier(clients + 1)
    downloads: list[Path] = []
    failures: list[BaseException] = []

    def client(number: int) -> None:
        barrier.wait()
        try:
            for round_number in range(rounds):
                downloads.append(
                    Path(
                        hf_hub_download(
                            "bench/team",
                            "shared.safetensors",
                            cache_dir=work / f"{tag}-cache-{number}-{round_number}",
                            token="bench",
                        )
                    )
                )
                api.upload_file(
                    path_or_fileobj=f"{tag} {number} {round_number}\n".encode(),
                    path_in_repo=f"{tag}/{number}-{round_number}.txt",
                    repo_id="bench/team",
                )
        except BaseException as e:  # reported by the main thread
            failures.append(e)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    if failures:
        raise failures[0]
    if len(downloads) != clients * rounds or any(sha256_of(p) != expected for p in downloads):
        raise SystemExit("a concurrent download is missing or corrupt")
    landed = [f for f in api.list_repo_files("bench/team") if f.startswith(f"{tag}/")]
    if len(landed) != clients * rounds:
        raise SystemExit(f"{len(landed)} of {clients * rounds} concurrent commits landed")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--in-process", action="store_true", help="run the Hub in this process (threads)")
    parser.add_argument("--clients", type=int, default=8, help="clients at once in the concurrent case")
    parser.add_argument("--rounds", type=int, default=3, help="download + commit rounds per client")
    parser.add_argument("--concurrent-mb", type=int, default=20, help="size of the file they all download")
    args = parser.parse_args()
    size = args.size_mb * 1000 * 1000

    with tempfile.TemporaryDirectory(prefix="hubkit-bench-") as tmp:
        work = Path(tmp)
        source = work / "big.safetensors"
        write_random_file(source, size)
        endpoint, stop = start_server(work / "hub", args.in_process)
        try:
            from hubkit.localhub.client_env import use_local_hub

            use_local_hub(endpoint, str(work / "hf_home"))
            from huggingface_hub import HfApi, hf_hub_download
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
            api = HfApi(endpoint=endpoint, token="bench")
            api.create_repo("bench/throughput")

            copy = best_time(lambda i: shutil.copyfile(source, work / f"copy-{i}"), args.repeat)
            sha256 = best_time(lambda i: sha256_of(source), args.repeat)

            def upload(attempt: int) -> None:
                # A new path each time, and a fresh object id: identical content would be skipped.
                if attempt:
                    with source.open("r+b") as f:
                        f.write(os.urandom(32))
                api.upload_file(
                    path_or_fileobj=source,
                    path_in_repo=f"big-{attempt}.safetensors",
                    repo_id="bench/throughput",
                )

            up = best_time(upload, args.repeat)

            def download(attempt: int) -> None:
                hf_hub_download(
                    "bench/throughput",
                    "big-0.safetensors",
                    cache_dir=work / f"cache-{attempt}",
                    token="bench",
                )

            down = best_time(download, args.repeat)

            shared = work / "shared.safetensors"
            write_random_file(shared, args.concurrent_mb * 1000 * 1000)
            api.create_repo("bench/team")
            api.upload_file(path_or_fileobj=shared, path_in_repo="shared.safetensors", repo_id="bench/team")
            expected = sha256_of(shared)
            alone = team_round_trips(api, work, 1, args.rounds, expected, "alone")
            team = team_round_trips(api, work, args.clients, args.rounds, expected, "team")
        finally:
            stop()

    mode = "in-process" if args.in_process else "subprocess (hubkit hub serve)"
    print(f"local Hub throughput, {args.size_mb} MB file, best of {args.repeat}, server: {mode}")
    for name, seconds in (("copy", copy), ("sha256", sha256), ("upload", up), ("download", down)):
        print(
            f"  {name:9s} {seconds:7.3f} s  {size / seconds / 1e6:8.1f} MB/s  ratio to copy {seconds / copy:6.2f}"
        )
    alone_rate, team_rate = args.rounds / alone, args.clients * args.rounds / team
    print(
        f"concurrent: each round downloads {args.concurrent_mb} MB into an empty cache and commits a small file "
        f"(one repo); {os.cpu_count()} CPUs"
    )
    print(f"  1 client    {args.rounds:3d} rounds in {alone:6.2f} s  {alone_rate:6.2f} rounds/s")
    print(
        f"  {args.clients} clients {args.clients * args.rounds:3d} rounds in {team:6.2f} s  {team_rate:6.2f} rounds/s"
        f"  all intact, all committed"
    )
    print(f"  throughput ratio, {args.clients} clients to 1 client: {team_rate / alone_rate:.2f}")


if __name__ == "__main__":
    main()
