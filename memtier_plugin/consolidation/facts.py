"""Heuristic fact extraction, revision keys and Jaccard dedup (MemTier §3.3).

The consolidation daemon turns episodic entries into project-shared semantic
facts with ``extract_facts``; retrieval stage 1 runs BM25 over the facts'
``content`` to find the sessions an answer lives in, so statements stay short
and keep the source's distinctive names, nouns and numbers.

Updating follows MemSidecar A.1 / Pulse A.2: a candidate that matches an
existing fact (same revision key and value, or Jaccard >= threshold over the
content tokens) is a duplicate (``is_duplicate``); one with the same revision
key and a different value supersedes the current version
(``find_superseded``). Model output (``facts_schema``) is converted by
``facts_from_model_output`` and is only ever data, never executed.

``effective_time`` is the ISO date the text states, or resolves trivially
against the entry ``timestamp`` (today, yesterday, N days ago, last Monday);
otherwise, for non-dated facts, the entry's own day; for events and plans with
an unresolved relative phrase it is None and the surface phrase is kept in
``content`` for ``dates.py`` to resolve.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

import orjson

from . import patterns as P
from ..errors import ModelError
from ..store.semantic import FACT_KINDS, NOTE_PREFIX, REVISABLE_KINDS, Fact, revision_key  # noqa: F401
from ..tokenize import jaccard, token_set

log = logging.getLogger(__name__)

_DATED_KINDS = frozenset({"event", "plan", "progress"})
_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")


# ---------------------------------------------------------------- dates
def _day(timestamp: str | None) -> date | None:
    if not timestamp or not _ISO_DAY.match(timestamp):
        return None
    try:
        return date.fromisoformat(timestamp[:10])
    except ValueError:
        return None


def _mkdate(y: int, m: int, d: int) -> str | None:
    try:
        return date(y, m, d).isoformat()
    except ValueError:
        return None


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _sentence_date(sent: str, day: date | None) -> tuple[str | None, str | None]:
    """(surface phrase, ISO date or None) of the first date the sentence mentions."""
    m = P.DATE_ISO.search(sent)
    if m:
        return m.group(0), _mkdate(int(m["y"]), int(m["m"]), int(m["d"]))
    m = P.DATE_MD.search(sent) or P.DATE_DM.search(sent)
    if m and not (m["mon"].lower() == "may" and m.re is P.DATE_DM and not m["y"]):
        year = int(m["y"]) if m["y"] else (day.year if day else None)
        iso = _mkdate(year, P.MONTHS[m["mon"].lower().rstrip(".")], int(m["d"])) if year else None
        return m.group(0), iso
    m = P.DATE_REL.search(sent)
    if not m:
        f = P.FUTURE.search(sent)
        if f and day and f.group(0).lower() == "tomorrow":
            return f.group(0), (day + timedelta(days=1)).isoformat()
        return (f.group(0), None) if f else (None, None)
    rel = m.group(0).lower()
    if day is None:
        return m.group(0), None
    if rel in ("today", "tonight") or rel.startswith(("this morning", "this afternoon", "this evening", "earlier today")):
        return m.group(0), day.isoformat()
    if rel == "yesterday":
        return m.group(0), (day - timedelta(days=1)).isoformat()
    if m["unit"] and m["unit"].startswith(("day", "week")):
        n = int(m["n"]) if m["n"].isdigit() else P.NUMWORDS.get(m["n"].lower(), 1)
        k = n * (7 if m["unit"].startswith("week") else 1)
        return m.group(0), (day - timedelta(days=k)).isoformat()
    if rel.startswith("last ") and rel[5:] in _WEEKDAYS:
        back = (day.weekday() - _WEEKDAYS.index(rel[5:])) % 7 or 7
        return m.group(0), (day - timedelta(days=back)).isoformat()
    return m.group(0), None


# ---------------------------------------------------------------- helpers
def _subject(sent: str, default: str, avoid: str = "") -> str:
    for m in P.PROJECT_SUBJECT.finditer(sent):
        s = (m["s"] or m["t"]).lower()
        if s not in P.NOT_SUBJECT and s not in avoid:
            return s
    return default


def _undated(text: str) -> str:
    return P.FUTURE.sub(" ", P.DATE_REL.sub(" ", P.DATE_MD.sub(" ", P.DATE_ISO.sub(" ", text))))


def _split_qualifier(obj: str) -> tuple[str, str]:
    m = re.match(r"^(.*?)\s+(?:on|for|during|when|while|at|in|with)\s+(.+)$", obj, re.I)
    return (m.group(1), m.group(2)) if m else (obj, "")


def _preference(m: re.Match, clause: str) -> Fact | None:
    verb = m["verb"].lower().replace("'m", "am")
    obj = m["v"].strip()
    if not P.content_tokens(obj):
        return None
    content = P.third_person(clause[m.start():m.end()])
    if verb == "prefer":
        vs = re.split(r"\s+(?:over|to|rather than|instead of)\s+", obj, maxsplit=1, flags=re.I)
        if len(vs) == 2 and P.slug(vs[1]):
            return Fact("preference", "user", "_vs_".join(sorted((P.slug(vs[0]), P.slug(vs[1])))), vs[0], content, 0.85)
        core, qual = _split_qualifier(obj)
        toks = [t for t in P.words(core) if t not in P.STOP]
        if len(toks) >= 2:
            attr = P.singular(toks[-1]) + (f"_{P.slug(qual, 2)}" if P.slug(qual, 2) else "")
            return Fact("preference", "user", attr, " ".join(toks[:-1]), content, 0.85)
        return Fact("preference", "user", P.slug(obj), obj, content, 0.8)
    negative = any(w in verb for w in ("hate", "dislike", "detest", "stand", "not", "don't", "avoid"))
    return Fact("preference", "user", P.slug(obj), "dislike" if negative else "like", content, 0.8)


def _status(word: str) -> str:
    return word.lower().split()[-1]


def _progress(m: re.Match, clause: str, sent: str, default: str) -> Fact:
    head = _undated(clause[: m.start()])
    attr = P.slug(head) or P.slug(_undated(clause[m.end():]))
    subject = _subject(sent, "user" if P.FIRST_PERSON.search(clause) else default)
    return Fact("progress", subject, attr or "status", _status(m["s"]), P.third_person(clause), 0.75)


def _decision(clause: str, sent: str) -> Fact | None:
    m = P.DECISION.search(clause)
    if m:
        value = m["v"].strip()
        rest = clause[m.end():]
        fm = P.DECISION_FOR.match(rest.strip()) if rest.strip() else None
        attr = P.slug(fm["k"], 2) if fm else P.TECH_CATEGORY.get(value.lower(), "")
        attr = attr or P.slug(value)
        if not attr:
            return None
        return Fact("decision", _subject(sent, "project", value.lower()), attr, value, P.third_person(clause), 0.85)
    m = P.DECIDED_TO.search(clause)
    if m and P.slug(m["v"]):
        return Fact("decision", "user", P.slug(m["v"]), m["v"].strip(), P.third_person(clause), 0.75)
    return None


def _kv(k: str, v: str, sent: str, subject: str, content: str, conf: float) -> Fact | None:
    attr = P.contextual(P.slug(k), sent)
    v = v.strip().rstrip(".")
    if not attr or not v or not P.words(v):
        return None
    return Fact("attribute", subject, attr, v, content, conf)


# ---------------------------------------------------------------- rules
def _attribute_facts(clause: str, sent: str, user: bool, subj: str) -> list[Fact]:
    out: list[Fact] = []
    add = out.append
    for m in (P.ID_NUMBER.finditer(clause) if P.ID_HINT.search(clause) else ()):
        add(Fact("attribute", subj, P.slug(m["k"], 4), m["v"], P.third_person(clause), 0.9))
    m = P.ADDRESS.search(clause)
    if m:
        owner = P.ADDRESS_OWNER.search(clause[: m.start()])
        owner = P.slug(owner["k"]) if owner else ""
        attr = "address" if owner in P.OWN_ADDRESS else f"{owner}_address"  # the office's, not the user's
        add(Fact("attribute", subj, attr, m["v"], P.third_person(clause), 0.85))
    m = P.NOW_KV.search(clause)
    if m and (f := _kv(m["k"], m["v"], sent, _subject(sent, subj), P.third_person(clause), 0.85)):
        add(f)
    if not out and (m := P.COLON_KV.match(clause)) and not P.KV_KEY_BAD.match(m["k"].strip()) \
            and not P.REPORTING_KEY.search(m["k"].strip()):  # "User said: ..." states no "said"
        if P.ACTION_KEY.match(m["k"].strip()):  # "Booked: ...": an event, never a revision
            if P.words(m["v"]):
                add(Fact("event", _subject(sent, subj), P.slug(m["k"]) or "event", m["v"].strip().rstrip("."),
                         clause, 0.6))
        elif len(m["k"].split()) <= 4 and (f := _kv(m["k"], m["v"], sent, _subject(sent, subj), clause, 0.6)):
            add(f)
    if not user:
        if not out and (m := P.ACTION_REPORT.match(clause)) and P.DISTINCT.search(" " + m["v"]):
            add(Fact("event", _subject(sent, "user"), P.slug(m["k"]) or "event", m["v"].strip().rstrip("."),
                     f"{m['k'].capitalize()} {m['v'].strip().rstrip('.')}", 0.6))  # the agent's "I" is not the user
        if not out and (m := P.YOUR_KV.search(clause)):
            if (f := _kv(m["k"], m["v"], sent, "user", f"User's {m['k']} is {m['v']}", 0.7)):
                add(f)
        return out
    my = P.MY_HINT.search(clause) is not None
    if my and (m := P.MY_NAME.search(clause)):
        add(Fact("attribute", "user", "name", m["n"], f"User's name is {m['n']}", 0.9))
    for m in [*P.REL_NAME.finditer(clause), *P.NAMED.finditer(clause)] if my else ():
        rel = P.slug(m["r"], 2)
        if rel and m["n"].lower() not in P.STOP:
            add(Fact("attribute", "user", f"{rel}_name", m["n"], P.third_person(clause), 0.85))
    if (m := P.PLACE.search(clause)) and not any(f.attribute == "address" for f in out):
        verb, prep = m["verb"].lower(), m["prep"].lower()
        attr = ("occupation" if prep.startswith("as") else "employer" if verb.startswith("work")
                else "education" if verb.startswith("stud") else "hometown"
                if ("from" in verb or "grew" in verb or prep == "from") else "home")
        add(Fact("attribute", "user", attr, m["v"].strip(), P.third_person(clause), 0.8))
    if my and (m := P.FAVOURITE.search(clause)):
        add(Fact("preference", "user", "favorite_" + P.slug(m["k"], 2), m["v"].strip(), P.third_person(clause), 0.9))
    elif my and not out and (m := P.MY_KV.search(clause)) and not P.ING_VALUE.match(m["v"]):
        if (f := _kv(m["k"], m["v"], sent, "user", P.third_person(clause), 0.8)):
            add(f)
    if (m := P.OWN_USE.search(clause)) and P.DISTINCT.search(" " + m["v"]):
        obj = re.split(r"\s+(?:to|for|because|since|that|which|so|and)\s+", m["v"].strip(), maxsplit=1)[0]
        obj = " ".join(_undated(obj).split())
        verb = m["verb"].lower()
        kind = ("uses" if "us" in verb or verb in ("drive", "ride", "installed") else
                "member_of" if verb in ("signed up for", "subscribed to", "joined") else "owns")
        if P.slug(obj):
            add(Fact("attribute", "user", f"{kind}_{P.slug(obj)}", obj, P.third_person(clause), 0.7))
    return out


def _constraint_facts(clause: str, sent: str) -> list[Fact]:
    out: list[Fact] = []
    content = P.third_person(clause)
    m = P.MONEY_LIMIT.search(clause) if P.MONEY_HINT.search(clause) else None
    if m and P.BUDGET_WORD.search(sent):
        attr = P.contextual("budget", clause, near=m.span())  # the domain noun next to the amount
        attr = P.contextual("budget", sent) if attr == "budget" else attr
        out.append(Fact("constraint", "user", attr, m["v"].strip(), content, 0.8))
    if (m := P.NO_LATER.search(clause)):
        side = "latest" if "later" in m["pol"].lower() or "after" in m["pol"].lower() else "earliest"
        head = P.slug(clause[: m.start()], 2)
        head = "" if head in ("user", "need", "need_be") else head
        out.append(Fact("constraint", "user", f"{head}_{side}" if head else f"{side}_time",
                        f"{m['pol'].lower()} {m['v'].strip()}", content, 0.8))
    if (m := P.ONLY_WHEN.search(clause)):
        v = m["v"].strip()
        timey = re.search(r"week(?:day|end)|morning|evening|afternoon|night|day|" + P.WEEKDAY, v, re.I)
        out.append(Fact("constraint", "user", "schedule" if timey else "only_" + P.slug(v, 2), f"only {v}", content, 0.75))
    if out:
        return out
    if (m := P.CONSTRAINT_IMPERATIVE.match(clause)) and P.slug(m["v"]):
        out.append(Fact("constraint", "user", P.slug(m["v"]), m["pol"].lower(), content, 0.75))
    elif (m := P.CONSTRAINT_MODAL.search(clause)):
        k = " ".join(clause[: m.start()].rsplit(",", 1)[-1].split()[-4:])
        if P.slug(k) and not P.PRONOUN_START.match(k):
            out.append(Fact("constraint", _subject(sent, "user"), P.contextual(P.slug(k), sent),
                            f"{m['pol'].lower()} {m['v'].strip()}", content, 0.7))
    return out


def _clause_facts(clause: str, sent: str, role: str, when: tuple[str | None, str | None], day: date | None) -> list[Fact]:
    user = role == "user"
    default_subject = "project" if role == "tool" else "user"
    out = _attribute_facts(clause, sent, user, default_subject)
    if (f := _decision(clause, sent)):
        out.append(f)
    pm = P.PROGRESS.search(clause)
    if pm and "passed away" not in clause.lower() and not any(
            P.norm_value(f.value) == _status(pm["s"]) for f in out):
        out.append(_progress(pm, clause, sent, "project"))
    if not user:
        return out
    cons = _constraint_facts(clause, sent)
    keys = {(f.attribute, P.norm_value(f.value)) for f in out}
    out.extend(f for f in cons if (f.attribute, P.norm_value(f.value)) not in keys and
               not any(f.attribute == g.attribute for g in out if g.fact_kind == "attribute"))
    if (m := P.PREF_LIKE.search(clause)) and (f := _preference(m, clause)):
        out.append(f)
    elif not cons and (m := P.HABIT.search(clause)) and P.slug(m["v"]):
        out.append(Fact("preference", "user", P.slug(m["v"]), m["pol"].lower(), P.third_person(clause), 0.7))
    dated = bool(when[0]) and when[0] in clause
    pl = P.PLAN.search(clause)
    if pl and not any(f.fact_kind == "decision" for f in out):
        out.append(Fact("plan", "user", P.slug(_undated(pl["v"])) or "plan", pl["v"].strip(), P.third_person(clause), 0.7))
    elif not pl and P.FUTURE.search(clause) and P.FIRST_PERSON.search(clause):
        out.append(Fact("plan", "user", P.slug(_undated(clause)) or "plan", clause, P.third_person(clause), 0.6))
    elif dated and not pm and not any(f.fact_kind == "event" for f in out) and not any(
            f.fact_kind == "attribute" and P.norm_value(f.value).startswith(P.norm_value(when[0])) for f in out):
        out.append(Fact("event", "user", P.slug(_undated(clause)) or "event", when[0] or "", P.third_person(clause), 0.7))
    bare = P.VOCATIVE.sub("", clause)  # "I totally agree, Melanie": the name is said to someone, not stated
    if not out and P.FIRST_PERSON.search(bare) and (P.DISTINCT.search(bare) or len(P.content_tokens(bare)) >= 3):
        out.append(Fact("attribute", "user", NOTE_PREFIX + (P.slug(clause, 6) or "note"), clause, clause, 0.3))
    return out


def _states_nothing(text: str) -> bool:
    """Whether a sentence or clause is said to the agent about this conversation, not stated as knowledge:
    a question, a greeting or acknowledgement, a preamble ("Quick note before we start"), a leave-taking, or a
    request (imperative, "let's ...",
    "I'd like you to ...", a verbless "a hotel near the venue for Dec 1"). A standing rule in the
    imperative ("never book flights before 8am", "always ...") opens with its adverb, not a verb, and
    is kept; so is "let's use X" (a decision)."""
    if text.endswith("?") or P.GREETING.match(text) or P.ACK.match(text) or P.LEAVE_TAKING.match(text) \
            or P.WELL_WISHING.match(text) or P.PREAMBLE.match(text):
        return True
    if P.REQUEST.match(text) or P.WANT_ACTION.match(text) or P.QUESTION_START.match(text):
        return True
    if P.IMPERATIVE.match(text) or P.HORTATIVE.match(text):
        return True
    m = P.LABEL.match(text)  # "A rule going forward: production deploys only on weekdays": read what it labels
    body = m["rest"] if m and len(m["k"].split()) <= 4 else text
    return bool(P.FRAGMENT_START.match(body)) and not P.has_finite_verb(body)


def _is_skipped(sent: str, user: bool) -> bool:
    if _states_nothing(sent):
        return True
    m = P.LABEL.match(sent)  # "Last piece: fly me home ...": a label does not make a request a statement
    if m and len(m["k"].split()) <= 4 and _states_nothing(m["rest"].strip()):
        return True
    if not user and m and len(m["k"].split()) <= 4 and P.ADVICE_VALUE.match(m["rest"].strip()):
        return True  # a reply's advice under a label ("Online calendars: Check Eventbrite"): no fact of anyone's
    return not user and bool(P.BOILERPLATE.match(sent))


def _bare(sent: str) -> str:
    """A sentence without markdown, discourse markers and acknowledgement words in front."""
    sent = P.ACK_PREFIX.sub("", P.DISCOURSE.sub("", P.MARKDOWN.sub("", sent)).strip()).strip()
    return P.DISCOURSE.sub("", sent).strip()


def says_nothing(text: str, role: str = "user") -> bool:
    """Whether no sentence of ``text`` can state a fact (all questions, acknowledgements, leave-takings,
    requests, or too short): the model extractor is not asked about such an entry either."""
    for sent in P.split_sentences(text):
        sent = _bare(sent)
        if len(sent) >= 6 and not _is_skipped(sent, role == "user"):
            return False
    return True


def _tool_outcome(text: str) -> str | None:
    """The outcome part of a ``name(args) -> outcome`` rendering (args must be whole JSON), else None."""
    m = P.TOOL_RENDERING.match(text)
    if m is None:
        return None
    start = m.end()
    at = text.find(") -> ", start)
    while at != -1:
        args = text[start:at]
        try:
            if not args or orjson.loads(args) is not None:
                return text[at + 5:]
        except orjson.JSONDecodeError:
            pass
        at = text.find(") -> ", at + 1)
    return None


def tool_statement(text: str) -> str | None:
    """What a tool entry may state as a fact, or None.

    A tool entry is the ledger's rendering of one call, ``name(args) -> outcome``
    (store/tool_entries.py). The call and its arguments are what the agent did, not knowledge;
    a structured result (JSON), a bare ``ok`` and a failure (``FAILED: ...``, or an outcome whose
    text reports an error) state nothing a fact should keep: the agent's own reply says what they
    meant. What remains is an outcome the tool wrote as prose, e.g. ``Booked Lisbon Marriott Parque,
    4 nights``: that, and only that, is read as a statement. A tool text that is not a call
    rendering (a bridge's prose) is read as it is, unless it reports an error.
    """
    if not text or not text.strip():
        return None
    out = _tool_outcome(text)
    if out is None:
        if P.TOOL_RENDERING.match(text):
            return None  # a call whose arguments were cut off: no outcome to read
        out = text
    out = out.strip().rstrip("…").strip()
    if not out or out[0] in "{[\"" or out.lower() in ("ok", "true", "false", "null", "none") \
            or out.startswith("FAILED:") or P.TOOL_ERROR.search(out):
        return None
    if len(P.content_tokens(out)) < 3 or not any(c.isalpha() for c in out):
        return None
    return out


def is_call_rendering(content: str) -> bool:
    """Whether ``content`` is a raw tool call rendering (``name({...}) -> ...``), never a fact's statement."""
    return _tool_outcome(content) is not None or bool(P.TOOL_RENDERING.match(content) and " -> " in content)


def _reported(clause: str, role: str) -> tuple[str, str]:
    """Look through a reporting verb: ("User said: I prefer X", "user") -> ("I prefer X", "user").

    "said"/"told"/"mentioned" is never an attribute. The user reporting their own words (or
    anyone's in indirect speech, "she said that I ...") is the user's clause; another speaker's
    direct words ("My boss said: I need it by Friday") are read like an assistant's: no
    first-person rule applies to them, only explicit key-values, decisions and progress.
    """
    m = P.REPORTED.match(clause)
    if not m or role == "system":
        return clause, role
    inner = m["c"].strip(" .!,;:\t\"'")
    if role != "user":
        return inner, role
    direct = not clause[m.start("c") - 5: m.start("c")].rstrip().lower().endswith("that")
    who = " ".join(m["who"].lower().split())
    return inner, ("user" if who in P.USER_SPEAKER or not direct else "other")


def extract_facts(text: str, *, role: str = "user", timestamp: str | None = None) -> list[Fact]:
    """Rule-based facts of one episodic entry; assistant/tool text yields only
    decisions, progress and explicit key-values (an action report such as
    "Booked: UA 8802 ..." is an event, never a revisable attribute); ``[system]``
    text yields nothing."""
    if not text or role == "system" or text.lstrip().startswith("[system]"):
        return []
    if role == "tool" and (text := tool_statement(text)) is None:
        return []
    speaker = None
    if (m := P.LABEL.match(text.strip())) and P.PREAMBLE.match(m["k"]):
        text = m["rest"]  # "One more thing: my flight lands at 6pm": a preamble, not a speaker's name
    if (m := P.SPEAKER_LABEL.match(text.strip())) and P.UTTERANCE.search(m["said"]) \
            and not P.ACTION_KEY.match(m["who"]) and not P.KV_KEY_BAD.match(m["who"]) \
            and not P.NOT_SPEAKER.match(m["who"]):
        # a transcript line: its speaker's label is no attribute, and its "I" is that person, whichever
        # role carried the line: read as a person's own words, kept under their name (_named)
        text = m["said"]
        if not P.SECTION_LABEL.match(m["who"]):  # "Summary: I booked ...": a part of a reply, not a person
            speaker = m["who"]
            role = "user" if role in ("user", "assistant") else role
    day = _day(timestamp)
    out: list[Fact] = []
    seen: set[tuple[str, str, str, str]] = set()
    for sent in P.split_sentences(text):
        sent = _bare(sent)
        if len(sent) < 6 or _is_skipped(sent, role == "user"):
            continue
        when = _sentence_date(sent, day)
        for clause in P.CLAUSE_SPLIT.split(sent):
            clause = P.DISCOURSE.sub("", clause).strip(" .!,;:\t")
            clause = P.ACK_PREFIX.sub("", clause)
            said, who = _reported(clause, role)
            if len(said) < 6 or (said != sent and _is_skipped(said, who == "user")):
                continue
            facts = _clause_facts(said, sent, who, when, day)
            if not facts and said != clause and who == "user" and P.content_tokens(said):
                # the user reported it as worth saying: keep their words, under no key
                facts = [Fact("attribute", "user", NOTE_PREFIX + (P.slug(said, 6) or "note"), said, said, 0.3)]
            for f in facts:
                key = (f.fact_kind, f.subject, f.attribute, P.norm_value(f.value))
                if key in seen:
                    continue
                seen.add(key)
                if f.fact_kind in _DATED_KINDS and when[0]:
                    eff = when[1]  # None: relative phrase left for dates.py
                else:
                    eff = day.isoformat() if day else None
                if speaker is not None:
                    f = _named(f, speaker)
                out.append(Fact(f.fact_kind, f.subject, f.attribute, f.value, f.content[:300],
                                f.confidence, eff))
    return out


_USER_WORD = re.compile(r"\bUser(?='s\b|\b)")


def _named(f: Fact, speaker: str) -> Fact:
    """A fact read from ``speaker``'s line, told in their name: "User went to a support group" -> "Caroline
    went to a support group" (subject ``caroline``); a first-person clause the rewrite left as it was ("I
    loved the book"), or one that names nobody, is kept with its speaker in front. So neither retrieval's
    words nor a revision key mixes up two people of one conversation."""
    content = _USER_WORD.sub(speaker, f.content)
    if speaker not in content:
        content = f"{speaker}: {content}"
    subject = (P.slug(speaker, 2) or f.subject) if f.subject == "user" else f.subject
    return Fact(f.fact_kind, subject, f.attribute, f.value, content, f.confidence, f.effective_time)


# ---------------------------------------------------------------- revision and dedup
def _same_value(a: Fact, b: Fact) -> bool:
    return P.norm_value(a.value) == P.norm_value(b.value)


def is_duplicate(new: Fact, existing: Iterable[Fact], threshold: float = 0.8) -> Fact | None:
    """The existing fact ``new`` repeats: same revision key and value, or content Jaccard >= threshold."""
    key = revision_key(new)
    toks = token_set(new.content)
    for old in existing:
        if key is not None and revision_key(old) == key and _same_value(new, old):
            return old
        if toks and jaccard(toks, token_set(old.content)) >= threshold:
            return old
    return None


def find_superseded(new: Fact, existing: Iterable[Fact]) -> Fact | None:
    """The most recent fact with ``new``'s revision key and a different value, if ``new`` is not older."""
    key = revision_key(new)
    if key is None:
        return None
    best: Fact | None = None
    for old in existing:
        if revision_key(old) != key or _same_value(new, old):
            continue
        if new.effective_time and old.effective_time and old.effective_time > new.effective_time:
            continue
        if best is None or (old.effective_time or "") >= (best.effective_time or ""):
            best = old
    return best


# ---------------------------------------------------------------- model output
def facts_schema() -> dict[str, Any]:
    """JSON schema a language model's extraction output must satisfy."""
    text = {"type": "string", "minLength": 1, "maxLength": 300}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["facts"],
        "properties": {"facts": {"type": "array", "maxItems": 50, "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["fact_kind", "subject", "attribute", "value", "content"],
            "properties": {
                "fact_kind": {"type": "string", "enum": list(FACT_KINDS)},
                "subject": {**text, "maxLength": 80},
                "attribute": {**text, "maxLength": 80},
                "value": text,
                "content": text,
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "effective_time": {"type": ["string", "null"], "pattern": r"^\d{4}-\d{2}-\d{2}"},
            },
        }}},
    }


