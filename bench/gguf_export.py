"""Benchmark: hubkit's GGUF export against llama.cpp's own convert_hf_to_gguf.py, at the seed's size.

Builds a Qwen3-4B-shaped model (36 layers, hidden 2560, tied embeddings: 8.05 GB of random bf16 weights in
shards of about 4 GB, as Qwen/Qwen3-4B ships them) with bench/merge.py's builder and the real Qwen3
tokenizer, then runs each contender in its own process and prints its wall time and its peak resident
memory above the interpreter (VmHWM minus the resident set once its imports are done):

    hubkit            export_gguf(model, out, ["bf16", "q8_0"]): both files in one pass over the weights
    converter bf16    python convert_hf_to_gguf.py model --outtype bf16   (one type per run)
    converter q8_0    python convert_hf_to_gguf.py model --outtype q8_0

With --k-quants, Q4_K_M too, which llama.cpp's own quantizer makes from a BF16 file:

    hubkit-q4_k_m     export_gguf(model, out, ["q4_k_m"]): BF16 written, then quantized in this process
    quantizer-q4_k_m  llama_cpp.llama_model_quantize(BF16 file, Q4_K_M) alone, in a process that imports
                      nothing else: what llama-quantize does (not built by `make venv-llama`)

The converter is the one inside the llama-cpp-python sdist that `make venv-llama` keeps in
.venv-llama/src (its imports: torch, transformers, sentencepiece, its own gguf-py). Told the same
general.name, it must write the same bytes as hubkit: the files' sha256 are compared.

    $ .venv/bin/python bench/gguf_export.py [--layers 36] [--per-type] [--k-quants] [--keep DIR]

(Not bench/gguf.py: run as a script, that name would shadow the gguf package it measures.)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
QWEN3_4B_LAYERS = 36
QWEN3_4B_SHARD_BYTES = 4 * 10**9  # its shards are 3.96, 3.99 and 0.10 GB
TARGET_PEAK_RSS_MIB = 1.5 * 1024
NAME = "bench-qwen3-4b"
TYPES = ("bf16", "q8_0")


def build_model(model_dir: Path, layers: int) -> int:
    """The Qwen3-4B-shaped model with the Qwen3 tokenizer; returns its weights' size in bytes."""
    sys.path.insert(0, str(REPO_ROOT))  # tests.support
    from tests.support.tiny import copy_tokenizer

    # bench/merge.py's build_base takes the layer count; the shape comes from its module constants.
    spec = importlib.util.spec_from_file_location("bench_merge", BENCH_DIR / "merge.py")
    merge_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(merge_bench)

    for constant, value in {**merge_bench.QWEN3_4B, "SHARD_BYTES": QWEN3_4B_SHARD_BYTES}.items():
        setattr(merge_bench, constant, value)
    total = merge_bench.build_base(model_dir, layers)
    copy_tokenizer(model_dir)
    return total


def converter_path() -> Path:
    found = sorted((REPO_ROOT / ".venv-llama").glob("src/*/vendor/llama.cpp/convert_hf_to_gguf.py"))
    if not found:
        raise SystemExit("no llama.cpp converter in .venv-llama/src: run `make venv-llama` first")
    return found[0]


# --- the contenders, each run in a fresh process by `--worker` -----------------------------------


