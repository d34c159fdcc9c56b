"""The card's training configuration table: every setting the run recorded, each with the file it was
read from, so a reader knows what the training script wrote down (``hubkit.json``) and what hubkit read
off the trainer's and PEFT's own files (``training_args.bin``, ``trainer_state.json``,
``adapter_config.json``)."""

from __future__ import annotations

from hubkit.cards import text
from hubkit.cards.sections import framework_name, wall_time
from hubkit.cards.vocabulary import resized_vocabulary
from hubkit.formats.peft import read_saved_adapter_config
from hubkit.runs.algorithm import run_algorithm
from hubkit.runs.manifest import MANIFEST_NAME
from hubkit.runs.model import Run

ADAPTER_CONFIG = "adapter_config.json"
SOURCES_NOTE = (
    "The last column says where each value was read: `hubkit.json` is what the training script recorded; "
    "`training_args.bin` and `trainer_state.json` are what the trainer saved beside each checkpoint, and "
    "`adapter_config.json` is PEFT's."
)


def configuration_rows(run: Run) -> tuple[tuple[str, str, str], ...]:
    """Framework, algorithm, base model, every hyperparameter, LoRA, QLoRA, hardware and times, each as
    (setting, value, where it was read), cell-safe."""
    manifest, trained = run.manifest, run_algorithm(run)
    own = MANIFEST_NAME if run.manifest_recorded else None
    rows: list[tuple[str, str, str]] = [
        ("framework", framework_name(manifest), own or "the checkpoint folders"),
        ("algorithm", trained.name or "not recorded", trained.source),
        ("base model", manifest.base_model, run.base_model_source),
    ]
    quantized = run.quantized_base
    if quantized is not None:
        rows.append(("trained as", f"QLoRA (4-bit base {quantized.trained_on})", own or ADAPTER_CONFIG))
    if manifest.base_model_revision:
        rows.append(("base model revision", manifest.base_model_revision, MANIFEST_NAME))
    rows += [
        (text.code(name), text.setting(value), MANIFEST_NAME)
        for name, value in manifest.hyperparameters.items()
    ]
    settings = run.trainer_settings
    if settings is not None:
        rows += [
            (text.code(name), text.setting(value), settings.source) for name, value in settings.values.items()
        ]
    lora = manifest.lora
    if lora is not None:
        source = own or ADAPTER_CONFIG
        rows += [
            ("LoRA rank r", str(lora.r), source),
            ("LoRA alpha", text.setting(lora.alpha), source),
            ("LoRA target modules", ", ".join(lora.target_modules) or text.MISSING, source),
            ("LoRA dropout", text.setting(lora.dropout), source),
            ("rsLoRA", text.setting(lora.use_rslora), source),
        ]
    rows += _lora_layout_rows(run)
    hardware = manifest.hardware
    if hardware is not None:
        nodes = "node" if hardware.nodes == 1 else "nodes"
        rows.append(
            (
                "hardware",
                f"{hardware.count} × {hardware.accelerator}, {hardware.nodes} {nodes}",
                MANIFEST_NAME,
            )
        )
    if manifest.started_at:
        rows.append(("started", manifest.started_at, MANIFEST_NAME))
    if manifest.finished_at:
        rows.append(("finished", manifest.finished_at, MANIFEST_NAME))
    elapsed = wall_time(manifest)
    if elapsed:
        rows.append(("wall time", elapsed, MANIFEST_NAME))
    return tuple((name, text.cell(value), _source(source)) for name, value, source in rows)


# adapter_config.json settings that change which weights are adapted, or how, from the plain LoRA the rank,
# alpha and targets describe; shown when set (PEFT's defaults are empty or false).
_LORA_LAYOUT = (
    ("rank_pattern", "LoRA rank by module"),
    ("alpha_pattern", "LoRA alpha by module"),
    ("layers_to_transform", "LoRA on layers"),
    ("layers_pattern", "LoRA layers pattern"),
    ("use_dora", "DoRA"),
    ("modules_to_save", "trained in full"),
)
_MAX_SHOWN = 32  # entries of a pattern or a layer list shown in one cell


def _shown(value: object) -> str:
    """A pattern (module → number), a list or a flag as one cell's words, every name as literal text."""
    if isinstance(value, dict):
        items = [f"{text.literal(k)}: {text.setting(v)}" for k, v in list(value.items())[:_MAX_SHOWN]]
        more = len(value) - len(items)
    elif isinstance(value, list):
        items = [text.literal(v) for v in value[:_MAX_SHOWN]]
        more = len(value) - len(items)
    else:
        return text.setting(value)
    return ", ".join(items) + (f" (and {more} more)" if more > 0 else "")


def _lora_layout_rows(run: Run) -> list[tuple[str, str, str]]:
    """The newest adapter's per-module ranks and alphas, adapted layers, DoRA and fully trained modules,
    where its config sets them."""
    latest = run.latest
    config = read_saved_adapter_config(latest.adapter_dir) if latest and latest.adapter_dir else None
    if config is None:
        return []
    rows = []
    resized = resized_vocabulary(run)
    if resized is not None:
        rows.append(("vocabulary", resized.sentence, "adapter_model.safetensors"))
    for key, label in _LORA_LAYOUT:
        value = config.get(key)
        if value not in (None, False, [], {}, "") and isinstance(value, dict | list | bool | int | str):
            rows.append((label, _shown(value), ADAPTER_CONFIG))
    return rows


def _source(source: str) -> str:
    """A file name or an option as code, anything else as words."""
    return text.code(source) if source.endswith((".json", ".bin")) or source.startswith("--") else source
