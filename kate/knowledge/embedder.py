"""Sentence embeddings (all-MiniLM-L6-v2 by default, offline), normalized float32.

Documents (knowledge entries) are embedded by the unmodified model. Queries may take a faster
path, each option a config value whose cost in agreement with the unmodified model is measured
(``bench/retrieval.py``): dynamic int8 quantization of the Linear layers (per-channel scales),
a shorter ``query_max_seq_length``, and ``threads`` (``torch.set_num_threads``: process-wide).
A knowledge base records the embedding model and its weights' sha256; loading it with another
model is an error.
"""

from __future__ import annotations

import copy
import hashlib
import os
import warnings
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from kate.llm.registry import MODELS, model_path, sha256_of

QUANTIZATIONS = ("none", "int8")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def resolve_embedding_model(model: str) -> tuple[Path, str]:
    """A kate model name (its folder, verified by its pinned sha256) or a local folder -> (path, sha256)."""
    if model in MODELS:
        spec = MODELS[model]
        if spec.kind != "folder":
            raise ValueError(f"{model!r} is not an embedding model folder")
        return model_path(model), spec.sha256
    folder = Path(model).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"embedding model {model!r} is neither a known kate model nor a local folder")
    for name in _WEIGHT_FILES:
        if (folder / name).is_file():
            return folder, sha256_of(folder / name)
    raise FileNotFoundError(f"{folder}: no {' or '.join(_WEIGHT_FILES)} to identify the model by")


class Embedder:
    """``embed(texts)`` for documents, ``embed_query(text)`` for one query; rows are unit vectors."""

    def __init__(
        self,
        model: str = "all-minilm-l6-v2",
        *,
        device: str = "cpu",
        batch_size: int = 64,
        query_quantization: str = "none",
        query_max_seq_length: int | None = None,
        threads: int | None = None,
    ) -> None:
        if query_quantization not in QUANTIZATIONS:
            raise ValueError(f"query_quantization must be one of {QUANTIZATIONS}, got {query_quantization!r}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        if threads:
            torch.set_num_threads(int(threads))
        self.model_name = model
        self.path, self.sha256 = resolve_embedding_model(model)
        self.device = device
        self.batch_size = batch_size
        self.query_quantization = query_quantization
        self.query_max_seq_length = query_max_seq_length
        self._st = SentenceTransformer(str(self.path), device=device, local_files_only=True)
        self.dim = int(self._st.get_embedding_dimension() if hasattr(self._st, "get_embedding_dimension")
                       else self._st.get_sentence_embedding_dimension())
        self.max_seq_length = int(self._st.max_seq_length)
        self._torch = torch

    # --------------------------------------------------------------------------- identity
    def identity(self) -> dict[str, Any]:
        """What a knowledge base records and checks: the model, its weights' hash, the vectors."""
        return {"model": self.model_name, "sha256": self.sha256, "dim": self.dim, "normalized": True}

    # --------------------------------------------------------------------------- documents
    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._st.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=show_progress)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    # --------------------------------------------------------------------------- queries
    @cached_property
    def _query_parts(self) -> tuple[Any, Any, str] | None:
        """(tokenizer, encoder, pooling) for the direct query path; None -> fall back to encode()."""
        modules = list(self._st)
        names = [type(m).__name__ for m in modules]
        if names[:2] != ["Transformer", "Pooling"] or any(n not in ("Normalize",) for n in names[2:]):
            return None
        pooling = modules[1]
        mode = getattr(pooling, "pooling_mode", None) or (
            "mean" if getattr(pooling, "pooling_mode_mean_tokens", False) else
            "cls" if getattr(pooling, "pooling_mode_cls_token", False) else None)
        if mode not in ("mean", "cls"):
            return None
        transformer = modules[0]
        encoder = getattr(transformer, "auto_model", None) or getattr(transformer, "model", None)
        tokenizer = getattr(transformer, "tokenizer", None)
        if encoder is None or tokenizer is None:
            return None
        encoder = encoder.eval()
        if self.query_quantization == "int8":
            from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                encoder = quantize_dynamic(copy.deepcopy(encoder), {self._torch.nn.Linear: per_channel_dynamic_qconfig},
                                           dtype=self._torch.qint8)
        return tokenizer, encoder, mode

    def embed_query(self, text: str) -> np.ndarray:
        """One query -> a (1, dim) float32 unit row, through the configured fast path."""
        return self.embed_queries([text])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        parts = self._query_parts
        if parts is None:
            if self.query_quantization != "none":
                raise ValueError(f"{self.model_name}: query_quantization needs a Transformer+Pooling model")
            return self.embed(texts)
        tokenizer, encoder, mode = parts
        torch = self._torch
        max_length = min(self.query_max_seq_length or self.max_seq_length, self.max_seq_length)
        with torch.inference_mode():
            batch = tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True, max_length=max_length)
            batch = {k: v.to(self.device) for k, v in batch.items()}
            hidden = encoder(**batch).last_hidden_state
            if mode == "cls":
                pooled = hidden[:, 0]
            else:
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled.float(), dim=-1)
        return np.ascontiguousarray(pooled.cpu().numpy(), dtype=np.float32)


def text_sha256(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()
