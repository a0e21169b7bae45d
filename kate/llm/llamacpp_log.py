"""llama.cpp's log, as llama-cpp-python prints it, less one line kate makes untrue.

With ``kv_cells`` above a model's trained window, llama.cpp warns at every load that the context
(the unified cache, which every sequence may address) exceeds it: "n_ctx_seq (65536) > n_ctx_train
(32768) -- possible training context overflow". kate's client refuses any one request beyond
``n_ctx`` (at most the trained window in the shipped configs), so no sequence overflows; the line is
dropped and every other line goes to llama-cpp-python's own callback unchanged.
"""

from __future__ import annotations

import ctypes

_installed: list[object] = []  # the ctypes callback must outlive every call llama.cpp makes to it


def quiet_cache_warning() -> None:
    """Install the filter once (idempotent)."""
    if _installed:
        return
    import llama_cpp
    from llama_cpp import _logger

    def callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if b"n_ctx_seq" in text and b"n_ctx_train" in text:
            return
        _logger.llama_log_callback(level, text, user_data)

    wrapped = llama_cpp.llama_log_callback(callback)
    llama_cpp.llama_log_set(wrapped, ctypes.c_void_p(0))
    _installed.append(wrapped)