def facts_from_model_output(data: dict) -> list[Fact]:
    """Facts from validated model output; items with a bad kind or empty value are skipped."""
    items = data.get("facts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ModelError("model fact output must be an object with a 'facts' list")
    out: list[Fact] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or item.get("fact_kind") not in FACT_KINDS:
            log.debug("skipping model fact %d: bad kind", i)
            continue
        vals = [item.get(k) for k in ("subject", "attribute", "value", "content")]
        if not all(isinstance(v, str) and v.strip() for v in vals[2:]) or not isinstance(vals[0], str):
            log.debug("skipping model fact %d: empty value or content", i)
            continue
        subject = P.slug(vals[0], 2) or "user"
        attribute = P.slug(vals[1] or "", 4) if isinstance(vals[1], str) else ""
        conf = item.get("confidence", 0.9)
        conf = min(1.0, max(0.0, float(conf))) if isinstance(conf, (int, float)) and not isinstance(conf, bool) else 0.9
        eff = item.get("effective_time")
        eff = eff[:10] if isinstance(eff, str) and _ISO_DAY.match(eff) and _mkdate(*map(int, eff[:10].split("-"))) else None
        out.append(Fact(item["fact_kind"], subject, attribute or "note", vals[2].strip()[:300],
                        " ".join(vals[3].split())[:300], conf, eff))
    return out
