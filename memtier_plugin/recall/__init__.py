"""What memory goes into this prompt (MemTier §3.2): five-signal fusion with two-stage semantic→episodic scoping.

Config sections: ``retrieval.*``, ``weights.*``, ``bm25.*``, ``packing.*``, ``embeddings.*`` (the choice),
``rerank.*``, ``calibration.*``.

Modules by purpose:

* lexical: :mod:`.bm25` (incremental Okapi BM25 on numpy);
* the derived index: :mod:`.index` (the documents and their columns, tailing a ledger file),
  :mod:`.index_files` (saved generations behind ``CURRENT``, opening and catching up),
  :mod:`.watch` (what the ledgers gained, cheaply, on every recall);
* scoring: :mod:`.signals` (the five signals as pure functions, one explainable fusion, eq. 1),
  :mod:`.scoping` (stage 1: the project's current facts pick the sessions stage 2 scores);
* dense and re-ranked: :mod:`.vector_cache` (on-disk vectors per embedder), :mod:`.dense` (the
  documents' vectors in memory, appended without copying), :mod:`.rerank`
  (the cross-encoder's order of the head, by reciprocal-rank fusion), :mod:`.head_scoring` (its logits for the
  pairs the time budget allows, cached), :mod:`.backends` (embedder, re-ranker and weights
  from one config, and the learned weights file);
* one scale: :mod:`.calibration` (every layer's candidates as the probability that they apply, per-layer
  logistic models read from a calibration file, and the delivery thresholds);
* the answer: :mod:`.retriever` (open, refresh, rank, recall), :mod:`.exchange` (an episode with the
  other half of its exchange: a prompt its reply, a reply its prompt), :mod:`.same_message` (the standing
  items of one message that apply, delivered as one), :mod:`.packing` (top k within the token budget, one
  fenced block).

Entry points: :class:`.retriever.Retriever`, :func:`.packing.pack`.
"""
