"""The topic tree of the Global layer (MemSidecar §3.2: a topic index over knowledge nodes).

Topics are paths (``travel``, ``travel/lodging``): a parent groups related
needs, a child narrows them. Each topic lists words; text is routed to the
topics its words hit, each hit weighted by how specific the word is (a word
listed under few topics counts more), a child's weight flowing half to its
parent. A knowledge node hangs under every topic its text routes to, so
different tasks reach it through their own paths.

The built-in tree is ``data/topics.yaml``; ``<workspace>/memory/global/topics.yaml``
(same shape) adds topics or words. Both are data, validated on load.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import ConfigError
from ..tokenize import STOP_WORDS, stem, tokenize

log = logging.getLogger(__name__)
BUILTIN = Path(__file__).resolve().parent.parent / "data" / "topics.yaml"
TOPIC_RE = re.compile(r"[a-z0-9_-]{1,40}(?:/[a-z0-9_-]{1,40}){0,3}")
MAX_TOPICS, MAX_WORDS = 500, 200


@dataclass(frozen=True)
class TopicTree:
    """Topic path → its (stemmed) words, and word → weight (1 / number of topics listing it). An entry of several
    words ("get around") is a phrase: it routes text that holds its words in a row (stemmed, stop words kept), and
    its words alone do not."""

    words: dict[str, frozenset]
    weight: dict[str, float]
    phrases: dict[str, frozenset] = field(default_factory=dict)  # topic → its phrases ("get around", stemmed)

    def parents(self, topic: str) -> list[str]:
        parts = topic.split("/")
        return ["/".join(parts[:i]) for i in range(1, len(parts))]

    def route(self, text: str) -> dict[str, float]:
        """Topic → routing weight for ``text`` (empty when no topic word occurs)."""
        raw = tokenize(text, stop=False, stemming=False)  # read once, for the words and for the runs of phrases
        toks = {stem(w) for w in raw if w not in STOP_WORDS}
        out: dict[str, float] = {}
        for topic, words in self.words.items():
            hit = toks & words
            if hit:
                out[topic] = out.get(topic, 0.0) + sum(self.weight[w] for w in hit)
        if self.phrases:
            seq = [stem(w) for w in raw]
            grams = {" ".join(seq[i:i + n]) for n in (2, 3, 4) for i in range(len(seq) - n + 1)}
            for topic, phrases in self.phrases.items():
                hit = grams & phrases
                if hit:
                    out[topic] = out.get(topic, 0.0) + sum(self.weight[p] for p in hit)
        for topic in [t for t in out if "/" in t]:
            for parent in self.parents(topic):
                out[parent] = out.get(parent, 0.0) + 0.5 * out[topic]
        return out

    def top(self, route: dict[str, float], n: int = 3) -> list[str]:
        """The ``n`` strongest topics of a route, most specific first among equals."""
        return [t for t, _ in sorted(route.items(), key=lambda kv: (-kv[1], -kv[0].count("/"), kv[0]))[:n]]


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    """Cosine of two routes (0 when either is empty)."""
    if not a or not b:
        return 0.0
    num = sum(v * b.get(k, 0.0) for k, v in a.items())
    den = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return num / den if den else 0.0


def _parse(doc, where: str) -> dict[str, list[str]]:
    if doc is None:
        return {}
    if not isinstance(doc, dict) or len(doc) > MAX_TOPICS:
        raise ConfigError(f"{where}: expected a mapping of at most {MAX_TOPICS} topics")
    out: dict[str, list[str]] = {}
    for topic, body in doc.items():
        if not isinstance(topic, str) or not TOPIC_RE.fullmatch(topic):
            raise ConfigError(f"{where}: topic {str(topic)[:40]!r}: expected lower-case words joined by '/'")
        out[topic] = word_list(body.get("words") if isinstance(body, dict) else None, f"{where}: topic {topic}",
                               "'words'")
    return out


def word_list(words, where: str, key: str) -> list[str]:
    """``words`` when they are a list of 1-MAX_WORDS short strings, each a word or a phrase of at most 4 words;
    ConfigError naming ``where`` (and ``key``) otherwise."""
    if not isinstance(words, list) or not words or len(words) > MAX_WORDS \
            or not all(isinstance(w, str) and 0 < len(w) <= 40 for w in words):
        raise ConfigError(f"{where}: {key} must be a list of 1-{MAX_WORDS} short strings")
    long = next((w for w in words if len(w.split()) > 4), None)
    if long is not None:
        raise ConfigError(f"{where}: {long[:40]!r}: a phrase has at most 4 words")
    return words


def build_tree(spec: dict[str, list[str]]) -> TopicTree:
    """A tree from topic → its words and phrases (each listed word weighs 1 / the number of topics listing it)."""
    words = {t: frozenset(tokenize(" ".join(w for w in ws if len(w.split()) == 1))) for t, ws in spec.items()}
    phrases = {t: frozenset(" ".join(p) for p in (tokenize(w, stop=False) for w in ws if len(w.split()) > 1)
                            if 2 <= len(p) <= 4) for t, ws in spec.items()}
    phrases = {t: ps for t, ps in phrases.items() if ps}
    count: dict[str, int] = {}
    for entries in (*words.values(), *phrases.values()):  # a phrase has a space, a word none: one key space
        for w in entries:
            count[w] = count.get(w, 0) + 1
    return TopicTree(words, {w: 1.0 / c for w, c in count.items()}, phrases)


@lru_cache(maxsize=1)
def _builtin_spec() -> dict[str, list[str]]:
    from ..safe_yaml import parse_yaml

    return _parse(parse_yaml(BUILTIN.read_text(encoding="utf-8"), str(BUILTIN)), str(BUILTIN))


@lru_cache(maxsize=16)
def _tree(user_file: str, mtime_ns: int) -> TopicTree:
    spec = {t: list(ws) for t, ws in _builtin_spec().items()}
    if user_file:
        from ..safe_yaml import parse_yaml

        path = Path(user_file)
        for topic, ws in _parse(parse_yaml(path.read_text(encoding="utf-8"), str(path)), str(path)).items():
            spec[topic] = spec.get(topic, []) + ws
    return build_tree(spec)


def topic_tree(memory_root: Path | str | None = None) -> TopicTree:
    """The built-in tree, extended by ``<memory_root>/global/topics.yaml`` when it exists."""
    return user_extended(memory_root, "topics.yaml", _tree)


def user_extended(memory_root: Path | str | None, name: str, build):
    """``build(user_file, mtime_ns)`` for ``<memory_root>/global/<name>`` when it exists (a file that cannot be read
    or is not valid is ignored with a warning), else ``build("", 0)``: the built-in data alone."""
    if memory_root is not None:
        user = Path(memory_root) / "global" / name
        try:
            return build(str(user), user.stat().st_mtime_ns)
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError, ConfigError) as exc:
            log.warning("%s: ignored (%s); using the built-in %s", user, exc, name.rsplit(".", 1)[0])
    return build("", 0)
