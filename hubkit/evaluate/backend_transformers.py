"""The transformers backend: the base loaded once, every checkpoint a named PEFT adapter, one batch for all.

Each `generate` call answers a batch of problems for the base model and every checkpoint at once, with
PEFT's mixed-adapter batches: row i runs through adapter ``adapter_names[i]``, ``"__base__"`` meaning no
adapter (peft ``tuners/lora/layer.py``, ``_mixed_batch_forward``). That needs the model in eval mode and
every name loaded; PEFT refuses merged adapters and DoRA there, so with DoRA adapters each model answers
the batch on its own. Adapters are loaded with an explicit ``torch_device``: PEFT's default picks CUDA
whenever it exists (peft issue 3793).

With one model only, the batch runs without `adapter_names` (the checkpoint active, or the adapters
disabled for the base): what loading that checkpoint alone gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hubkit.evaluate.generation import DEFAULT_DTYPE, Dtype, GeneratedIds, GenerationJob, Progress
from hubkit.runs.eval_results import BASE_NAME

PEFT_BASE = "__base__"  # PEFT's name for "no adapter" in a mixed batch


def _contiguous_input(_module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return (args[0].contiguous(), *args[1:])


def torch_dtype(dtype: Dtype) -> Any:
    """The torch dtype named by `dtype` (``auto`` stays ``auto``: transformers reads the base's config)."""
    import torch

    return dtype if dtype == "auto" else getattr(torch, dtype)


def load_model(
    base_dir: Path, adapters: Mapping[str, Path], *, device: str | None = None, dtype: Any = DEFAULT_DTYPE
) -> Any:
    """The base model with every adapter (name → PEFT folder) loaded under its name, in eval mode: a
    `PeftModel`, or the base model when there is no adapter. `device`: default CUDA when a GPU is visible.

    `dtype` is the base's, a `Dtype` name or a torch dtype: bfloat16 by default, on a CPU too (adapters keep
    PEFT's default: float32 under a half-precision base, as `PeftModel.from_pretrained` loads them).
    """
    import torch
    from transformers import AutoModelForCausalLM

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(dtype, str):
        dtype = torch_dtype(dtype)  # type: ignore[arg-type]
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype).to(device)
    if not device.startswith("cuda"):
        # generate() hands the output layer the last position as a non-contiguous slice, and on a CPU
        # torch's bfloat16 linear then works on float32 copies: loading a Qwen3-4B-shaped base with 2
        # checkpoints and answering 2 problems peaked at 12.6 GB RSS, 8.3 GB with a contiguous input.
        model.get_output_embeddings().register_forward_pre_hook(_contiguous_input)
    if adapters:
        from peft import PeftModel

        (first, first_dir), *rest = adapters.items()
        _resize_for(model, Path(first_dir))
        model = PeftModel.from_pretrained(model, first_dir, adapter_name=first, torch_device=device)
        for name, adapter_dir in rest:
            model.load_adapter(adapter_dir, adapter_name=name, torch_device=device)
    return model.eval()


def _resize_for(model: Any, adapter_dir: Path) -> None:
    """Resize the base's embeddings to the rows of an adapter that resized the vocabulary (tokens added before
    training: `hubkit.adapters.base_check.resized_vocabulary`), as it was trained; the adapter's whole
    embeddings then replace them as PEFT loads it."""
    from hubkit.adapters.base_check import resized_vocabulary, saved_whole
    from hubkit.formats.peft import read_adapter_config, read_weights_header

    label = adapter_dir.name
    weights = saved_whole(
        read_weights_header(adapter_dir, label).by_name(), read_adapter_config(adapter_dir, label), label
    )
    embedding = model.get_input_embeddings().weight
    rows = resized_vocabulary(weights, embedding.shape[1], embedding.shape[0])
    if rows is not None:
        model.resize_token_embeddings(rows, mean_resizing=False)


def _generation_config(job: GenerationJob) -> Any:
    from transformers import GenerationConfig

    settings = job.settings
    sampling = {"temperature": settings.temperature, "top_p": settings.top_p} if settings.do_sample else {}
    # A fresh config: the base's own generation_config.json may ask for sampling.
    return GenerationConfig(
        max_new_tokens=settings.max_new_tokens,
        do_sample=settings.do_sample,
        eos_token_id=list(job.stop_ids),
        pad_token_id=job.pad_id,
        **sampling,
    )


def _single_model_context(model: Any, name: str) -> contextlib.AbstractContextManager[Any]:
    """The model as if loaded alone: the named checkpoint active, or the adapters off for the base."""
    from peft import PeftModel

    if not isinstance(model, PeftModel):
        return contextlib.nullcontext()
    if name == BASE_NAME:
        return model.disable_adapter()
    model.set_adapter(name)
    return contextlib.nullcontext()


def generate(model: Any, job: GenerationJob, progress: Progress | None = None) -> GeneratedIds:
    """Answer every prompt with every model of `job` (`model`: from `load_model`, holding each checkpoint's
    adapter), one `generate` per batch of problems: model name → generated ids per prompt (padding
    included; `chat.completion_from_ids` cuts it). `progress` gets each batch's number of answers."""
    import torch

    device = next(model.parameters()).device
    config = _generation_config(job)
    torch.manual_seed(job.settings.seed)
    out: GeneratedIds = {name: [] for name in job.models}
    # PEFT refuses DoRA in a mixed batch: each model of a DoRA run then answers the batch on its own.
    together = [list(job.models)] if not _uses_dora(model) else [[name] for name in job.models]
    for batch in job.batches():
        for models in together:
            rows = [(name, i) for name in models for i in batch]
            for (name, _), ids in zip(rows, _generate_rows(model, job, config, rows, device), strict=True):
                out[name].append(ids)
            if progress is not None:
                progress(len(rows))
    return out


def _uses_dora(model: Any) -> bool:
    configs = getattr(model, "peft_config", {})
    return any(getattr(config, "use_dora", False) for config in configs.values())


def _generate_rows(
    model: Any, job: GenerationJob, config: Any, rows: list[tuple[str, int]], device: Any
) -> list[list[int]]:
    """The generated ids of each row (a model's name, a prompt's index), left-padded into one batch."""
    import torch

    width = max(len(job.prompts[i]) for _, i in rows)
    input_ids = torch.full((len(rows), width), job.pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (_, i) in enumerate(rows):  # left padding: every row's answer starts at column `width`
        prompt = job.prompts[i]
        input_ids[r, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        attention_mask[r, width - len(prompt) :] = 1
    inputs = {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device)}
    names = list(dict.fromkeys(name for name, _ in rows))
    with torch.inference_mode():
        if len(names) > 1:
            adapter_names = [PEFT_BASE if name == BASE_NAME else name for name, _ in rows]
            generated = model.generate(**inputs, generation_config=config, adapter_names=adapter_names)
        else:
            with _single_model_context(model, names[0]):
                generated = model.generate(**inputs, generation_config=config)
    return generated[:, width:].tolist()


def run(job: GenerationJob, progress: Progress | None = None, *, device: str | None = None) -> GeneratedIds:
    """Load the base and the job's adapters (`load_model`), then `generate`."""
    model = load_model(job.base_dir, dict(job.adapters), device=device, dtype=job.dtype)
    return generate(model, job, progress)
