"""Retrieval: top-K knowledge entries above a similarity threshold, filtered; intent retrieval;
injection templates; the policy's knowledge (``kate.retrieval.knowledge``).

The names below load on first use (PEP 562): a config schema that imports ``kate.retrieval.config``
does not load the retriever, faiss or the embedder."""

from __future__ import annotations

from kate.lazy import lazy_names

_WHERE = {
    "RetrievalConfig": "config", "GUARDED": "inject", "KATE": "inject", "Template": "inject",
    "render_knowledge": "inject", "template_from": "inject", "IntentConfig": "intent", "IntentRetriever": "intent",
    "infer_intent": "intent", "KnowledgeByKind": "knowledge", "RetrievalKnowledge": "knowledge",
    "make_knowledge": "knowledge", "retrieval_knowledge": "knowledge", "Hit": "retriever", "Retriever": "retriever",
}  # fmt: skip
__all__ = sorted(_WHERE)
__getattr__ = lazy_names(__name__, _WHERE)
