"""LoCoMo loader, the official evidence-recall metric, and a runner.

Format (snap-research/locomo ``locomo10.json``): each conversation has
``conversation`` (``speaker_a``, ``speaker_b``, ``session_<n>`` turn lists with
``speaker``, ``dia_id`` ``"D<session>:<turn>"``, ``text`` and optional
``blip_caption``; ``session_<n>_date_time``) and ``qa`` (``question``,
``answer`` or ``adversarial_answer``, ``evidence`` dia ids, ``category``).

Scoring: ``recall_acc`` (``task_eval/evaluation.py``) of the top-k retrieved
dia ids against the question's evidence. Evidence ids that match no turn of the
conversation (``"D:11:26"``, ``"D8:6; D9:17"``) are skipped, and a question left
with no valid evidence is excluded from the averages (upstream would count it
as 1.0, which only inflates the score).

A ranking function ``rank_fn(conversation, qa) -> ranked_dia_ids`` plugs any
retriever into :func:`evaluate_locomo`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EvalDataError
from .metrics import recall_acc

#: Official category ids (task_eval/evaluation.py), not the Mem0-paper labels.
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
KS: tuple[int, ...] = (5, 10, 20)

RankFn = Callable[["Conversation", "QA"], Sequence[str]]

_SESSION_KEY = re.compile(r"session_(\d+)")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    date: str  # the session's date string, e.g. "1:56 pm on 8 May, 2023"
    blip_caption: str | None = None


@dataclass
class Session:
    index: int
    date: str
    turns: list[Turn] = field(default_factory=list)


@dataclass
class QA:
    question: str
    answer: str | None
    evidence: list[str]
    category: int
    adversarial_answer: str | None = None

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, str(self.category))


@dataclass
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[Session]
    qa: list[QA]

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]

    def turn_ids(self) -> set[str]:
        return {t.dia_id for s in self.sessions for t in s.turns}


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def from_dict(item: dict[str, Any]) -> Conversation:
    """One conversation in the official format -> :class:`Conversation`."""
    try:
        conv = item["conversation"]
        sessions = []
        for key in sorted((k for k in conv if _SESSION_KEY.fullmatch(k)), key=lambda k: int(k.split("_")[1])):
            n = int(key.split("_")[1])
            date = str(conv.get(f"{key}_date_time", ""))
            turns = [
                Turn(str(t["dia_id"]), str(t["speaker"]), str(t.get("text", "")), n, date, t.get("blip_caption"))
                for t in conv[key]
            ]
            sessions.append(Session(n, date, turns))
        qa = [
            QA(
                question=str(q["question"]),
                answer=_str_or_none(q.get("answer")),
                evidence=[str(e) for e in q.get("evidence", [])],
                category=int(q["category"]),
                adversarial_answer=_str_or_none(q.get("adversarial_answer")),
            )
            for q in item.get("qa", [])
        ]
        return Conversation(str(item.get("sample_id", "")), str(conv["speaker_a"]), str(conv["speaker_b"]), sessions, qa)
    except (KeyError, TypeError, ValueError) as exc:
        raise EvalDataError(f"conversation {item.get('sample_id')!r}: malformed: {exc}") from exc


def load(path: str | Path) -> list[Conversation]:
    """Load a LoCoMo JSON file (a list of conversations)."""
    path = Path(path)
    if not path.exists():
        raise EvalDataError(f"{path}: no such file (pass the LoCoMo .json path)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvalDataError(f"{path}: not a JSON file: {exc}") from exc
    if not isinstance(data, list):
        raise EvalDataError(f"{path}: expected a JSON list of conversations")
    return [from_dict(item) for item in data]


def valid_evidence(conv: Conversation, qa: QA) -> list[str]:
    """The question's evidence ids that name a turn of the conversation."""
    ids = conv.turn_ids()
    return [e for e in qa.evidence if e in ids]


def _session_of(dia_id: str) -> str:
    return dia_id.split(":")[0]


