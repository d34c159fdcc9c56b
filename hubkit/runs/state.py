"""What hubkit keeps in a run directory about the run, under ``.hubkit/`` (never published), and the one
way such a file is written.

    .hubkit/adapters/      each saved adapter's passing check (`hubkit.adapters.weights_read.VerdictCache`)
    .hubkit/base-checks/   adapter files that passed the check against a base config
    .hubkit/base-shapes/   a base config's Linear shapes (built by transformers when not read off it)
    .hubkit/pushes/        the last push to each repo (`hubkit.publish.push_record`)
    .hubkit/training-args/ the settings read from a checkpoint's training_args.bin, by file version
    .hubkit/vetted/        files that passed vetting, by content (`hubkit.safety.verdicts`)

Every file there is a cache or a record: losing one costs a re-read, never a wrong push. A run directory
that cannot be written keeps nothing, and the push goes on.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

STATE_DIR = Path(".hubkit")
ADAPTER_VERDICTS_DIR = STATE_DIR / "adapters"
BASE_CHECKS_DIR = STATE_DIR / "base-checks"
BASE_SHAPES_DIR = STATE_DIR / "base-shapes"
CHARTS_DIR = STATE_DIR / "charts"
PUSH_RECORDS_DIR = STATE_DIR / "pushes"
TRAINING_ARGS_DIR = STATE_DIR / "training-args"
VETTED_DIR = STATE_DIR / "vetted"


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write `path` so that a reader sees the old file or the new one, never a part of it.

    The bytes go to a file beside it named for this process and thread, which then replaces `path`.

    Raises:
        OSError: the folder cannot be made or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def keep(path: Path, data: str | bytes, what: str) -> bool:
    """`write_atomically` of a file under a run's ``.hubkit/``, for a cache: whether it was written; a failure
    is logged (at debug level, naming `what` it remembers: "an adapter's checks") and the caller goes on."""
    try:
        write_atomically(path, data)
        return True
    except OSError as e:
        logger.debug("could not remember %s in the run directory (%s)", what, e.strerror)
        return False
