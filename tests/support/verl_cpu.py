"""verl 0.6.1's own trainer on a machine without a GPU: for hubkit's tests and benchmarks, never for training.

verl 0.6.1 assumes CUDA in a few places that have nothing to do with a recipe. `apply` fills exactly those
gaps in the process it runs in, and does nothing where CUDA is available; `overrides` are the Hydra settings
a CPU run adds after the recipe's own (they win, as the recipe's launch script says). Everything else, the
recipe's settings included, reaches verl unchanged, so a recipe bug still fails here as it would on GPUs.

Loaded into every Ray worker (verl's TaskRunner and its FSDP workers) by Ray itself::

    +ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=verl_cpu.apply

as the top-level module ``verl_cpu``: `ENVIRONMENT` puts this folder on ``PYTHONPATH`` (verl's wheel ships a
``tests`` package of its own, which would hide this one as ``tests.support``).

The gaps (each met when verl ran here):

- process groups: verl asks for ``cpu:gloo,cpu:nccl`` or ``nccl``; torch has no NCCL without CUDA → gloo;
- ``torch.cpu`` lacks the RNG and memory functions verl calls through ``get_torch_device()``;
- ``topk_reduce_ratio_min_max`` all-gathers a 0-d tensor into shape-(1,) buffers, which gloo refuses;
- the HF rollout, verl's only rollout without CUDA, is not registered and predates the 3-argument rollout
  constructor and FSDP2: `FsdpHFRollout` registers it as ``("hf", "sync")`` and generates with the FSDP2
  actor itself.

Only this module imports torch and verl, inside `apply`: the overrides can be read without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HOOK = "verl_cpu.apply"

# The Hydra overrides of a CPU run, after the recipe's own. Why each is there:
OVERRIDES = (
    # verl counts only GPUs when it places workers: Ray is told of logical ones (nothing checks them).
    # ranks + 1 logical CPUs: the TaskRunner takes one, each worker bundle one (2 cores run them all).
    "ray_kwargs.ray_init.num_cpus={cpus}",
    "+ray_kwargs.ray_init.num_gpus={ranks}",
    "+ray_kwargs.ray_init.include_dashboard=False",
    f"+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook={HOOK}",
    "trainer.n_gpus_per_node={ranks}",
    # vLLM needs CUDA; the HF rollout registered by `apply` samples with the actor itself.
    "actor_rollout_ref.rollout.name=hf",
    # flash-attention and verl's padding-free path have CUDA (and NPU) kernels only.
    "+actor_rollout_ref.model.override_config.attn_implementation=eager",
    "actor_rollout_ref.model.use_remove_padding=False",
    "actor_rollout_ref.actor.use_torch_compile=False",
    # Loader worker processes on 2 cores only add start-up time (and one was killed noisily at exit).
    "data.dataloader_num_workers=0",
)
ENVIRONMENT = {
    "TORCH_COMPILE_DISABLE": "1",
    "HYDRA_FULL_ERROR": "1",
    "OMP_NUM_THREADS": "1",
    "PYTHONPATH": str(Path(__file__).resolve().parent),  # `HOOK`'s module, in the driver and every worker
}


def overrides(ranks: int) -> list[str]:
    """The Hydra overrides a CPU run of `ranks` FSDP ranks appends to the recipe's."""
    return [line.format(ranks=ranks, cpus=ranks + 1) for line in OVERRIDES]


def apply() -> None:
    """Fill verl 0.6.1's CPU gaps in this process (Ray's worker setup hook); nothing where CUDA is present."""
    import torch

    if torch.cuda.is_available():
        return
    _gloo_process_groups(torch)
    _cpu_device_functions(torch)
    _gloo_timing_gather()
    _register_hf_rollout()


def _gloo_process_groups(torch: Any) -> None:
    init = torch.distributed.init_process_group
    if getattr(init, "_hubkit_gloo", False):
        return

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend")
        if isinstance(backend, str) and "nccl" in backend:
            kwargs["backend"] = "gloo"
        return init(*args, **kwargs)

    init_process_group._hubkit_gloo = True  # type: ignore[attr-defined]
    torch.distributed.init_process_group = init_process_group