def score_qa(ranked_dia_ids: Sequence[str], conv: Conversation, qa: QA, ks: Sequence[int] = KS) -> dict[str, Any] | None:
    """Per-question scores, or ``None`` when the question has no valid evidence.

    ``recall@k`` is ``recall_acc`` of the top k; ``all@k`` is 1.0 when every
    evidence turn is in the top k; ``session@1`` is 1.0 when the top-ranked turn
    lies in an evidence session.
    """
    evidence = valid_evidence(conv, qa)
    if not evidence:
        return None
    ranked = list(dict.fromkeys(ranked_dia_ids))
    row: dict[str, Any] = {"category": qa.category, "category_name": qa.category_name}
    for k in ks:
        row[f"recall@{k}"] = recall_acc(ranked[:k], evidence)
        row[f"all@{k}"] = float(row[f"recall@{k}"] == 1.0)
    gold_sessions = {_session_of(e) for e in evidence}
    row["session@1"] = float(bool(ranked) and _session_of(ranked[0]) in gold_sessions)
    return row


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """``{"overall": {"n", "recall@5", ...}, "<category name>": {...}}`` (means)."""

    def mean(sub: list[dict[str, Any]]) -> dict[str, float]:
        keys = [k for k in sub[0] if k not in ("category", "category_name")] if sub else []
        return {"n": len(sub), **{k: float(np.mean([r[k] for r in sub])) for k in keys}}

    out = {"overall": mean(list(rows))}
    for cat, name in CATEGORIES.items():
        sub = [r for r in rows if r["category"] == cat]
        if sub:
            out[name] = mean(sub)
    return out


def evaluate_locomo(
    convs: Sequence[Conversation],
    rank_fn: RankFn,
    progress: Callable[[int, int], None] | None = None,
    ks: Sequence[int] = KS,
) -> dict[str, Any]:
    """Run ``rank_fn(conv, qa)`` on every question and score it.

    Returns ``{"per_question": [...], "excluded": n_without_valid_evidence,
    "overall": {...}, "<category>": {...}}``. ``progress(done, total)`` is
    called after each conversation.
    """
    rows, excluded = [], 0
    for i, conv in enumerate(convs):
        for j, qa in enumerate(conv.qa):
            row = score_qa(rank_fn(conv, qa), conv, qa, ks)
            if row is None:
                excluded += 1
                continue
            rows.append({"sample_id": conv.sample_id, "qa_index": j, **row})
        if progress is not None:
            progress(i + 1, len(convs))
    scored = [{k: v for k, v in r.items() if k not in ("sample_id", "qa_index")} for r in rows]
    return {"per_question": rows, "excluded": excluded, **aggregate(scored)}


_ALNUM = re.compile(r"[a-z0-9]+")


def alnum_tokens(text: str) -> list[str]:
    """Lower-cased ASCII alphanumeric runs."""
    return _ALNUM.findall(text.lower())


def turn_document(turn: Turn) -> str:
    """The baseline's turn document: ``"speaker: text"``, plus ``" [image: caption]"``
    when the turn shares an image (this reproduces the data README's numbers;
    without the caption recall@10 is 0.534 and multi-hop@10 0.196).
    """
    doc = f"{turn.speaker}: {turn.text}"
    if turn.blip_caption:
        doc += f" [image: {turn.blip_caption}]"
    return doc


class BM25LoCoMo:
    """The data README's plain BM25 baseline as a ``rank_fn`` (one index per conversation)."""

    def __init__(self, tokenize: Callable[[str], list[str]] = alnum_tokens,
                 document: Callable[[Turn], str] = turn_document):
        self.tokenize = tokenize
        self.document = document
        self._cache: dict[int, tuple[Any, list[str]]] = {}

    def __call__(self, conv: Conversation, qa: QA) -> list[str]:
        from rank_bm25 import BM25Okapi

        key = id(conv)
        if key not in self._cache:
            turns = conv.turns
            self._cache[key] = (
                BM25Okapi([self.tokenize(self.document(t)) for t in turns]),
                [t.dia_id for t in turns],
            )
        bm25, ids = self._cache[key]
        scores = bm25.get_scores(self.tokenize(qa.question))
        return [ids[i] for i in np.argsort(scores)[::-1]]


def bm25_baseline_locomo(
    convs: Sequence[Conversation], progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """The README's plain BM25 over turns through :func:`evaluate_locomo`."""
    return evaluate_locomo(convs, BM25LoCoMo(), progress)
