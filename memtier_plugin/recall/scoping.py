"""Stage 1 of two-stage retrieval (MemTier §3.2): the project's current facts pick the sessions stage 2 scores.

BM25 runs over the semantic index; the visible facts that match (current, of
the project) are taken best first, and the sessions their provenance names
(``session_ids``) become stage 2's scope, up to ``retrieval.stage1_sessions``
of them. With ``retrieval.scoping: hard`` stage 2 scores only those sessions'
episodic entries plus the current session's (:func:`session_scope`); with
``soft`` every visible entry competes and the stage-1 sessions only skip decay.
The matching facts themselves compete in stage 2 too. Which entries an agent
may see is the retriever's rule, passed in as ``visible``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .index import DocIndex


@dataclass
class Stage1:
    """Stage 1's answer: episodic session codes (best fact first) and the matching facts (best first)."""

    sessions: list[int] = field(default_factory=list)
    fact_docs: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    fact_raw: np.ndarray = field(default_factory=lambda: np.empty(0))  # raw BM25, all > 0


def stage1(semantic: DocIndex, episodic: DocIndex, q: list[str], visible: Callable[[np.ndarray], np.ndarray],
           max_sessions: int) -> Stage1:
    """BM25 of the tokenised query ``q`` over the facts ``visible`` keeps → :class:`Stage1`.

    Sessions are episodic session codes in the order the best facts name them;
    a session with no episodic entry (yet) is skipped.
    """
    if semantic.n == 0 or not q:
        return Stage1()
    docs, raw = semantic.bm25.score(q)
    keep = visible(docs) & (raw > 0)
    docs, raw = docs[keep], raw[keep]
    order = np.lexsort((docs, -raw))
    docs, raw = docs[order], raw[order]
    sessions: list[int] = []
    for d in docs.tolist():
        for s in semantic.fact_sessions.get(d, []):
            code = episodic.sessions.code.get(semantic.sessions.names[s])
            if code is not None and code not in sessions:
                sessions.append(code)
        if len(sessions) >= max_sessions:
            break
    return Stage1(sessions[:max_sessions], docs, raw)


def session_scope(episodic: DocIndex, sessions: list[int], session_id: str) -> np.ndarray:
    """Hard scoping: the episodic docs of ``sessions`` and of the current session, ascending."""
    cur = episodic.sessions.code.get(session_id)
    codes = set(sessions) | ({cur} if cur is not None else set())
    return np.array(sorted(d for c in codes for d in episodic.session_docs.get(c, [])), dtype=np.int64)
