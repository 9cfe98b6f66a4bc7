"""Standing knowledge from the user's own words: preferences, constraints, rules, identity.

MemSidecar §3.2 / Appendix A.1 (extract at task boundaries) and Pulse §3.2
(the user topic graph). Rules, no model: a sentence of a *user* message
becomes a candidate knowledge node when it states something that should
shape later decisions —

* a **preference** ("I prefer / love / avoid / can't stand / am allergic to …",
  "my favourite …", "I'm a vegetarian", "I have a fear of heights");
* a **constraint** ("hotels under $200 a night", "my budget is now up to $300",
  "never book flights before 8am");
* a **rule** for the agent ("production deploys only on weekdays",
  "always …", "never …", "don't ever …");
* an **identity** fact ("I'm a nurse", "I live in Lisbon", "my name is …");

or a **choice** reveals one: an assistant message offering options followed
by the user picking one ("I'll go with the insulated parka …") — PrefEval's
choice-based form. Questions, one-off requests ("can you …", "I want you to
act as …"), greetings and chit-chat, assistant and tool text never become
knowledge. A list in one sentence ("an aisle seat, vegetarian meals, and
hotels under $200") gives one node per item, each with its own attribute,
so a later revision of one (the hotel budget) retires only that one.

The configured model can propose candidates too (:func:`model_candidates`);
its output is validated data, never executed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..tokenize import tokenize

MAX_TEXT = 600  # a candidate's content (the user's words) is cut here

_PREF = re.compile(
    r"\b(?:I|i)(?:'m| am| have| had)?\s+(?:(?:really|strongly|strictly|usually|generally|always|absolutely|"
    r"definitely|totally|mostly|typically|much|also|only|still|do|don't|do not|never|would|'d|tend to|try to)\s+){0,3}"
    r"(?:prefer|like|love|enjoy|adore|favou?r|hate|dislike|detest|loathe|avoid|can't stand|cannot stand|"
    r"can't eat|cannot eat|can't have|don't eat|don't drink|don't wear|don't use|don't like|do not like|"
    r"don't want|do not want|won't|refuse|(?<=always )(?:need|want)|(?<=usually )(?:need|want)|(?<=only )(?:need|want)|"
    r"care about|value|stick to|steer clear|stay away|opt for|find|learn best|learn better|work best|thrive|"
    r"struggle|firmly believe|believe|am against|'m against|am strongly against|'m strongly against|"
    r"go for|lean towards?|gravitate|follow|keep|limit|only (?:eat|wear|use|buy|read|watch|listen|play|drink|fly|stay))\b",
    re.IGNORECASE)
_STATE = re.compile(
    r"\bI(?:'m| am)\s+(?:(?:a|an|very|really|strictly|severely|highly|quite|not|also|extremely)\s+){0,3}"
    r"(?:vegetarian|vegan|pescatarian|allergic|intolerant|lactose|gluten|afraid|scared|terrified|claustrophobic|"
    r"sensitive|diabetic|colou?r ?blind|left-handed|night owl|early bird|fan of|big fan|not a fan|into|passionate|"
    r"uncomfortable|comfortable|interested|obsessed|picky|budget-conscious|environmentally|eco|committed|"
    r"(?:a )?(?:beginner|novice|expert|visual|hands-on|auditory|kinesthetic))\b", re.IGNORECASE)
_HAVE = re.compile(r"\bI (?:have|suffer from|struggle with|get)\s+(?:an? |some |severe |mild |acute |bad |chronic |"
                   r"strong )*(?:fear|phobia|allergy|allergies|aversion|intolerance|sensitivity|condition|"
                   r"motion sickness|vertigo|anxiety|migraines?|bad knees?|back pain|asthma)\b", re.IGNORECASE)
_OPINION = re.compile(r"\b(?:prefer|preference|favou?rite|avoid|dislike|hate|can't stand|allergic|vegan|vegetarian|"
                      r"ineffective|distracting|disorienting|overwhelming|unengaging|engaging|boring|uncomfortable|"
                      r"against|appeal|works? best|learn best|thrive|struggle|enjoy|love|fond of|passionate|"
                      r"sensitive|intolerant|fear|phobia|exclusively|no interest|not interested|despise|detest|objection|"
                      r"opposed|averse|aversion|tolerance|fascinated|comfortable|(?:don't|doesn't|do not) interest|"
                      r"never (?:wear|buy|eat|drink|use|read|watch|play|listen|fly|stay|book|travel|go)|"
                      r"cannot tolerate|can't tolerate|don't (?:watch|read|use|eat|drink|consume|wear|play|listen|like)|"
                      r"do not (?:watch|read|use|eat|drink|consume|wear|play|listen|like)|don’t|need to avoid|"
                      r"only (?:eat|wear|use|buy|read|watch|listen|play|drink))\b",
                      re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|my|me)\b")
_FAV = re.compile(r"\bmy (?:absolute |all-time )?favou?rite\b|\bmy (?:go-to|preferred)\b", re.IGNORECASE)
_BUDGET = re.compile(r"\b(?:my|the|our)\s+(?:\w+\s+){0,2}budget\b|\b(?:under|below|at most|no more than|up to|"
                     r"less than|max(?:imum)?|within)\s+[$€£]\s?\d", re.IGNORECASE)
_RULE = re.compile(r"^(?:(?:and |also |please |as a |a )?(?:rule|policy)[^:]{0,30}:\s*)?"
                   r"(?:please\s+)?(?:always|never|don't ever|do not ever|only|no\s+\w+\s+(?:on|before|after))\b",
                   re.IGNORECASE)
_RULE_ANY = re.compile(r"\b(?:only on (?:weekdays|weekends|mondays?|tuesdays?|wednesdays?|thursdays?|fridays?)|"
                       r"never on (?:weekends|saturdays?|sundays?|fridays?)|(?:rule|policy) going forward|"
                       r"from now on|going forward)\b", re.IGNORECASE)
_IDENTITY = re.compile(r"\b(?:my name is|I live in|I'm based in|I am based in|I work (?:as|at|for|in)|"
                       r"I'm a (?:nurse|teacher|doctor|developer|engineer|student|designer|parent|mom|dad|"
                       r"manager|lawyer|chef|writer|researcher|retiree)|I am a (?:nurse|teacher|doctor|developer|"
                       r"engineer|student|designer|parent|manager|lawyer|chef|writer|researcher))\b", re.IGNORECASE)
_REVISION = re.compile(r"\b(?:changed my mind|from now on|instead|now (?:up to|under|at most)|no longer|any more|"
                       r"anymore|raise|lower|increase|decrease|bump)\b", re.IGNORECASE)
# not standing knowledge: requests, questions, prompts aimed at the assistant
_REQUEST = re.compile(r"^\s*(?:can|could|would|will) you\b|\bI (?:want|need|would like|would want|'d like) you\b|"
                      r"\bI (?:want|need) (?:to|an?|some|help|the)\b|"
                      r"\bact as\b|\bpretend\b|^\s*(?:write|give|tell|show|generate|create|explain|list|translate|"
                      r"summari[sz]e|rewrite|convert|fix|make|help)\b", re.IGNORECASE)
_CHOICE = re.compile(r"\b(?:I(?:'ll| will) (?:go|check|try|pick|take|choose|opt|stick|get|book|do|start)|"
                     r"I(?:'d| would) (?:go|prefer|choose|pick|rather|like to go)|I (?:choose|pick|select)|"
                     r"I think I(?:'ll| will| would|'d)|(?:let's|lets) (?:go|do|try|pick|choose)|"
                     r"option (?:\d|one|two|three|four)|the (?:first|second|third|fourth|last) (?:one|option)|"
                     r"(?:would|will|could|might) (?:work|be) (?:best|better|perfect|ideal|great)|"
                     r"sounds? (?:best|perfect|great|ideal|like the best)|would be the best|"
                     r"(?:other|rest of the) options?|the others?\b|I'll pass|(?:better|best) (?:choice|fit|option)|"
                     r"sounds? (?:most |really |more )?(?:appealing|interesting|intriguing|good|fun|right))\b",
                     re.IGNORECASE)
_OPTIONS = re.compile(r"(?:^|\s)(?:1[.)]|\(1\)|option 1|first,)|\b(?:options?|choices|possibilities|ideas|"
                      r"suggestions|you could|you might|consider|here are|such as)\b|,[^,]+,[^,]+\bor\b",
                      re.IGNORECASE)
_CODE = re.compile(r"[{};]|\(\)|\bdef |\bclass |\breturn\b|\bimport\b|```|\n\s{2,}\S|=\s*\w+\(")
_SENT = re.compile(r"(?<=[.!?;])\s+|\n+")
_LIST_SPLIT = re.compile(r",\s*(?:and\s+|or\s+)?|\s+and\s+(?=(?:an?|the|no|only|\w+\s+\w+))", re.IGNORECASE)
_EXAMPLES = re.compile(r"\b(?:like|such as|including|e\.g\.|especially|particularly|because|as|since|so)\b",
                       re.IGNORECASE)
_MONEY = re.compile(r"[$€£]\s?\d[\d,.]*|\b\d[\d,.]*\s?(?:dollars|euros|usd|eur|gbp)\b", re.IGNORECASE)
_BUDGET_OBJECTS = ("hotel", "flight", "meal", "dinner", "lunch", "rent", "gift", "laptop", "phone", "car",
                   "trip", "ticket", "room", "night", "wine", "course", "book")
_STOP_HEAD = {"a", "an", "the", "my", "any", "some", "all", "only", "no", "more", "less", "very", "really",
              "always", "never", "i", "me", "to", "of", "for", "with", "and", "or", "that", "this", "it"}


@dataclass
class Candidate:
    """A proposed knowledge node: the user's words, what kind, what it is about, where it came from."""

    node_kind: str  # preference | constraint | rule | identity | choice
    content: str
    attribute: str = ""  # what a revision replaces ("" = nothing: deduplicated by content only)
    entry_ids: list[str] = field(default_factory=list)
    form: str = "stated"  # stated | choice
    project_scoped: bool = False  # "for this project" / a rule about this project's operations


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text) if s and s.strip()]


