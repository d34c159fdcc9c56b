"""Every error a user can cause, in one place.

The CLI prints these as one line and exits with status 1 (`HUBKIT_DEBUG=1` shows the traceback).
Anything else is a bug and keeps its traceback. Each message says what to do next.
"""


class HubkitError(Exception):
    """Base class of errors caused by input, configuration or the remote side, not by a bug."""


# --- Runs and manifests -------------------------------------------------------------------------


class RunNotFoundError(HubkitError):
    """No run directory for the given run id or path."""


class ManifestError(HubkitError):
    """hubkit.json is missing a field, has a wrong type, or a newer schema than this hubkit."""


class CheckpointError(HubkitError):
    """A checkpoint is incomplete, truncated, pickle-only or otherwise unusable."""


# --- Adapters -----------------------------------------------------------------------------------


class AdapterError(HubkitError):
    """An adapter would not load, or would load as a no-op (NaN, all-zero lora_B, lora_alpha 0, ...)."""


class BaseModelMismatchError(AdapterError):
    """An adapter's modules or shapes do not match the base model it names."""


# --- Merge --------------------------------------------------------------------------------------


class MergeError(HubkitError):
    """The base shards or the adapter cannot be merged (missing/corrupt shard, tied lm_head LoRA, ...)."""


# --- Hub ----------------------------------------------------------------------------------------


class AuthError(HubkitError):
    """No token, or the Hub refused the token."""


class PublishError(HubkitError):
    """The Hub refused a repo operation, or the remote moved while pushing."""


class UnsafeFileError(PublishError):
    """A planned file is never publishable (optimizer/RNG state, pickles) or holds a secret or local path."""


class LocalHubError(HubkitError):
    """The local Hub cannot start as asked: no credentials on a shared address, a root in use, a bad users file."""


# --- Rewards ------------------------------------------------------------------------------------


class RewardSpecError(HubkitError):
    """A reward spec names an unknown component or has invalid parameters."""


# --- Evaluation ---------------------------------------------------------------------------------


class EvalError(HubkitError):
    """An evaluation cannot run as asked: no problems, an unknown metric, unreadable or newer results."""


class ContaminationError(EvalError):
    """The evaluation problems overlap the problems the run was trained on."""


# --- Space --------------------------------------------------------------------------------------


class SpaceError(HubkitError):
    """The Space cannot be written or served: a package it pins is missing, a repo without hubkit.json."""


# --- GGUF export --------------------------------------------------------------------------------


class GGUFExportError(HubkitError):
    """A model cannot be written as GGUF: an architecture, tokenizer, tensor or type llama.cpp would misread."""
