"""Schemas of the retrieval settings (``conf/retrieval/``, read from ``RetrievalConfig``), of what
``kate kb action=build`` builds (``conf/kb/``, ``BuildSpec``) and of the embedder node. Fields are
unset (``???``) by default: what a YAML leaves out is not passed, the class's default applies."""

from __future__ import annotations

from kate.configs.targets import target_schema

RetrievalSchema = target_schema("RetrievalSchema", "kate.retrieval.config.RetrievalConfig", convert="all")

BuildSchema = target_schema("BuildSchema", "kate.knowledge.specs.BuildSpec", convert="all", helps={
    "name": "the base's folder name under root",
    "root": "the folder knowledge bases are written under",
    "source": "bfcl (BFCL's data) | jsonl (kate-trajectory/1 JSONL, kate/knowledge/trajectory.py)",
    "categories": "BFCL categories (source bfcl) or trajectory `source` names to keep (source jsonl; empty: all)",
    "split": "KATE's half to build from: train (even index) | test; jsonl: the trajectories' split (\"\": all)",
    "jsonl": "the trajectory JSONL file (source jsonl)",
    "types": "entry types built: ST | ES | SIC | TIC (ES, SIC, TIC are written by the `llm` model)",
    "llm_categories": "where ES / SIC / TIC are written; empty: all",
    "embedding_model": "the sentence embedder (a kate model name)",
    "index": "the faiss index: {kind: flat | hnsw | ivf, ...IndexSpec fields}",
    "result_chars": "each stored tool result is cut to this many characters",
    "es": "experience summaries: words, temperature, max_tokens, seed",
    "es_attempts": "a run folder of the policy model on these training dialogues: ES of the turns it got wrong "
                   "are written from its attempt; null: from the ground truth alone",
    "intents": "SIC / TIC: cluster {k_min, k_max, random_state, n_init}, label_questions, script_examples, "
               "temperature, seed",
    "cache_dir": "LLM answers by content hash: rebuilds and resumes ask only what changed",
    "limit": "entries per category (tests, smoke runs); null: all",
})  # fmt: skip

DistilledSchema = target_schema("DistilledSchema", "kate.knowledge.specs.DistilledSpec", convert="all", helps={
    "name": "the base's folder name under root",
    "root": "the folder knowledge bases are written under",
    "runs": "run folders (records.jsonl) of the policy model on training items, judged by BFCL's checkers",
    "categories": "BFCL categories whose training items the records are read against",
    "split": "KATE's half the records' items come from: train (even index)",
    "cases_per_entry": "judged cases one request to the writer shows (a group larger is cut into chunks)",
    "max_entries": "cap on writer requests (chunks, round-robin over the groups); null: all",
    "copied": "strip | reject: an entry carrying the cases' literal argument values",
    "max_stripped": "strip: an entry that copied more values than this is refused (it rewrote a case); null: never",
    "embed_examples": "case requests embedded after the title and when-line (embedded only, never shown)",
    "temperature": "the writer's sampling temperature",
    "max_tokens": "the writer's answer length",
    "seed": "the writer's seed",
    "max_words": "each field is cut to this many words (the title to 12)",
    "embedding_model": "the sentence embedder (a kate model name)",
    "index": "the faiss index: {kind: flat | hnsw | ivf, ...IndexSpec fields}",
    "cache_dir": "LLM answers by content hash: rebuilds ask only what changed",
    "limit": "training items per category (tests, smoke runs); null: all",
    "workers": "requests to the writer in flight together (a local engine batches them)",
})  # fmt: skip

EmbedderSchema = target_schema("EmbedderSchema", "kate.knowledge.embedder.Embedder", helps={
    "model": "the sentence embedder (a kate model name)",
    "device": "cpu | cuda",
    "batch_size": "texts per forward pass",
    "query_quantization": "none | int8 (a per-channel dynamic int8 copy embeds queries)",
    "query_max_seq_length": "query tokens kept; null: the model's limit",
    "threads": "torch threads while embedding; null: torch's default",
})  # fmt: skip

GROUPS = {"retrieval": {"retrieval": RetrievalSchema}, "kb": {"build": BuildSchema, "distilled": DistilledSchema}}
