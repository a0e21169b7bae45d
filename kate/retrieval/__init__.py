"""Retrieval: top-K knowledge entries above a similarity threshold, filtered; intent retrieval;
injection templates; the agent loop's ``retrieve`` hook."""

from kate.retrieval.config import RetrievalConfig
from kate.retrieval.hook import RetrieveHook, bfcl_retrieve_factory, make_retrieve_hook
from kate.retrieval.inject import GUARDED, KATE, Template, render_knowledge, template_from
from kate.retrieval.intent import IntentConfig, IntentRetriever, infer_intent
from kate.retrieval.retriever import Hit, Retriever

__all__ = [
    "GUARDED", "KATE", "Hit", "IntentConfig", "IntentRetriever", "RetrievalConfig", "RetrieveHook", "Retriever",
    "Template", "bfcl_retrieve_factory", "infer_intent", "make_retrieve_hook", "render_knowledge", "template_from",
]
