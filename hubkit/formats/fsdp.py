"""Rebuilding a LoRA adapter's tensors from verl's FSDP checkpoint shards.

verl saves ``actor/model_world_size_W_rank_R.pt`` per rank: the sharded state dict of the whole PeftModel,
each value a DTensor whose local piece is one rank's slice along its ``Shard`` dim (research: verl.md §1.3,
§1.6). Only the ``lora_`` entries are read back and the slices concatenated in rank order.

The shards are pickles. They are loaded with ``torch.load(weights_only=True)`` and an explicit allow-list
of the classes a DTensor checkpoint contains, so loading one can never run arbitrary code.

The layout (`world_size`, `model_shard_paths`) is read without torch: the run reader uses it to tell
whether a save is complete, and importing torch with its DTensor classes costs 1.2-1.5 s, which a push
that rebuilds no adapter never pays.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.errors import CheckpointError, FileFormatError
from hubkit.formats.json_fields import is_count
from hubkit.formats.json_file import read_json

if TYPE_CHECKING:
    import torch

FSDP_CONFIG = "fsdp_config.json"
# {"FSDP_version": 2, "world_size": W}: a larger file is no fsdp_config.json.
MAX_CONFIG_BYTES = 1_000_000


def world_size(actor_dir: Path) -> int | None:
    """The number of FSDP ranks that saved `actor_dir`, from its ``fsdp_config.json`` (None: not readable)."""
    try:
        config = read_json(actor_dir / FSDP_CONFIG, max_bytes=MAX_CONFIG_BYTES)
    except (OSError, FileFormatError):
        return None
    size = config.get("world_size") if isinstance(config, dict) else None
    return size if is_count(size) else None


def model_shard_paths(actor_dir: Path, size: int) -> list[Path]:
    """The model shard files of every rank, in rank order (they may not all exist)."""
    return [actor_dir / f"model_world_size_{size}_rank_{rank}.pt" for rank in range(size)]


@contextmanager
def _dtensor_globals() -> Iterator[None]:
    """Allow what a pickled FSDP2 DTensor refers to besides plain tensors (torch 2.13), and nothing else."""
    from torch import Size, serialization
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
    from torch.distributed.tensor.placement_types import Partial, Replicate, Shard

    safe = [DTensor, DTensorSpec, TensorMeta, DeviceMesh, Shard, Replicate, Partial, ShardOrderEntry, Size]
    # Unpickling a DeviceMesh outside a process group logs a warning about torch.compile lookups; hubkit
    # only reads the local tensors, so it is noise here.
    mesh_logger = logging.getLogger("torch.distributed.device_mesh")
    level = mesh_logger.level
    mesh_logger.setLevel(logging.ERROR)
    try:
        with serialization.safe_globals(safe):
            yield
    finally:
        mesh_logger.setLevel(level)


def _local_piece(value: object, key: str, label: str) -> tuple[int | None, torch.Tensor]:
    """(shard dim or None when replicated, this rank's tensor) of one state-dict value."""
    import torch
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.placement_types import Shard

    if isinstance(value, DTensor):
        placements = value.placements
        if len(placements) != 1:
            raise CheckpointError(
                f"{label}: {key} is sharded over {len(placements)} mesh dims; only FSDP is supported"
            )
        placement = placements[0]
        dim = placement.dim if isinstance(placement, Shard) else None
        return dim, value.to_local()
    if isinstance(value, torch.Tensor):
        return None, value
    raise CheckpointError(f"{label}: {key} in the FSDP shards is a {type(value).__name__}, not a tensor")


def load_lora_tensors(actor_dir: Path, label: str) -> dict[str, torch.Tensor]:
    """The full (unsharded) LoRA tensors, on CPU, of a verl checkpoint's ``global_step_N/actor`` folder, keys
    as saved (``...lora_A.default.weight``).

    Raises:
        CheckpointError: no ``fsdp_config.json``, a missing shard, a shard that is not a plain DTensor
            checkpoint (unknown classes are refused, never unpickled), or no LoRA weights at all.
    """
    import torch

    size = world_size(actor_dir)
    if size is None:
        raise CheckpointError(
            f"{label}: no readable fsdp_config.json in {actor_dir.name}/: the save is incomplete"
        )
    parts: dict[str, tuple[int | None, list[torch.Tensor]]] = {}
    for path in model_shard_paths(actor_dir, size):
        if not path.is_file():
            raise CheckpointError(f"{label}: shard {path.name} is missing: the save is incomplete")
        try:
            with _dtensor_globals():
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except pickle.UnpicklingError as e:
            raise CheckpointError(
                f"{label}: {path.name} holds objects outside the DTensor allow-list; refusing to unpickle it"
            ) from e
        except RuntimeError as e:  # torch's zip reader: a truncated or corrupt file
            raise CheckpointError(
                f"{label}: {path.name} cannot be read: the shard is truncated or corrupt"
            ) from e
        for key, value in state.items():
            if ".lora_A." in key or ".lora_B." in key:  # in any of PEFT's spellings of a key
                dim, piece = _local_piece(value, key, label)
                parts.setdefault(key, (dim, []))[1].append(piece)
    if not parts:
        raise CheckpointError(
            f"{label}: the FSDP shards hold no LoRA weights: was this run trained with LoRA?"
        )
    return {
        key: (pieces[0] if dim is None else torch.cat(pieces, dim=dim)).contiguous()
        for key, (dim, pieces) in parts.items()
    }
