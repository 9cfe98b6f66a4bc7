"""LongMemEval as a reward source for the weight trainer (``memtier train --longmemeval``).

MemTier eq. 2 with the retrieval evidence as the task: every question's
haystack is written once through the ledger (:mod:`.runner`) and ranked with
the sampled w; reward +1 when every gold session is among the top 5 ranked
sessions (session recall_all@5 of the official protocol), −1 otherwise. It
gives ``reward(w, i)`` like :func:`memtier_plugin.learning.rewards.trace_reward`.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np


class _MemoEmbedder:
    """Wraps an embedder so a repeated query is embedded once (same name: same vector cache)."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._memo: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        if len(texts) == 1:
            t = texts[0]
            if t not in self._memo:
                self._memo[t] = np.asarray(self.inner.embed([t]))[0]
            return self._memo[t][None, :]
        return self.inner.embed(texts)


class _MemoReranker:
    """Wraps a re-ranker so each (query, text) pair is scored once: every sampled weight vector
    re-ranks the same question's head again, and most of it is the same entries."""

    def __init__(self, inner):
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self._memo: dict[tuple[str, str], float] = {}

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if (query, t) not in self._memo]
        if new:
            for t, logit in zip(new, np.asarray(self.inner.score(query, new), dtype=np.float64).tolist()):
                self._memo[(query, t)] = logit
        return np.array([self._memo[(query, t)] for t in texts], dtype=np.float64)


@dataclass
class _Built:
    question: object
    retriever: object
    now: float
    gold: set[str]
    official: dict[str, str]  # raw session id -> official id


class LongMemEvalEnv:
    """Every question's workspace built once; rewards and recall with any weight vector.

    ``backends`` (:func:`memtier_plugin.recall.backends.choose` of the user's config) gives the embedder and
    re-ranker every question shares; ``config_path`` and ``flags`` give each question's
    workspace the user's retrieval settings, as ``memtier eval`` does.
    """

    PROJECT = "longmemeval"

    def __init__(self, questions: list, *, backends=None, config_path: str | None = None,
                 flags: dict | None = None, cache_dir: Path | None = None, workdir: Path | None = None,
                 progress: Callable[[int, int], None] | None = None):
        from dataclasses import replace

        from .longmemeval import corpus
        from .runner import Options, _ts, open_retriever, question_sessions, write_sessions

        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="memtier-train-"))
        emb = ce = None
        if backends is not None:
            emb = _MemoEmbedder(backends.embedder) if backends.embedder is not None else None
            ce = _MemoReranker(backends.reranker) if backends.reranker is not None else None
            backends = replace(backends, embedder=emb, reranker=ce)
        cache = Path(cache_dir) if cache_dir else self.workdir / "vectors"
        self.opts = Options(flags=dict(flags or {}), config_path=config_path, backends=backends,
                            vector_cache=cache if emb is not None else None)
        self.items: list[_Built] = []
        for n, q in enumerate(questions):
            root = self.workdir / "ws" / q.question_id / "memory"
            shutil.rmtree(root.parent, ignore_errors=True)
            write_sessions(root, question_sessions(q), self.PROJECT, self.opts)
            retriever = open_retriever(root, self.opts)
            if emb is not None:  # embed the haystack now, not inside the first sampled episode
                retriever.vectors(retriever.episodic)
                retriever.vectors(retriever.semantic)
            docs = corpus(q, "session")
            self.items.append(_Built(q, retriever, _ts(q.question_date), {d.id for d in docs if "answer" in d.id},
                                     {d.raw_id: d.id for d in docs}))
            if progress:
                progress(n + 1, len(questions))

    def __len__(self) -> int:
        return len(self.items)

    def ranked_sessions(self, w, i: int, k: int = 5) -> list[str]:
        """The first ``k`` distinct sessions (official ids) of question i's ranking with weights w."""
        from .runner import doc_sessions

        b = self.items[i]
        ranked = b.retriever.rank(b.question.question, agents=None, project=self.PROJECT, now=b.now,
                                  depth=self.opts.depth, weights=[float(x) for x in w])
        out: list[str] = []
        for idx, doc in ranked.docs:
            for s in doc_sessions(idx, doc):
                s = b.official.get(s, s)
                if s not in out:
                    out.append(s)
                    if len(out) == k:
                        return out
        return out

    def hit(self, w, i: int) -> bool:
        """Session recall_all@5: every gold session in the top 5."""
        b = self.items[i]
        return bool(b.gold) and b.gold <= set(self.ranked_sessions(w, i, 5))

    def reward(self, w, i: int) -> float:
        return 1.0 if self.hit(w, i) else -1.0

    def recall_all_at_5(self, w, indices) -> float:
        indices = list(indices)
        return float(np.mean([self.hit(w, i) for i in indices])) if indices else float("nan")

    def close(self) -> None:
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            shutil.rmtree(self.workdir / "ws", ignore_errors=True)
