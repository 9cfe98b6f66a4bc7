"""The tiers on disk (MemTier §3.1): every record shape, its validator, its fold and its durable write.

Everything more than one room reads lives here; a MemSidecar layer's own ledger
stays in ``layers/``. No config section of its own (``paths.*`` says where).

Modules by purpose:

* the bytes of one line: :mod:`.jsonl` (orjson dumps/loads, ``"v": 1``);
* ids and times: :mod:`.paths` (the one gate where an id becomes a file name, ISO stamps, new ids);
* writing files: :mod:`.files` (atomic replace, folder fsync), :mod:`.artifacts` (learned files);
* the episodic tier: :mod:`.records` (entry / cw_update / promoted shapes and the cognitive-weight
  fold), :mod:`.episodic` (the append-only ledger: durable append, fold on read, torn lines),
  :mod:`.tool_entries` (a tool outcome's text, ``name(args) -> outcome``);
* the semantic tier: :mod:`.semantic` (facts, revision links, the fact record);
* what memory delivered: :mod:`.traces` (trace, run_end, decision, foresight records);
* what maintenance spent: :mod:`.costs`;
* what the user told memory to forget: :mod:`.tombstones` (``forgotten.jsonl``, ids only).
* what a purge makes of each record: :mod:`.scrub` (the forgotten texts and their copies, the
  records about forgotten items, revision chains spliced around them).

Entry points: :class:`.episodic.Ledger`, :class:`.semantic.SemanticStore`, :func:`.traces.append`.
"""
