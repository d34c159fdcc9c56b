"""TensorBoard event files (``events.out.tfevents.*``): their scalars, read with TensorBoard's own
`EventAccumulator`.

    scalars = read_scalars(path)      # {"train/reward": [(1, 0.25), (2, 0.5)], ...}

`tensorboard` is an extra (``pip install 'hubkit[trackers]'``) and costs 0.3 s to import: it is imported
only when a run has event files to read.
"""

from __future__ import annotations

from pathlib import Path

from hubkit.errors import FileFormatError

EVENT_FILE_PREFIX = "events.out.tfevents."


def is_event_file(path: Path) -> bool:
    """Whether `path` is named as TensorBoard names its event files."""
    return path.name.startswith(EVENT_FILE_PREFIX) and path.is_file()


def read_scalars(path: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar an event file holds, by tag, as (step, value) in logging order.

    Args:
        path: one event file.

    Returns:
        Tag → points; a file without scalars (or not an event file at all) gives an empty dict.

    Raises:
        FileFormatError: `tensorboard` is not installed.
    """
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError as e:
        raise FileFormatError(
            f"{path.name} is a TensorBoard event file: pip install 'hubkit[trackers]' to read its metrics"
        ) from e
    # size_guidance 0 keeps every scalar (the default keeps a sample of 10,000 per tag).
    accumulator = event_accumulator.EventAccumulator(str(path), size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()  # records it cannot read (a file cut short while written) are skipped
    return {
        tag: [(int(event.step), float(event.value)) for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags().get(event_accumulator.SCALARS, [])
    }
