"""The k-quant GGUF types (Q4_K_M, Q5_K_M, Q6_K, ...), made by llama.cpp's own quantizer from hubkit's BF16
file, in this process, through llama-cpp-python's binding of ``llama_model_quantize`` (what llama.cpp's
``llama-quantize`` runs): each tensor gets the type llama.cpp's rules give it for the asked type (its
per-tensor mixture, e.g. Q6_K for about half the layers' attn_v and ffn_down in Q4_K_M), and a tensor
whose rows do not split into the type's blocks gets llama.cpp's own fallback type.

llama-cpp-python is an optional extra (`pip install 'hubkit[gguf-quant]'`): `require_quantizer` refuses in
one line before anything is written or created. The quantizer reads the source file one tensor at a time
(memory-mapped) and writes each as it is done.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
from pathlib import Path

from hubkit.errors import GGUFExportError
from hubkit.formats.gguf_types import QUANTIZER_MISSING, GGUFType
from hubkit.hub.hashing import hash_file


def require_quantizer() -> None:
    """Refuse in one line when llama-cpp-python, whose quantizer makes the k-quants, is not installed.

    Raises:
        GGUFExportError: naming the extra that installs it.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise GGUFExportError(QUANTIZER_MISSING)


def quantize(source: Path, out: Path, gguf_type: GGUFType) -> tuple[int, str]:
    """Quantize the GGUF file `source` (BF16 or F16) to `out` as llama.cpp's `gguf_type`.

    The file is written as ``<out>.partial`` and renamed once complete; on failure it is removed.

    Returns:
        The written file's size and sha256.

    Raises:
        GGUFExportError: the quantizer is not installed, or llama.cpp refused the file.
    """
    require_quantizer()
    assert gguf_type.llama_ftype is not None
    import llama_cpp

    # llama.cpp's log goes through this logger; its per-tensor lines are not the user's business.
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, gguf_type.llama_ftype)
    partial = out.with_name(out.name + ".partial")
    try:
        failed = llama_cpp.llama_model_quantize(
            str(source).encode(), str(partial).encode(), ctypes.byref(params)
        )
        if failed:
            raise GGUFExportError(f"llama.cpp could not quantize {source.name} to {gguf_type.name}")
        hashes = hash_file(partial, git_sha1=False)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return hashes.size, hashes.sha256