def _clean(sent: str) -> str:
    sent = re.sub(r"^(?:hi|hello|hey|yes|ok|okay|also|and|but|so|oh|well|great|thanks)[!,.: ]+", "", sent.strip(),
                  flags=re.IGNORECASE)
    return sent[:MAX_TEXT]


def _kind(sent: str) -> str | None:
    if sent.endswith("?") or _REQUEST.search(sent):
        return None
    if _IDENTITY.search(sent):
        return "identity"
    if _BUDGET.search(sent) or (_MONEY.search(sent) and _PREF.search(sent)):
        return "constraint"
    if _RULE.search(sent) or _RULE_ANY.search(sent):
        return "rule"
    if _PREF.search(sent) or _STATE.search(sent) or _HAVE.search(sent) or _FAV.search(sent):
        return "preference"
    if _FIRST_PERSON.search(sent) and _OPINION.search(sent):
        return "preference"
    return None


def _head(phrase: str) -> str:
    """The attribute an item is about: its head noun (stemmed), or '<object>_budget' for an amount."""
    words = tokenize(re.split(r"\b(?:under|below|over|above|up to|at most|before|after|for|with|from|in|on|at)\b",
                              phrase, maxsplit=1)[0])
    if _MONEY.search(phrase):
        obj = next((o for o in _BUDGET_OBJECTS if re.search(rf"\b{o}s?\b", phrase, re.IGNORECASE)), "")
        return f"{obj}_budget" if obj else "budget"
    words = [w for w in words if w not in _STOP_HEAD and not w.isdigit()]
    return words[-1] if words else ""


