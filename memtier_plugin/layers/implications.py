"""What a standing item bears on by world knowledge (MemSidecar §3.2: a knowledge node records its applicability).

"I have a tree nut allergy" decides the answer to "What dairy-free milk should I get for my coffee?" (almond and
cashew milk are out), yet the two share no word, no topic word and, for bge-small, no nearby embedding. A concept
lists what an item says when it holds the concept (``said``: "tree nut", "almond", "cashew") and what a prompt
names when the concept bears on it (``bears_on``: "dairy free", "pesto", "granola"). An item *bears on* a prompt
when one concept's ``said`` words are in the item and its ``bears_on`` words in the prompt (layers/standing.py
reads it as the ``implied`` signal).

The built-in concepts are ``data/implications.yaml``; ``<memory_root>/global/implications.yaml`` (same shape) adds
concepts or words. Both are data, validated on load; words match stemmed, as the topic tree's do (a phrase: its
words in a row).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import ConfigError
from .topics import TopicTree, build_tree, user_extended, word_list

BUILTIN = Path(__file__).resolve().parent.parent / "data" / "implications.yaml"
CONCEPT_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
MAX_CONCEPTS = 500
KEYS = ("said", "bears_on")


@dataclass(frozen=True)
class Implications:
    """Concept → its ``said`` words (matched in an item) and its ``bears_on`` words (matched in a prompt)."""

    said: TopicTree
    bears_on: TopicTree

    def concepts(self, item_text: str) -> frozenset[str]:
        """The concepts an item's text holds (computed once per item by its reader)."""
        return frozenset(self.said.route(item_text))

    def named(self, prompt: str) -> frozenset[str]:
        """The concepts whose ``bears_on`` words a prompt names."""
        return frozenset(self.bears_on.route(prompt))


def _parse(doc, where: str) -> dict[str, dict[str, list[str]]]:
    if doc is None:
        return {}
    if not isinstance(doc, dict) or len(doc) > MAX_CONCEPTS:
        raise ConfigError(f"{where}: expected a mapping of at most {MAX_CONCEPTS} concepts")
    out: dict[str, dict[str, list[str]]] = {}
    for name, body in doc.items():
        if not isinstance(name, str) or not CONCEPT_RE.fullmatch(name):
            raise ConfigError(f"{where}: concept {str(name)[:40]!r}: expected lower-case words joined by '-'")
        if not isinstance(body, dict) or set(body) - set(KEYS):
            extra = sorted(set(body) - set(KEYS)) if isinstance(body, dict) else []
            raise ConfigError(f"{where}: concept {name}: expected the keys said and bears_on"
                              + (f", not {str(extra[0])[:40]!r}" if extra else ""))
        out[name] = {key: word_list(body.get(key), f"{where}: concept {name}", key) for key in KEYS}
    return out


@lru_cache(maxsize=1)
def _builtin_spec() -> dict[str, dict[str, list[str]]]:
    from ..safe_yaml import parse_yaml

    return _parse(parse_yaml(BUILTIN.read_text(encoding="utf-8"), str(BUILTIN)), str(BUILTIN))


@lru_cache(maxsize=16)
def _implications(user_file: str, mtime_ns: int) -> Implications:
    spec = {c: {k: list(v) for k, v in e.items()} for c, e in _builtin_spec().items()}
    if user_file:
        from ..safe_yaml import parse_yaml

        path = Path(user_file)
        for name, entry in _parse(parse_yaml(path.read_text(encoding="utf-8"), str(path)), str(path)).items():
            old = spec.setdefault(name, {k: [] for k in KEYS})
            for k in KEYS:
                old[k] = old[k] + entry[k]
    return Implications(build_tree({c: e["said"] for c, e in spec.items()}),
                        build_tree({c: e["bears_on"] for c, e in spec.items()}))


def implications(memory_root: Path | str | None = None) -> Implications:
    """The built-in concepts, extended by ``<memory_root>/global/implications.yaml`` when it exists."""
    return user_extended(memory_root, "implications.yaml", _implications)
