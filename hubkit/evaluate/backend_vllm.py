"""The vLLM backend: `vllm_worker.py` run by the Python of a separate environment that has vLLM.

vLLM pins transformers and torch versions other than hubkit's, so it cannot share hubkit's environment.
hubkit hands the worker a JSON job (the base model's local folder, each checkpoint's local adapter
folder, the prompts as token ids, the settings) and reads back token ids; prompts, decoding and scoring
are the same code as the transformers backend's. vLLM loads LoRA adapters from local folders only, which
is what `GenerationJob.adapters` holds; the base comes from the Hub cache
(`hubkit.merge.base_files.fetch_base_snapshot` downloads only the files listed by ``allow_patterns``).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hubkit.errors import AdapterError, EvalError
from hubkit.evaluate.generation import GeneratedIds, GenerationJob, Progress
from hubkit.formats.peft import base_changing_init, max_rank, read_adapter_config

PYTHON_ENV = "HUBKIT_VLLM_PYTHON"
WORKER = Path(__file__).with_name("vllm_worker.py")
# The LoRA ranks vLLM accepts for max_lora_rank (vllm/config/lora.py, `MaxLoRARanks`).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def max_lora_rank(adapter_dirs: list[Path], base_dir: Path | None = None) -> int:
    """The smallest rank vLLM accepts that fits every module of every adapter (``r`` and its
    ``rank_pattern``; 8 when there is none). An adapter that resized its vocabulary is refused against
    `base_dir`.

    Raises:
        EvalError: an adapter's rank is above what vLLM supports, its config is unreadable, or vLLM would
            not apply it as PEFT does.
    """
    ranks = []
    for adapter_dir in adapter_dirs:
        try:
            config = read_adapter_config(adapter_dir, adapter_dir.name)
        except AdapterError as e:
            raise EvalError(f"cannot read the LoRA rank: {e}") from e
        _refuse_what_vllm_misreads(config, adapter_dir.name)
        if base_dir is not None:
            _refuse_resized_vocabulary(adapter_dir, base_dir)
        rank = max_rank(config)
        if rank is None:
            raise EvalError(f"cannot read the LoRA rank of {adapter_dir.name}: its config has no usable r")
        ranks.append(rank)
    needed = max(ranks, default=8)
    if needed > VLLM_LORA_RANKS[-1]:
        raise EvalError(
            f"LoRA rank {needed} is above vLLM's largest ({VLLM_LORA_RANKS[-1]}): use --backend transformers"
        )
    return next(rank for rank in VLLM_LORA_RANKS if rank >= needed)


def vllm_misapplies(config: dict[str, Any]) -> str | None:
    """What vLLM would apply otherwise than PEFT in an adapter with this config, or None: vLLM applies
    W + s·B·A and nothing else, so an adapter trained on a residual of the base (PiSSA, OLoRA...: PEFT redoes
    the init as it loads) gives silently wrong answers there, and DoRA or whole modules it does not apply
    (`vllm/lora/peft_helper.py`). The one rule of `hubkit eval --backend vllm` and of the cards' vLLM usage."""
    init = base_changing_init(config)
    if init is not None:
        return f"init_lora_weights={init!r} (it applies to the base PEFT rebuilds as it loads it)"
    for key, what in (("use_dora", "DoRA"), ("modules_to_save", "whole modules (modules_to_save)")):
        if config.get(key):
            return what
    return None


def _refuse_what_vllm_misreads(config: dict[str, Any], name: str) -> None:
    """Refuse an adapter vLLM would apply otherwise than PEFT (`vllm_misapplies`).

    Raises:
        EvalError: such an adapter, naming the backend that evaluates it as PEFT loads it.
    """
    what = vllm_misapplies(config)
    if what is None:
        return
    init = base_changing_init(config)
    if init is not None:
        raise EvalError(
            f"{name}: init_lora_weights={init!r} adapters apply to the base PEFT rebuilds as it loads them, "
            "not to the base vLLM loads: use --backend transformers, or convert the adapter with PEFT's "
            "save_pretrained(..., path_initial_model_for_weight_conversion=...)"
        )
    raise EvalError(f"{name}: vLLM applies plain LoRA only, not {what}: use --backend transformers")