def _cpu_device_functions(torch: Any) -> None:
    """What verl calls on ``get_torch_device()`` that torch.cpu lacks: the CPU RNG, and no device memory."""
    nothing = lambda *args, **kwargs: None  # noqa: E731
    zero = lambda *args, **kwargs: 0  # noqa: E731
    functions = {
        "get_rng_state": lambda *args, **kwargs: torch.get_rng_state(),
        "set_rng_state": lambda state, *args, **kwargs: torch.set_rng_state(state),
        "manual_seed": lambda seed: torch.manual_seed(seed),
        "manual_seed_all": lambda seed: torch.manual_seed(seed),
        "empty_cache": nothing,
        "ipc_collect": nothing,
        "reset_peak_memory_stats": nothing,
        "reset_max_memory_allocated": nothing,
        "memory_allocated": zero,
        "memory_reserved": zero,
        "max_memory_allocated": zero,
        "max_memory_reserved": zero,
        "mem_get_info": lambda *args, **kwargs: (0, 0),
    }
    for name, function in functions.items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, function)


def _gloo_timing_gather() -> None:
    import torch
    import torch.distributed as dist
    from verl.utils.profiler import performance
    from verl.workers import fsdp_workers

    def topk_reduce_ratio_min_max(timing: float, k: int = 10) -> tuple[float, float, float]:
        # verl's own maths; the local value is shaped (1,) like the buffers it is gathered into.
        if not dist.is_initialized():
            return -1.0, -1.0, -1.0
        local = torch.tensor([timing], dtype=torch.float32)
        gathered = [torch.zeros(1, dtype=torch.float32) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, local)
        stacked = torch.stack(gathered)
        top_k_percentile = torch.quantile(stacked, 1 - k / 100)
        tail_ratio = torch.mean((stacked > top_k_percentile).float()).item()
        return tail_ratio, stacked.min().item(), stacked.max().item()

    performance.topk_reduce_ratio_min_max = topk_reduce_ratio_min_max
    fsdp_workers.topk_reduce_ratio_min_max = topk_reduce_ratio_min_max


def _register_hf_rollout() -> None:
    from verl.workers import fsdp_workers
    from verl.workers.rollout import base
    from verl.workers.rollout.hf_rollout import HFRollout

    class FsdpHFRollout(HFRollout):
        """verl's HF rollout on the FSDP2 actor: the actor module generates, so no weights are synced."""

        def __init__(self, config: Any, model_config: Any, device_mesh: Any) -> None:
            base.BaseRollout.__init__(self, config, model_config, device_mesh)
            self.module: Any = None  # the FSDP2 actor, set once the worker has built this rollout
            self._root_ran = False

        async def resume(self, tags: list[str]) -> None:
            return None

        async def update_weights(self, weights: Any, **kwargs: Any) -> None:
            return None  # generation runs on the trained module itself

        async def release(self) -> None:
            return None

        def generate_sequences(self, prompts: Any) -> Any:
            import torch

            if not self._root_ran:
                # FSDP2 takes the first module whose forward runs as its root: the whole model must run
                # once before generate() calls the layers directly.
                with torch.no_grad():
                    self.module(
                        input_ids=prompts.batch["input_ids"][:1],
                        attention_mask=prompts.batch["attention_mask"][:1],
                    )
                self._root_ran = True
            # generate() never runs the root's forward, so the root's own parameters (embeddings, final
            # norm) stay sharded unless gathered here.
            self.module.unshard()
            try:
                return super().generate_sequences(prompts)
            finally:
                self.module.reshard()

    # verl imports a rollout class by its dotted name, and Ray pickles patched worker methods by reference:
    # both are module attributes of this module once applied.
    FsdpHFRollout.__module__, FsdpHFRollout.__qualname__ = __name__, "FsdpHFRollout"
    _applied["FsdpHFRollout"] = FsdpHFRollout
    globals()["FsdpHFRollout"] = FsdpHFRollout
    base._ROLLOUT_REGISTRY[("hf", "sync")] = f"{__name__}.FsdpHFRollout"
    worker = fsdp_workers.ActorRolloutRefWorker
    if worker._build_rollout is not _build_rollout_on_actor:
        _applied["build_rollout"] = worker._build_rollout
        worker._build_rollout = _build_rollout_on_actor


# What `apply` installed in this process: verl's own `_build_rollout` and the rollout class.
_applied: dict[str, Any] = {}


def _build_rollout_on_actor(self: Any, *args: Any, **kwargs: Any) -> None:
    """verl's `ActorRolloutRefWorker._build_rollout`, then the HF rollout handed the FSDP2 actor."""
    _applied["build_rollout"](self, *args, **kwargs)
    if isinstance(self.rollout, _applied["FsdpHFRollout"]):
        self.rollout.module = self.actor_module_fsdp
