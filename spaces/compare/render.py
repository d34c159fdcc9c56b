"""A request's prompt rendered with the chat template, bounded: the template is the release's, and one that
loops, or builds a huge string, only for some prompt would otherwise hold the app's one queue for good.

The template renders in a child forked for the request (the tokenizer is already in its memory), under
an address-space limit above what it inherits, and the app reads at most `RENDER_MAX_BYTES` of its output
for at most `RENDER_SECONDS`; past either the child is killed and that request answers with an error.

    text = render_bounded(tokenizer, [{"role": "user", "content": prompt}])
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import time

# A prompt renders in milliseconds, to a few KB.
RENDER_SECONDS = 5.0
RENDER_MAX_BYTES = 1 << 20
RENDER_MEMORY_BYTES = 1 << 30  # address space the child may add to what it inherits


class RequestError(Exception):
    """A request the app refuses or cannot serve; the message is for the user."""


def _address_space() -> int:
    """This process's virtual memory size in bytes (Linux; 0 elsewhere: no limit is then set)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _render_child(tokenizer: object, messages: list[dict[str, str]], out: int) -> None:
    """In the forked child: render, write at most one byte past `RENDER_MAX_BYTES`, and exit."""
    code = 1
    try:
        if size := _address_space():
            limit = size + RENDER_MEMORY_BYTES
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        with os.fdopen(out, "wb") as pipe:
            pipe.write(text.encode("utf-8", "surrogatepass")[: RENDER_MAX_BYTES + 1])
        code = 0
    except BaseException:  # a MemoryError, the template's own error: the parent says it could not render
        pass
    finally:
        os._exit(code)


def render_bounded(tokenizer: object, messages: list[dict[str, str]]) -> str:
    """The prompt as `tokenizer`'s chat template renders `messages` (with the generation prompt).

    Raises:
        RequestError: the template did not render within `RENDER_SECONDS`, rendered more than
            `RENDER_MAX_BYTES`, or failed (its own error, or past the memory limit).
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _render_child(tokenizer, messages, write_end)
    os.close(write_end)
    chunks: list[bytes] = []
    size, ended, deadline = 0, False, time.monotonic() + RENDER_SECONDS
    with os.fdopen(read_end, "rb", buffering=0) as pipe, selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while not ended and size <= RENDER_MAX_BYTES and (left := deadline - time.monotonic()) > 0:
            if selector.select(left):
                chunk = pipe.read(1 << 16)
                ended = not chunk
                chunks.append(chunk)
                size += len(chunk)
    if not ended:  # still rendering at the deadline, or past the size: it is stopped
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)  # the child exits once its output is closed
    if size > RENDER_MAX_BYTES:
        raise RequestError("The chat template makes this prompt longer than this Space accepts.")
    if not ended:
        raise RequestError(f"The chat template did not render this prompt within {RENDER_SECONDS:g} s.")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RequestError("The chat template could not render this prompt.")
    return b"".join(chunks).decode("utf-8", "replace")