def rss_mib(field: str) -> float:
    """VmRSS or VmHWM of this process. getrusage's ru_maxrss would not do: it survives exec, so a worker
    would report the peak of the builder that started it; VmHWM belongs to the exec'd address space."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status: this benchmark needs Linux")


def work_hubkit(model_dir: Path, out_dir: Path, types: list[str]) -> dict[str, object]:
    from hubkit.export import GGUFMetadata, export_gguf

    before = rss_mib("VmRSS")
    start = time.perf_counter()
    result = export_gguf(model_dir, out_dir, types, GGUFMetadata(name=NAME))
    wall = time.perf_counter() - start
    files = {f.file_type.lower(): {"size": f.size, "sha256": f.sha256} for f in result.files}
    return {"wall_s": wall, "rss_before_mib": before, "files": files}


def written(out: Path) -> dict[str, object]:
    """A file's size and sha256, as hubkit's export reports its own."""
    from hubkit.hub.hashing import hash_file  # after the contender ran: no part of its memory

    hashes = hash_file(out, git_sha1=False)
    return {"size": hashes.size, "sha256": hashes.sha256}


def work_converter(model_dir: Path, out_dir: Path, file_type: str) -> dict[str, object]:
    converter = converter_path()
    sys.path.insert(0, str(converter.parent))  # its `conversion` package, as `python convert_hf_to_gguf.py`
    namespace = runpy.run_path(str(converter), run_name="converter")  # imports only: main() is not called
    override = out_dir.parent / f"metadata-{file_type}.json"
    override.write_text(json.dumps({"general.name": NAME}))
    out = out_dir / f"{NAME}-{file_type.upper()}.gguf"
    out_dir.mkdir(parents=True, exist_ok=True)
    sys.argv = [str(converter), str(model_dir), "--outtype", file_type, "--metadata", str(override)]
    sys.argv += ["--outfile", str(out)]
    before = rss_mib("VmRSS")
    start = time.perf_counter()
    namespace["main"]()
    wall = time.perf_counter() - start
    return {"wall_s": wall, "rss_before_mib": before, "files": {file_type: written(out)}}


def work_quantizer(bf16_file: Path, out_dir: Path) -> dict[str, object]:
    import ctypes

    import llama_cpp

    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{NAME}-Q4_K_M.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    before = rss_mib("VmRSS")
    start = time.perf_counter()
    if llama_cpp.llama_model_quantize(str(bf16_file).encode(), str(out).encode(), ctypes.byref(params)):
        raise SystemExit(f"llama.cpp could not quantize {bf16_file}")
    wall = time.perf_counter() - start
    return {"wall_s": wall, "rss_before_mib": before, "files": {"q4_k_m": written(out)}}


def run_worker(name: str, model_dir: Path, out_dir: Path) -> dict[str, object]:
    command = [sys.executable, __file__, "--worker", name, str(model_dir), str(out_dir)]
    os.sync()  # no contender pays for the previous one's writeback
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=QWEN3_4B_LAYERS)
    parser.add_argument(
        "--keep", type=Path, help="build the model here (or reuse it) instead of a temporary folder"
    )
    parser.add_argument(
        "--per-type",
        action="store_true",
        help="also time hubkit writing each type alone, as the converter does",
    )
    parser.add_argument(
        "--k-quants", action="store_true", help="also Q4_K_M, against llama.cpp's quantizer alone"
    )
    parser.add_argument("--worker", nargs=3, metavar=("NAME", "MODEL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        name, model_dir, out_dir = args.worker
        if name == "quantizer-q4_k_m":
            measured = work_quantizer(Path(model_dir), Path(out_dir))
        elif name.startswith("hubkit"):
            types = [name.removeprefix("hubkit-")] if name != "hubkit" else list(TYPES)
            measured = work_hubkit(Path(model_dir), Path(out_dir), types)
        else:
            measured = work_converter(Path(model_dir), Path(out_dir), name.removeprefix("converter-"))
        print(json.dumps({**measured, "peak_rss_mib": rss_mib("VmHWM")}))
        return

    converter_path()  # fail before building 8 GB
    with tempfile.TemporaryDirectory(prefix="hubkit-bench-gguf-") as tmp:
        model_dir = args.keep or Path(tmp) / "model"
        if not (model_dir / "config.json").is_file():
            start = time.perf_counter()
            build_model(model_dir, args.layers)
            print(f"built in {time.perf_counter() - start:.0f} s")
        total = sum(p.stat().st_size for p in model_dir.glob("*.safetensors"))
        shards = len(list(model_dir.glob("*.safetensors")))
        print(f"Qwen3-4B-shaped model, {args.layers} layers: {total / 1e9:.2f} GB bf16 in {shards} shards")
        results = {}
        names = ["hubkit", "converter-bf16", "converter-q8_0"]
        names += [f"hubkit-{t}" for t in TYPES] if args.per_type else []
        for name in names:
            out_dir = Path(tmp) / f"out-{name}"
            results[name] = run_worker(name, model_dir, out_dir)
            shutil.rmtree(out_dir)  # the disk holds one contender's files at a time
        if args.k_quants:
            results["hubkit-q4_k_m"] = run_worker("hubkit-q4_k_m", model_dir, Path(tmp) / "out-q4")
            shutil.rmtree(Path(tmp) / "out-q4")
            bf16_dir = Path(tmp) / "out-bf16"
            run_worker("hubkit-bf16", model_dir, bf16_dir)
            bf16 = bf16_dir / f"{NAME}-BF16.gguf"
            results["quantizer-q4_k_m"] = run_worker("quantizer-q4_k_m", bf16, Path(tmp) / "out-quantizer")

    print(f"{'':<16}{'wall':>9}{'peak RSS above imports':>26}{'files':>10}")
    for name, r in results.items():
        above = r["peak_rss_mib"] - r["rss_before_mib"]
        size = sum(f["size"] for f in r["files"].values()) / 1e9
        print(f"{name:<16}{r['wall_s']:8.1f}s{above:20.0f} MiB{size:9.2f} GB")
    hubkit, converter_wall = (
        results["hubkit"],
        results["converter-bf16"]["wall_s"] + results["converter-q8_0"]["wall_s"],
    )
    for file_type in TYPES:
        ours, theirs = hubkit["files"][file_type], results[f"converter-{file_type}"]["files"][file_type]
        same = "same bytes" if ours["sha256"] == theirs["sha256"] else "DIFFERENT BYTES"
        print(
            f"{file_type}: {ours['size'] / 1e9:.2f} GB ({ours['size'] / total:.2f}x the merged model), {same} as the converter's"
        )
    above = hubkit["peak_rss_mib"] - hubkit["rss_before_mib"]
    verdict = "ok" if above <= TARGET_PEAK_RSS_MIB else "MISSED"
    print(
        f"hubkit peak RSS above imports: {above:.0f} MiB = {above * 2**20 / total:.3f}x the merged model (target <= {TARGET_PEAK_RSS_MIB:.0f} MiB: {verdict})"
    )
    print(
        f"wall, hubkit (both types, one pass) / converter (bf16 + q8_0 runs): {hubkit['wall_s'] / converter_wall:.2f}x"
    )
    for file_type in TYPES if args.per_type else ():
        alone, theirs = results[f"hubkit-{file_type}"]["wall_s"], results[f"converter-{file_type}"]["wall_s"]
        print(f"wall, {file_type} alone, hubkit / converter: {alone / theirs:.2f}x")
    if args.k_quants:
        ours, theirs = results["hubkit-q4_k_m"], results["quantizer-q4_k_m"]
        ours_above = ours["peak_rss_mib"] - ours["rss_before_mib"]
        theirs_above = theirs["peak_rss_mib"] - theirs["rss_before_mib"]
        same = ours["files"]["q4_k_m"]["sha256"] == theirs["files"]["q4_k_m"]["sha256"]
        print(
            f"q4_k_m: peak RSS above imports {ours_above:.0f} MiB (the quantizer alone: {theirs_above:.0f} MiB), "
            f"wall {ours['wall_s'] / theirs['wall_s']:.2f}x the quantizer alone (BF16 written first), "
            f"{'same bytes' if same else 'DIFFERENT BYTES'}"
        )
        pipeline = results["converter-bf16"]["wall_s"] + theirs["wall_s"]
        print(
            f"wall, hubkit q4_k_m / (converter bf16 + the quantizer alone): {ours['wall_s'] / pipeline:.2f}x"
        )
    if any(hubkit["files"][t]["sha256"] != results[f"converter-{t}"]["files"][t]["sha256"] for t in TYPES):
        raise SystemExit("hubkit's files are not the converter's")


if __name__ == "__main__":
    main()
