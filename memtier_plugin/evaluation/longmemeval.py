"""LongMemEval loader, the official retrieval protocol, and a runner.

Protocol (xiaowu0162/LongMemEval ``src/retrieval/run_retrieval.py``):

- a session document is its user turns joined by a space; a turn document is
  one user turn with id ``<session_id>_<turn_number>``, the number 1-based over
  *all* turns of the session (assistant turns included);
- gold = corpus ids containing ``"answer"``; an answer session none of whose
  user turns has ``has_answer`` is renamed ``noans`` (so it is not gold), and so
  is every user turn of an answer session without ``has_answer``;
- metrics at k in 1, 3, 5, 10, 30, 50 (see :mod:`.metrics`);
- averaging "strict" skips ``_abs`` questions and questions with no gold user
  turn; "noabs" skips ``_abs`` questions only (the upstream runner's mean).

A ranking function ``rank_fn(question) -> (ranked_session_ids, ranked_turn_ids)``
returns *raw* ids (``session_id`` and ``session_id_<n>``; either list may be
``None`` to skip that level); :func:`score_question` maps them to the official
(``noans``-renamed) ids itself, so a retriever never needs to know the protocol.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import EvalDataError
from .metrics import KS, evaluate_retrieval, evaluate_retrieval_turn2session

log = logging.getLogger(__name__)

LEVELS = ("session", "turn", "turn_as_session")
METRICS = ("recall_any", "recall_all", "ndcg_any")
AVERAGINGS = ("strict", "noabs")

RankFn = Callable[["Question"], tuple[Sequence[str] | None, Sequence[str] | None]]


class Session(NamedTuple):
    session_id: str
    date: str
    turns: list[dict[str, Any]]  # {"role", "content", "has_answer"?} as in the data


class Doc(NamedTuple):
    id: str  # official id (``noans``-renamed when not gold)
    raw_id: str  # ``session_id`` or ``session_id_<n>``
    session_id: str
    date: str
    text: str


@dataclass
class Question:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    sessions: list[Session] = field(default_factory=list)
    answer_session_ids: list[str] = field(default_factory=list)

    @property
    def is_abstention(self) -> bool:
        return is_abstention(self)


def _open_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.exists():
        raise EvalDataError(f"{path}: no such file (pass the LongMemEval .json/.json.gz path)")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise EvalDataError(f"{path}: not a JSON file: {exc}") from exc


def from_dict(item: dict[str, Any]) -> Question:
    """One question in the official format -> :class:`Question`."""
    try:
        sessions = [
            Session(str(sid), str(date), list(turns))
            for sid, date, turns in zip(
                item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
            )
        ]
        return Question(
            question_id=str(item["question_id"]),
            question_type=str(item["question_type"]),
            question=str(item["question"]),
            answer=str(item["answer"]),
            question_date=str(item.get("question_date", "")),
            sessions=sessions,
            answer_session_ids=[str(s) for s in item.get("answer_session_ids", [])],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise EvalDataError(f"question {item.get('question_id')!r}: malformed: {exc}") from exc


def load(path: str | Path) -> list[Question]:
    """Load a LongMemEval file (``.json`` or ``.json.gz``)."""
    data = _open_json(path)
    if not isinstance(data, list):
        raise EvalDataError(f"{path}: expected a JSON list of questions")
    return [from_dict(item) for item in data]


def is_abstention(question: Question) -> bool:
    return "_abs" in question.question_id


def _user_turns(session: Session) -> list[tuple[int, dict[str, Any]]]:
    """(1-based turn number over all turns, turn) for the user turns."""
    return [(i + 1, t) for i, t in enumerate(session.turns) if t.get("role") == "user"]


def corpus(question: Question, level: str) -> list[Doc]:
    """The official retrieval corpus of one question at ``"session"`` or ``"turn"`` level."""
    docs: list[Doc] = []
    for s in question.sessions:
        users = _user_turns(s)
        is_answer = "answer" in s.session_id
        if level == "session":
            text = " ".join(t.get("content", "") for _, t in users)
            doc_id = s.session_id
            if is_answer and not any(t.get("has_answer") for _, t in users):
                doc_id = s.session_id.replace("answer", "noans")
            docs.append(Doc(doc_id, s.session_id, s.session_id, s.date, text))
        elif level == "turn":
            for n, t in users:
                raw = f"{s.session_id}_{n}"
                doc_id = raw if (not is_answer or t.get("has_answer")) else raw.replace("answer", "noans")
                docs.append(Doc(doc_id, raw, s.session_id, s.date, t.get("content", "")))
        else:
            raise ValueError(f"level must be 'session' or 'turn', not {level!r}")
    return docs


def gold_ids(question: Question, level: str) -> set[str]:
    """Official gold ids: corpus ids that still contain ``"answer"`` after renaming."""
    return {d.id for d in corpus(question, level) if "answer" in d.id}


def has_gold(question: Question) -> bool:
    """True when some user turn of an answer session is marked ``has_answer``."""
    return bool(gold_ids(question, "turn"))


def included(question: Question, averaging: str) -> bool:
    """Whether a question counts under ``"strict"`` or ``"noabs"`` averaging."""
    if averaging == "strict":
        return not is_abstention(question) and has_gold(question)
    if averaging == "noabs":
        return not is_abstention(question)
    raise ValueError(f"averaging must be one of {AVERAGINGS}, not {averaging!r}")


def _to_official(ranked: Iterable[str], docs: list[Doc]) -> list[str]:
    mapping = {d.raw_id: d.id for d in docs}
    return [mapping.get(i, i) for i in ranked]


def _level_metrics(fn, ranked, gold, corpus_ids, ks) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in ks:
        r_any, r_all, nd = fn(ranked, gold, k, corpus_ids)
        out[f"recall_any@{k}"] = r_any
        out[f"recall_all@{k}"] = r_all
        out[f"ndcg_any@{k}"] = nd
    return out


def score_question(
    ranked_session_ids: Sequence[str] | None,
    ranked_turn_ids: Sequence[str] | None,
    question: Question,
    ks: Sequence[int] = KS,
) -> dict[str, Any]:
    """Per-question metrics. Rankings hold raw (or already official) ids.

    Returns ``{"question_id", "question_type", "abstention", "has_gold",
    "session": {...}, "turn": {...}, "turn_as_session": {...}}``; a level is
    absent when its ranking is ``None``. ``turn_as_session`` is the turn ranking
    scored at session level (upstream stores it as ``session`` in turn runs).
    """
    res: dict[str, Any] = {
        "question_id": question.question_id,
        "question_type": question.question_type,
        "abstention": is_abstention(question),
        "has_gold": has_gold(question),
    }
    if ranked_session_ids is not None:
        docs = corpus(question, "session")
        ranked = _to_official(ranked_session_ids, docs)
        gold = {d.id for d in docs if "answer" in d.id}
        res["session"] = _level_metrics(evaluate_retrieval, ranked, gold, [d.id for d in docs], ks)
    if ranked_turn_ids is not None:
        docs = corpus(question, "turn")
        ranked = _to_official(ranked_turn_ids, docs)
        gold = {d.id for d in docs if "answer" in d.id}
        cids = [d.id for d in docs]
        res["turn"] = _level_metrics(evaluate_retrieval, ranked, gold, cids, ks)
        res["turn_as_session"] = _level_metrics(evaluate_retrieval_turn2session, ranked, gold, cids, ks)
    return res


def _mean_levels(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows)}
    for level in LEVELS:
        have = [r[level] for r in rows if level in r]
        if have:
            out[level] = {m: float(np.mean([h[m] for h in have])) for m in have[0]}
    return out


def aggregate(per_question: list[dict[str, Any]], averaging: str = "strict") -> dict[str, Any]:
    """Average per-question results under ``"strict"`` or ``"noabs"``.

    Returns ``{"averaging", "n", "session": {"recall_all@5": ..}, "turn": {..},
    "turn_as_session": {..}, "by_type": {question_type: {"n", level: {..}}}}``.
    """
    if averaging == "strict":
        rows = [r for r in per_question if not r["abstention"] and r["has_gold"]]
    elif averaging == "noabs":
        rows = [r for r in per_question if not r["abstention"]]
    else:
        raise ValueError(f"averaging must be one of {AVERAGINGS}, not {averaging!r}")
    out = {"averaging": averaging, **_mean_levels(rows)}
    types = sorted({r["question_type"] for r in rows})
    out["by_type"] = {t: _mean_levels([r for r in rows if r["question_type"] == t]) for t in types}
    return out


def evaluate_longmemeval(
    questions: Sequence[Question],
    rank_fn: RankFn,
    progress: Callable[[int, int], None] | None = None,
    ks: Sequence[int] = KS,
) -> dict[str, Any]:
    """Run ``rank_fn`` on every question and score it with the official protocol.

    Returns ``{"per_question": [...], "strict": aggregate(..), "noabs": aggregate(..)}``.
    ``progress(done, total)`` is called after each question.
    """
    per_question = []
    for i, q in enumerate(questions):
        ranked_sessions, ranked_turns = rank_fn(q)
        per_question.append(score_question(ranked_sessions, ranked_turns, q, ks))
        if progress is not None:
            progress(i + 1, len(questions))
    return {
        "per_question": per_question,
        "strict": aggregate(per_question, "strict"),
        "noabs": aggregate(per_question, "noabs"),
    }


def _bm25_order(texts: list[str], query: str, tokenize: Callable[[str], list[str]]) -> list[int]:
    from rank_bm25 import BM25Okapi

    scores = BM25Okapi([tokenize(t) for t in texts]).get_scores(tokenize(query))
    return [int(i) for i in np.argsort(scores)[::-1]]  # upstream's tie order


def _upstream_split(text: str) -> list[str]:
    return text.split(" ")


def bm25_rank_longmemeval(question: Question, tokenize: Callable[[str], list[str]] = _upstream_split):
    """Upstream ``flat-bm25``: BM25Okapi over space-split docs, the question as query."""
    out = []
    for level in ("session", "turn"):
        docs = corpus(question, level)
        order = _bm25_order([d.text for d in docs], question.question, tokenize)
        out.append([docs[i].raw_id for i in order])
    return out[0], out[1]


def bm25_baseline_longmemeval(
    questions: Sequence[Question], progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """The data README's plain BM25 baseline through :func:`evaluate_longmemeval`."""
    return evaluate_longmemeval(questions, bm25_rank_longmemeval, progress)