def _items(sent: str) -> list[tuple[str, str]]:
    """(content, attribute) per item of a listing sentence; the whole sentence otherwise."""
    m = _PREF.search(sent)
    if m and sent.count(",") >= 1 and not _EXAMPLES.search(sent[m.end():]):
        prefix, rest = sent[: m.end()], sent[m.end():]
        prefix = prefix[prefix.rfind(":") + 1:].strip() if ":" in prefix else prefix
        parts = [p.strip(" .;:") for p in _LIST_SPLIT.split(rest) if p and p.strip(" .;:")]
        if 2 <= len(parts) <= 8 and all(len(p.split()) <= 6 for p in parts):
            return [(f"{prefix} {p}".strip(), _head(p)) for p in parts]
    if _MONEY.search(sent):
        return [(sent, _head(sent))]
    return [(sent, "")]


def extract(text: str, *, role: str, entry_id: str = "") -> list[Candidate]:
    """Candidates stated in one message (only the user's own words count)."""
    if role != "user" or not isinstance(text, str) or len(text) > 20_000:
        return []
    out: list[Candidate] = []
    for sent in sentences(text):
        sent = _clean(sent)
        if len(sent) < 12 or len(sent.split()) > 80:
            continue
        kind = _kind(sent)
        if kind is None:
            continue
        scoped = bool(re.search(r"\b(?:this|our) (?:project|repo|service|codebase|team)\b", sent, re.IGNORECASE))
        if kind == "rule" and re.search(r"\b(?:deploy|release|merge|push|production|staging)\w*\b", sent, re.I):
            scoped = True
        for content, attribute in _items(sent):
            item_kind = kind
            if kind == "constraint" and not (_MONEY.search(content) or _BUDGET.search(content)):
                item_kind = "preference"  # "an aisle seat" beside "hotels under $200"
            out.append(Candidate(item_kind, content, attribute, [entry_id] if entry_id else [],
                                 project_scoped=scoped))
    return out


