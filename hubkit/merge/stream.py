"""Run a merge plan: one base shard at a time, one tensor at a time, into a fresh output folder."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from hubkit.errors import MergeError
from hubkit.merge.base_files import SHARD_INDEX, copy_carried_files
from hubkit.merge.lora import add_lora_delta_
from hubkit.merge.plan import MergePlan
from hubkit.merge.shards import ShardHeader, ShardReader, ShardWriter

# Called with (bytes written so far, total bytes) after each tensor.
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class MergeResult:
    """A finished merged model folder."""

    out_dir: Path
    merged_modules: int
    shards: tuple[str, ...]  # file names, in the base's order
    dtype: str  # torch dtype name of the merged weights, e.g. "bfloat16"


def execute_plan(plan: MergePlan, out_dir: Path, progress: ProgressCallback | None = None) -> MergeResult:
    """Write the merged model into `out_dir`, which appears only once it is complete.

    The work happens in a sibling `.<name>.partial` folder that is renamed to `out_dir` at the end
    and removed on any failure, so `out_dir` never holds a half-merged model.

    Raises:
        MergeError: `out_dir` exists and is not empty, or a delta is not finite.
    """
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise MergeError(f"output folder {out_dir} is not empty; choose a new folder or empty it")
    staging = out_dir.with_name(f".{out_dir.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)  # a leftover of an interrupted merge into the same place
    staging.mkdir(parents=True)
    try:
        merged = _write_model(plan, staging, progress)
        if out_dir.exists():
            out_dir.rmdir()
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    dtypes = Counter(dtype for _, dtype in merged)
    return MergeResult(
        out_dir=out_dir,
        merged_modules=len(merged),
        shards=tuple(shard.path.name for shard in plan.shards),
        dtype=str(dtypes.most_common(1)[0][0]).removeprefix("torch."),  # mixed dtypes: the most common
    )


def _write_model(
    plan: MergePlan, out_dir: Path, progress: ProgressCallback | None
) -> list[tuple[str, torch.dtype]]:
    copy_carried_files(list(plan.carried), out_dir)
    merged: list[tuple[str, torch.dtype]] = []
    done, total = 0, plan.total_bytes
    for shard in plan.shards:
        for name, dtype, nbytes in _write_shard(plan, shard, out_dir / shard.path.name):
            if dtype is not None:
                merged.append((name, dtype))
            done += nbytes
            if progress:
                progress(done, total)
    # Every LoRA module must have been folded in exactly once: a partial merge must not ship.
    if sorted(name for name, _ in merged) != sorted(plan.targets):
        raise MergeError(
            f"merged {len(merged)} modules but the adapter has {len(plan.targets)}; nothing was written"
        )
    if plan.index is not None:
        index = {
            "metadata": {**plan.index.get("metadata", {}), "total_size": total},
            "weight_map": plan.index["weight_map"],
        }
        (out_dir / SHARD_INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return merged


def _write_shard(
    plan: MergePlan, shard: ShardHeader, path: Path
):  # yields (name, merged dtype or None, nbytes)
    with ShardReader(shard) as reader, ShardWriter(path, list(shard.tensors), shard.metadata) as writer:
        for info in shard.tensors:
            module = plan.targets.get(info.name)
            if module is None:
                writer.copy_tensor(info.name, reader, info)
                yield info.name, None, info.nbytes
                continue
            weight = reader.read_tensor(info)
            add_lora_delta_(weight, module.lora_a, module.lora_b, module.scale, module.module)
            writer.write_tensor(info.name, weight)
            yield info.name, weight.dtype, info.nbytes