def _refuse_resized_vocabulary(adapter_dir: Path, base_dir: Path) -> None:
    """vLLM loads the base with its own rows: an adapter that resized the vocabulary (tokens added) does not
    apply there as PEFT applies it onto the resized base."""
    from hubkit.adapters.base_check import BaseConfig, resized_rows

    rows = resized_rows(adapter_dir, BaseConfig.of(base_dir.name, base_dir / "config.json"))
    if rows is not None:
        raise EvalError(
            f"{adapter_dir.name}: the adapter resized the vocabulary to {rows} rows (tokens added), which vLLM's "
            "base does not have: use --backend transformers"
        )


def job_payload(job: GenerationJob) -> dict[str, Any]:
    """The JSON the worker reads (the dtype is the job's, which vLLM takes by the same names)."""
    settings = job.settings
    adapters = dict(job.adapters)
    return {
        "base_dir": str(job.base_dir),
        "models": list(job.models),
        "adapters": {name: str(adapters[name]) for name in job.models if name in adapters},
        "prompts": [list(p) for p in job.prompts],
        "max_new_tokens": settings.max_new_tokens,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "seed": settings.seed,
        "batch_size": settings.batch_size,
        "stop_ids": list(job.stop_ids),
        "max_lora_rank": max_lora_rank([adapters[n] for n in job.models if n in adapters], job.base_dir),
        "max_model_len": max(len(p) for p in job.prompts) + settings.max_new_tokens,
        "dtype": job.dtype,
    }


def resolve_python(python: str | os.PathLike[str] | None) -> Path:
    """The Python of vLLM's environment: `python`, else ``$HUBKIT_VLLM_PYTHON``.

    Raises:
        EvalError: none given, or not an executable file.
    """
    chosen = python or os.environ.get(PYTHON_ENV)
    if not chosen:
        raise EvalError(
            "the vLLM backend runs in its own environment: create one with `pip install vllm`, then pass "
            f"--vllm-python ENV/bin/python (or set {PYTHON_ENV})"
        )
    path = Path(chosen).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise EvalError(f"--vllm-python {path} is not an executable file")
    return path


def run(
    job: GenerationJob,
    progress: Progress | None = None,
    *,
    python: str | os.PathLike[str] | None = None,
) -> GeneratedIds:
    """Generate with vLLM in its own environment (`python`, default ``$HUBKIT_VLLM_PYTHON``): model name →
    generated ids per prompt. `progress` gets the number of answers after each chunk of problems.

    Raises:
        EvalError: no vLLM environment, or the worker failed (the message ends with its last error line).
    """
    interpreter = resolve_python(python)
    with tempfile.TemporaryDirectory(prefix="hubkit-vllm-") as tmp:
        job_path, out_path, log_path = Path(tmp, "job.json"), Path(tmp, "out.json"), Path(tmp, "stderr.log")
        job_path.write_text(json.dumps(job_payload(job)))
        with log_path.open("w") as log:
            # -I: the worker must not import hubkit's modules beside it, nor this environment's packages.
            process = subprocess.Popen(
                [str(interpreter), "-I", str(WORKER), str(job_path), str(out_path)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("progress ") and progress is not None:
                    progress(int(line.split()[1]))
            returncode = process.wait()
        if returncode != 0 or not out_path.is_file():
            lines = log_path.read_text(errors="replace").splitlines()
            last = next((line for line in reversed(lines) if line.strip()), "no output")
            raise EvalError(f"the vLLM worker failed (exit status {returncode}): {last}")
        ids: GeneratedIds = json.loads(out_path.read_text())["ids"]
    return ids