def choice(query: tuple[str, str] | None, options: tuple[str, str], selection: tuple[str, str]) -> Candidate | None:
    """A preference revealed by a choice: (text, entry id) of the question, the offered options, the pick."""
    opt_text, opt_id = options
    sel_text, sel_id = selection
    if not _OPTIONS.search(opt_text) or not _CHOICE.search(sel_text) or sel_text.strip().endswith("?"):
        return None
    if len(sel_text) > 600 or _CODE.search(sel_text) or (query and (len(query[0]) > 400 or _CODE.search(query[0]))):
        return None  # a follow-up in a coding or writing task, not a choice among offered options
    asked = f"Asked {query[0].strip()[:200]!r}, " if query else ""
    ids = ([query[1]] if query else []) + [opt_id, sel_id]
    return Candidate("choice", f"{asked}the user chose: {sel_text.strip()[:MAX_TEXT]}", "",
                     [i for i in ids if i], form="choice")


def from_session(messages: list[tuple[str, str, str]]) -> list[Candidate]:
    """Every candidate of one session: ``messages`` are (entry id, role, text) in order."""
    out: list[Candidate] = []
    for i, (eid, role, text) in enumerate(messages):
        out.extend(extract(text, role=role, entry_id=eid))
        if role == "user" and i >= 1 and messages[i - 1][1] == "assistant":
            query = next(((m[2], m[0]) for m in reversed(messages[: i - 1]) if m[1] == "user"), None)
            c = choice(query, (messages[i - 1][2], messages[i - 1][0]), (text, eid))
            if c is not None:
                out.append(c)
    return out


def requirement_attributes(prompt: str) -> set[str]:
    """Attributes the current prompt itself sets ("a hotel under $400 this time"): they override stored ones."""
    out = set()
    for sent in sentences(prompt):
        if _MONEY.search(sent) or _PREF.search(sent):
            for _content, attribute in _items(_clean(sent)):
                if attribute:
                    out.add(attribute)
    return out


# ---- the configured model (optional): proposals, validated as data ------------------------------
MODEL_PROMPT = (
    "From the user's messages below, list the standing knowledge that should shape later requests: "
    "preferences, constraints (amounts, limits), standing rules for the assistant, identity facts. "
    "Use the user's own words; leave out questions, one-off requests and small talk. Answer with JSON: "
    '{"items": [{"kind": "preference|constraint|rule|identity", "content": "...", "attribute": "...", '
    '"message": <index of the message it comes from>}]}')


def model_schema(n_messages: int) -> dict:
    return {"type": "object", "required": ["items"], "additionalProperties": False, "properties": {
        "items": {"type": "array", "maxItems": 20, "items": {
            "type": "object", "required": ["kind", "content", "message"], "additionalProperties": False,
            "properties": {"kind": {"type": "string", "enum": ["preference", "constraint", "rule", "identity"]},
                           "content": {"type": "string", "minLength": 8, "maxLength": MAX_TEXT},
                           "attribute": {"type": "string", "maxLength": 40, "pattern": "^[a-z0-9_]*$"},
                           "message": {"type": "integer", "minimum": 0, "maximum": max(0, n_messages - 1)}}}}}}


def model_candidates(client, messages: list[tuple[str, str, str]], *, deadline: float | None = None) -> list[Candidate]:
    """Candidates the configured model proposes for the user's messages (validated; never executed).

    Each item must quote words the user actually wrote (its content's words must
    mostly occur in the message it names), so a model cannot invent a preference.
    """
    users = [(eid, text) for eid, role, text in messages if role == "user" and isinstance(text, str)][-20:]
    if not users:
        return []
    listing = "\n".join(f"[{i}] {text[:1500]}" for i, (_eid, text) in enumerate(users))
    result = client.chat([{"role": "system", "content": MODEL_PROMPT}, {"role": "user", "content": listing}],
                         schema=model_schema(len(users)), deadline=deadline)
    out = []
    for item in result.data["items"]:
        eid, source = users[item["message"]]
        words, said = set(tokenize(item["content"])), set(tokenize(source))
        if not words or len(words & said) / len(words) < 0.6:
            continue  # not the user's words
        out.append(Candidate(item["kind"], item["content"].strip(), item.get("attribute", ""), [eid], form="stated"))
    return out
