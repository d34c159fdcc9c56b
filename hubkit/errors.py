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


class RunNotStartedError(ManifestError):
    """A run directory without hubkit.json holds no checkpoint yet, or none whose adapter config is written
    yet, so its framework or base model cannot be told."""


class CheckpointError(HubkitError):
    """A checkpoint is incomplete, truncated, pickle-only or otherwise unusable."""


class WatchTimeoutError(HubkitError):
    """A watching push saw no new checkpoint within --watch-timeout."""


class QuantizedBaseError(HubkitError):
    """A release would name a quantized (4-bit) base where it needs the full-precision one."""


# --- Adapters -----------------------------------------------------------------------------------


class AdapterError(HubkitError):
    """An adapter would not load, or would load as a no-op (NaN, all-zero lora_B, lora_alpha 0, ...)."""


class BaseModelMismatchError(AdapterError):
    """An adapter's modules or shapes do not match the base model it names."""


# --- Merge --------------------------------------------------------------------------------------


class MergeError(HubkitError):
    """The base shards or the adapter cannot be merged (missing/corrupt shard, tied lm_head LoRA, ...)."""


# --- Hub, by condition (`hubkit.hub.failures.hub_errors` maps the client's failures to these) ---------


class HubError(HubkitError):
    """The Hub could not do what was asked; the subclass names the condition."""


class RepoNotFoundError(HubError):
    """A repo or its revision is not on the Hub (or is private to another account), or the id is no repo id."""


class AuthError(HubError):
    """No token, or the Hub refused it: access to a repo denied, a gated repo's terms not accepted."""


class HubUnreachableError(HubError):
    """The Hub cannot be reached, or kept failing after retries."""


class HubRefusedError(HubError):
    """The Hub answered a request with an error other than the conditions above."""


class StorageQuotaError(HubError):
    """The Hub refused to store more: the account's storage quota is full (403)."""


class PlanRequiredError(HubError):
    """The Hub refused what the account's plan does not include (402): a Gradio Space on a free account."""


class RateLimitedError(HubError):
    """The Hub's rate limit was reached (429) and its reset is further away than the push may wait.

    `until` is when the Hub said to try again (a UTC datetime), None when it said nothing; `refusal` the
    Hub's answer in words, for a caller that says more (the commits left)."""

    def __init__(self, message: str, until: object = None, refusal: str | None = None) -> None:
        super().__init__(message)
        self.until = until
        self.refusal = refusal or message


class PublishError(HubkitError):
    """A push cannot publish what it was asked to (the subclasses say why)."""


class RepoChangedError(HubError, PublishError):
    """A repo moved on the Hub while a push was writing it: nothing was committed."""


class ReleaseError(HubkitError):
    """A repo read back is not a release `hubkit push` published (no hubkit.json, a step it lacks)."""


class UnsafeFileError(PublishError):
    """A file a push would publish must not leave the machine; the subclasses below say why."""


class VerificationError(UnsafeFileError):
    """An artifact is not the model of the adapter it came from, loaded as users load it (`hubkit.verify`)."""


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


# --- File formats and what a push may publish -----------------------------------------------------


class FileFormatError(HubkitError):
    """A file is not of the format its name says (not JSON, nested too deep, not a tokenizer, ...)."""


class FileTooLargeError(FileFormatError):
    """A file is larger than its format's reader accepts; it was refused from its size, unread."""


class MalformedFileError(UnsafeFileError):
    """A file a push would publish is not of its kind's format, so it cannot be written out from what was read."""


class OversizedFileError(UnsafeFileError):
    """A file a push would publish is larger than its kind allows (a tokenizer over 50 MB, a config over 1 MB)."""


class SecretInFileError(UnsafeFileError):
    """A file a push would publish holds a token, an API key or a private key."""


class LocalPathInFileError(UnsafeFileError):
    """A file a push would publish holds an absolute path of this machine (a home, the run, a cache, a scratch disk)."""


class UnsafeLinkError(UnsafeFileError):
    """A file a push would publish is a symlink to something other than a regular file (a device, /proc, a folder)."""


class ForeignCheckpointsError(UnsafeFileError):
    """The checkpoints a push would publish lie outside the run directory, and the user did not name that place."""


class AmbiguousCheckpointError(UnsafeFileError):
    """Two checkpoint folders claim the same step (checkpoint-10 and checkpoint-0010): which one to publish is unclear."""


class TrainingArgsError(FileFormatError):
    """A checkpoint's training_args.bin cannot be read safely (a class it names is not a trainer's)."""


# --- GGUF export --------------------------------------------------------------------------------


class GGUFExportError(HubkitError):
    """A model cannot be written as GGUF: an architecture, tokenizer, tensor or type llama.cpp would misread."""
