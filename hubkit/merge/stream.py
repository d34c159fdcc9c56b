"""Run a merge plan: one base shard at a time, one tensor at a time, into a fresh output folder."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from hubkit.errors import MergeError
from hubkit.formats.safetensors import SafetensorsHeader, TensorInfo, known_metadata
from hubkit.merge.base_files import SHARD_INDEX, copy_carried_files
from hubkit.merge.lora import add_lora_delta_
from hubkit.merge.lora_adapter import FullWeight
from hubkit.merge.plan import MergePlan
from hubkit.merge.shards import TORCH_DTYPES, ShardReader, ShardWriter

# Called with (bytes written so far, total bytes) after each tensor.
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class MergeResult:
    """A finished merged model folder."""

    out_dir: Path
    merged_modules: int  # LoRA modules merged (whole weights that replace the base's are not counted)
    shards: tuple[str, ...]  # file names, in the base's order
    dtype: str  # torch dtype name of the merged weights, e.g. "bfloat16"


def execute_plan(plan: MergePlan, out_dir: Path, progress: ProgressCallback | None = None) -> MergeResult:
    """Write the merged model into `out_dir`, which appears only once it is complete.

    The work happens in a sibling `.<name>.partial` folder that is renamed to `out_dir` at the end
    and removed on any failure, so `out_dir` never holds a half-merged model.

    Raises:
        MergeError: `out_dir` exists and is not empty, or a merged weight is not finite.
    """
    out_dir = out_dir.absolute()  # "." or "merged/" must still name a sibling staging folder
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
    return MergeResult(
        out_dir=out_dir,
        # The LoRA modules, as the adapter's vetting counts them (`PreparedAdapter.num_modules`): a whole
        # weight replaced is not one.
        merged_modules=sum(not isinstance(plan.targets[info.name], FullWeight) for info in merged),
        shards=tuple(shard.path.name for shard in plan.shards),
        dtype=plan.dtype,
    )


def _write_model(plan: MergePlan, out_dir: Path, progress: ProgressCallback | None) -> list[TensorInfo]:
    vocabulary = plan.vocabulary
    copy_carried_files(list(plan.carried), out_dir, plan.dtype, vocabulary.rows if vocabulary else None)
    for name, data in (
        vocabulary.tokenizer if vocabulary else ()
    ):  # the checkpoint's, vetted: its added tokens
        (out_dir / name).write_bytes(data)
    merged_in = {name for name in plan.targets if plan.reads_base(name)}
    largest = max(
        (t.nbytes for shard in plan.shards for t in shard.tensors if t.name in merged_in), default=0
    )
    # Three buffers for the weights being merged, reused (see ShardReader.read_tensor): one is read
    # while one is merged and one is written (see _write_shard).
    scratch = tuple(torch.empty(largest, dtype=torch.uint8) for _ in range(3))
    merged: list[TensorInfo] = []
    done, total = 0, plan.total_bytes
    with _single_threaded_torch():
        for shard in plan.shards:
            for info, was_merged in _write_shard(plan, shard, out_dir / shard.path.name, scratch):
                if was_merged:
                    merged.append(info)
                done += info.nbytes
                if progress:
                    progress(done, total)
    # Every LoRA module must have been folded in exactly once: a partial merge must not ship.
    if sorted(info.name for info in merged) != sorted(plan.targets):
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


@contextmanager
def _single_threaded_torch() -> Iterator[None]:
    """Run torch on one thread, restoring the setting after.

    The merge works on cache-sized blocks and is bound by memory, not arithmetic: a second intra-op
    thread gains little, and on a busy machine every block's parallel region waits for whichever thread
    was descheduled (measured: 3-5x slower merges under load). Reading and writing use other threads.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _write_shard(
    plan: MergePlan, shard: SafetensorsHeader, path: Path, scratch: tuple[torch.Tensor, ...]
) -> Iterator[tuple[TensorInfo, bool]]:
    """Write one output shard tensor by tensor; yields each tensor and whether it was merged.

    Three stages overlap: a reader thread fetches the next weight to merge, this thread merges the
    current one, and a writer thread writes the previous one (and copies untouched tensors), in order.
    Weight k uses scratch buffer k % 3, which is free once the write of weight k - 3 is done.
    """
    targets = [info for info in shard.tensors if plan.reads_base(info.name)]
    reads: dict[str, Future[torch.Tensor]] = {}
    buffer_writes: list[Future[None] | None] = [None] * len(scratch)
    writes: list[Future[None]] = []
    # Only the metadata libraries read (`format`) is carried over: a merged repo publishes a shard as it was
    # written only when its header is the one vetting writes (`hubkit.safety.weights`).
    metadata = known_metadata(shard.metadata)
    with (
        ShardReader(shard) as reader,
        ShardWriter(path, [plan.written(t) for t in shard.tensors], metadata) as writer,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="hubkit-merge-reader") as read_pool,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="hubkit-merge-writer") as write_pool,
    ):

        def prefetch(k: int) -> None:
            if k < len(targets):
                slot = k % len(scratch)
                reads[targets[k].name] = read_pool.submit(
                    _read_when_free, reader, targets[k], scratch[slot], buffer_writes[slot]
                )

        prefetch(0)
        k = 0  # how many weights of this shard were merged so far
        for info in shard.tensors:
            module = plan.targets.get(info.name)
            if module is None:
                writes.append(write_pool.submit(writer.copy_tensor, info.name, reader, info))
                yield info, False
                continue
            if isinstance(module, FullWeight):  # PEFT loads it in place of the base's: written, cast
                weight = module.weight.to(TORCH_DTYPES[info.dtype])
                writes.append(write_pool.submit(writer.write_tensor, info.name, weight))
                yield plan.written(info), True
                continue
            if module.base_copy is not None:
                # PEFT loads the saved copy over the base's weight (with a resized vocabulary's rows), then
                # merges the LoRA into it: the base's bytes are not read.
                weight = module.base_copy.to(TORCH_DTYPES[info.dtype], copy=True)
            else:
                weight = reads.pop(info.name).result()
                prefetch(k + 1)
            add_lora_delta_(
                weight, module.lora_a, module.lora_b, module.scale, module.module, module.magnitude
            )
            writes.append(write_pool.submit(writer.write_tensor, info.name, weight))
            if module.base_copy is None:  # in scratch buffer k % 3 until this write is done
                buffer_writes[k % len(scratch)] = writes[-1]
                k += 1
            yield plan.written(info), True
        for write in writes:
            write.result()  # raises the first write error, before the shard is renamed into place


def _read_when_free(
    reader: ShardReader, info: TensorInfo, buffer: torch.Tensor, pending_write: Future[None] | None
) -> torch.Tensor:
    if pending_write is not None:
        pending_write.result()  # the buffer's previous weight is written: it may be overwritten
    return reader.read_tensor(info, buffer)
