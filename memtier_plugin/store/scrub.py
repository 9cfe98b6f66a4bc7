"""What a purge makes of each record (``memtier purge``, docs/purge.md): the forgotten texts and their copies.

A :class:`Plan` is built from the forgotten ids and the records they name
(:meth:`Plan.learn`: an entry's content, a fact's content and value, a
knowledge node's words, a skill's goals and steps, a working state's
progress). :meth:`Plan.record` then says what any record of any ledger becomes:
a forgotten record goes (a forgotten fact that retired an older version leaves
a ``superseded`` marker when no kept version will), a record about a forgotten
item goes (cw_update, promoted, superseded, retired, store_cost), references
to forgotten ids leave its lists, a copy of a forgotten text inside it becomes
``[purged]``, and a fact or skill that superseded a forgotten version
supersedes the nearest kept one. Pure: no file is read or written here
(:mod:`memtier_plugin.purging` does that).
"""

from __future__ import annotations

import re
from typing import Any

from . import jsonl

MARK = "[purged]"
#: A forgotten text this long (characters) is searched for inside other records' strings; a shorter
#: one only replaces a string that is exactly it ("Noted." is everywhere and names nothing).
MIN_TEXT = 12
#: A sentence of a forgotten text this long is searched for too (a skill's goal keeps the user's sentences).
MIN_SENTENCE = 24
PRIMARY = ("entry", "fact", "knowledge", "skill", "state")
#: The field naming the item a change record is about: the record goes with its item.
SUBJECT = {"cw_update": "entry_id", "promoted": "entry_id", "superseded": "fact_id", "retired": "node_id",
           "store_cost": "entry_id"}
TEXT_FIELDS = ("content", "value", "goal", "goals", "progress", "pending", "artifacts", "steps")
_CUT = re.compile(r" …\[cut \d+ chars\]$")
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+|\n+")
DROP = object()  # what :meth:`Plan.record` answers for a record that goes


def _norm(text: str) -> str:
    return " ".join(text.split())


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def kind_of(rec: dict) -> str:
    kind = rec.get("kind", "entry")
    return kind if isinstance(kind, str) else ""


class Plan:
    """The forgotten ids, the texts their records hold, and their places in revision chains."""

    def __init__(self, ids: frozenset[str]):
        self.ids = ids
        self.texts: set[str] = set()      # whole forgotten texts (normalised), searched inside strings
        self.short: set[str] = set()      # too short to search for: replaced only where a string is exactly one
        self.parent: dict[str, str | None] = {}  # forgotten fact/skill id -> what it superseded
        self.child: dict[str, str] = {}  # fact id -> the fact that superseded it
        self._re: re.Pattern | None = None

    def learn(self, rec: dict) -> None:
        """Take the texts of a forgotten item's record."""
        sup = rec.get("supersedes")
        self.parent[rec["id"]] = sup if isinstance(sup, str) and sup else None
        for field in TEXT_FIELDS:
            for text in _strings(rec.get(field)):
                text = _norm(_CUT.sub("", text))
                if len(text) >= MIN_TEXT:
                    self.texts.add(text)
                    self.texts.update(s for s in map(str.strip, _SENTENCE.split(text)) if len(s) >= MIN_SENTENCE)
                elif text:
                    self.short.add(text)
        self._re = None

    def ancestor(self, item_id: str | None) -> str | None:
        """The nearest version of a chain that is not forgotten, from ``item_id`` back."""
        seen = set()
        while item_id in self.ids and item_id not in seen:
            seen.add(item_id)
            item_id = self.parent.get(item_id)
        return item_id

    def _kept_successor(self, item_id: str) -> bool:
        """Whether a newer version of ``item_id`` that is not forgotten exists (it will supersede the older one)."""
        seen = set()
        while item_id in self.child and item_id not in seen:
            seen.add(item_id)
            item_id = self.child[item_id]
            if item_id not in self.ids:
                return True
        return False

    def _pattern(self) -> re.Pattern | None:
        if self._re is None and self.texts:
            self._re = re.compile("|".join(re.escape(t) for t in sorted(self.texts, key=len, reverse=True)))
        return self._re

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds a forgotten text (or is a clipped copy of one)."""
        return self.scrub(text) != text

    def scrub(self, text: str) -> str:
        if _norm(text) in self.short:
            return MARK
        pat = self._pattern()
        if pat is None:
            return text
        out = pat.sub(MARK, text)
        flat = _norm(out)
        if flat != out and pat.search(flat):  # the copy's whitespace differs (a skill's goal is re-spaced)
            out = pat.sub(MARK, flat)
        head = _norm(_CUT.sub("", out))
        if head != _norm(out) and len(head) >= MIN_TEXT and any(t.startswith(head) for t in self.texts):
            return MARK  # a clipped copy ("…[cut N chars]") of a forgotten text
        return out

    def quotes(self, text: str) -> bool:
        """Whether ``text`` holds a forgotten text long enough to search for (not merely a short one)."""
        pat = self._pattern()
        return pat is not None and (pat.search(text) is not None or pat.search(_norm(text)) is not None)

    def _is_ref(self, value: str) -> bool:
        """A string naming a forgotten id: the id itself, or "id: why" (a trace's left_out)."""
        return value in self.ids or value.split(":", 1)[0] in self.ids

    def clean(self, value):
        """``value`` without references to forgotten ids and with their texts scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self.clean(v) for v in value
                    if not (isinstance(v, str) and self._is_ref(v))
                    and not (isinstance(v, dict) and v.get("id") in self.ids)]
        if isinstance(value, dict):
            return {k: self.clean(v) for k, v in value.items()}
        return value

    def record(self, rec: dict, final: bool) -> Any:
        """What ``rec`` becomes: itself, a scrubbed copy, a replacement, or ``DROP``.

        ``final`` False (the first pass) keeps forgotten records as they are, so their texts stay readable.
        """
        kind = kind_of(rec)
        if kind in PRIMARY and rec.get("id") in self.ids:
            if not final:
                return rec
            if kind == "fact":  # the older version it retired stays retired (by its newer version, if kept)
                older = self.ancestor(rec["id"])
                if older and not self._kept_successor(rec["id"]):
                    return {"v": jsonl.SCHEMA_VERSION, "kind": "superseded", "fact_id": older, "by": rec["id"],
                            "project": rec.get("project") or "", "timestamp": rec.get("timestamp")}
            return DROP
        if rec.get(SUBJECT.get(kind, "")) in self.ids:
            return DROP
        out = self.clean(rec)
        if kind in ("fact", "skill") and out.get("supersedes") in self.ids:
            older = self.ancestor(out["supersedes"])
            if kind == "fact" or older:
                out["supersedes"] = older
            else:
                del out["supersedes"]
        return out
