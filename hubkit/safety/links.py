"""Symlinks in a run directory: followed only to a regular file, whose content is then vetted like any other.

A link may point anywhere a regular file lies (a tokenizer file linked from the Hugging Face cache is
common): what it points at is read as the kind its name says, so a private key linked as
``merges.txt`` is refused as not a merges file. A link to a device, a FIFO, a folder or a file of
/proc, /sys or /dev (``/proc/self/environ`` holds the environment, tokens included) is refused unread.
"""

from __future__ import annotations

import stat
from pathlib import Path

from hubkit.errors import UnsafeLinkError

# Files there describe the machine or the process (its environment, its memory), not a model.
PSEUDO_FILE_SYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))


def pseudo_file_system(path: Path) -> str | None:
    """The pseudo file system a resolved path lies in ("/proc"), or None."""
    return next((str(root) for root in PSEUDO_FILE_SYSTEMS if path.is_relative_to(root)), None)


def follow_to_regular(path: Path, label: str) -> Path:
    """The file to read for `path` (to be published): itself when it is not a symlink, else the regular file
    its symlinks end at.

    Raises:
        UnsafeLinkError: a dangling or looping symlink, or one to anything but a regular file outside
            /proc, /sys and /dev.
    """
    if not path.is_symlink():
        return path
    try:
        target = path.resolve(strict=True)
        info = target.stat()
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop
        raise UnsafeLinkError(
            f"refusing to publish {label}: it is a dangling symlink; replace it with the file itself"
        ) from e
    pseudo = pseudo_file_system(target)
    if pseudo is not None or not stat.S_ISREG(info.st_mode):
        where = f" under {pseudo}" if pseudo else ""
        raise UnsafeLinkError(
            f"refusing to publish {label}: it is a symlink to a non-regular file{where}; a symlink is followed "
            "only to a regular file: replace it with the file itself"
        )
    return target
