"""Retrieval: top-K knowledge entries above a similarity threshold, filtered; intent retrieval;
injection templates; the policy's knowledge (``kate.retrieval.knowledge``)."""

from kate.retrieval.config import RetrievalConfig
from kate.retrieval.inject import GUARDED, KATE, Template, render_knowledge, template_from
from kate.retrieval.intent import IntentConfig, IntentRetriever, infer_intent
from kate.retrieval.knowledge import KnowledgeByKind, RetrievalKnowledge, make_knowledge, retrieval_knowledge
from kate.retrieval.retriever import Hit, Retriever

__all__ = [
    "GUARDED", "KATE", "Hit", "IntentConfig", "IntentRetriever", "KnowledgeByKind", "RetrievalConfig",
    "RetrievalKnowledge", "Retriever", "Template", "infer_intent", "make_knowledge", "render_knowledge",
    "retrieval_knowledge", "template_from",
]  # fmt: skip
