"""Standing knowledge from the user's own words: preferences, constraints, rules, identity.

MemSidecar §3.2 / Appendix A.1 (extract at task boundaries) and Pulse §3.2
(the user topic graph). Rules, no model: a sentence of a *user* message
becomes a candidate knowledge node when it states something that should
shape later decisions —

* a **preference** ("I prefer / love / avoid / can't stand / am allergic to …",
  "my favourite …", "I'm a vegetarian", "I have a fear of heights", "I'd rather …",
  "I'll only consider …", "I'm on a low-sodium diet", "I never finance a car",
  "I want work that keeps me outdoors"), or a kind of thing ruled
  out ("NSAIDs are off-limits for me", "a dog isn't an option for me",
  "spectator events don't interest me"), or a need said with its lasting reason
  ("because of my bad knees, I need a car with a high seat": not "I need a
  hotel tonight");
* a **constraint** ("hotels under $200 a night", "my budget is now up to $300",
  "never book flights before 8am");
* a **rule** for the agent ("production deploys only on weekdays",
  "always …", "never …", "don't ever …", "any transport I use has to be
  step-free");
* an **identity** fact ("I'm a nurse", "I live in Lisbon", "my name is …");

or a **choice** reveals one: an assistant message offering options followed
by the user picking one ("I'll go with the insulated parka; the other options
don't suit me": naming an offered option and saying why, or turning the rest
down) — PrefEval's choice-based form. Questions, one-off requests
("can you …", "I want you to act as …"), greetings and chit-chat, assistant and
tool text never become knowledge; nor does a sentence about one occasion, even
in love/hate words (issue 25, docs/standing.md "What counts as standing"): an
offer or wish ("I'd love to help"), a reaction to the thing at hand ("I love
it", "I love the colour"), a compliment or someone else's liking, a past
narrative, a liking only recalled or embedded ("reminds me why I love …",
"something I love"), a promise ("I won't give up"), a hedge. Each cue is
judged where it stands (:func:`_aimed`), so one such clause does not hide a
standing one in the same sentence. A list in one sentence ("an aisle seat,
vegetarian meals, and hotels under $200") gives one node per item, each with
its own attribute, so a later revision of one (the hotel budget) retires only
that one; two parts with no "and"/"or" are one item's words ("straightforward,
traditional learning methods").

The configured model can propose candidates too (:mod:`.proposals`);
its output is validated data, never executed. The sentence forms the rules read are in :mod:`.forms`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..tokenize import tokenize
from . import forms
from .fragments import phrase_kind, with_subject
from .requests import MANNER, SCOPE, ruled_scope

MAX_TEXT = 600  # a candidate's content (the user's words) is cut here
# a sentence shorter than this says nothing lasting ("Me too.", "I'm in."); "I'm vegan." (10) and "I'm sober." do
MIN_SENTENCE = 8


@dataclass
class Candidate:
    """A proposed knowledge node: the user's words, what kind, what it is about, where it came from."""

    node_kind: str  # preference | constraint | rule | identity | choice
    content: str
    attribute: str = ""  # what a revision replaces ("" = nothing: deduplicated by content only)
    entry_ids: list[str] = field(default_factory=list)
    form: str = "stated"  # stated | choice
    project_scoped: bool = False  # "for this project" / a rule about this project's operations
    requests: str = ""  # the kind of request it was said for, as said ("anything you book for me"; requests.SCOPE)
    asked: str = ""  # the question the user answered by choosing among offered options (picks.asked_in), or ""


def sentences(text: str) -> list[str]:
    """The sentences of ``text``; a question answered at once by a refusal ("Dogs on the furniture? Absolutely
    not.", "Tourist-trap restaurants? No thanks.") is one sentence: the user's own answer to their own question."""
    out: list[str] = []
    for s in (s.strip() for s in forms.SENT.split(text) if s and s.strip()):
        if out and out[-1].endswith("?") and forms.REFUSAL.match(s):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def _refused(sent: str) -> bool:
    """A kind of thing the user asks about and turns down in one breath ("Cruises? Not my scene." is caught by
    its words; "Shock collars, prong collars, any of that stuff? Hard no." by this)."""
    q, _, answer = sent.rpartition("? ")
    return bool(q) and bool(forms.REFUSAL.match(answer)) and not forms.DEICTIC_Q.match(q)


# "im a night owl", "ive been vegan for years": the speaker's "I'm" and "I've" typed without the apostrophe (not
# "dont", "cant": they would make a coding question's "i dont want to modify the stack trace" read as a preference)
_TEXTED = {"im": "I'm", "ive": "I've"}
_TEXTED_WORD = re.compile(r"\b(?:" + "|".join(_TEXTED) + r")\b", re.IGNORECASE)


def clean(sent: str) -> str:
    sent = sent.replace("\u2019", "'")  # "don’t" is "don't"
    sent = _TEXTED_WORD.sub(lambda m: _TEXTED[m.group(0).lower()], sent)
    sent = re.sub(r"^(?:hi|hello|hey|yes|ok|okay|also|and|but|so|oh|well|great|thanks)[!,.: ]+", "", sent.strip(),
                  flags=re.IGNORECASE)
    return sent.rstrip(" ;")[:MAX_TEXT]  # a clause cut at a semicolon ends without it


def find_cue(sent: str, pattern: re.Pattern) -> re.Match | None:
    """The first match of ``pattern`` that states the speaker's own lasting disposition (see :func:`_aimed`)."""
    return next((m for m in pattern.finditer(sent) if not _aimed(sent, m)), None)


def _aimed(sent: str, m: re.Match) -> bool:
    """A cue that is not about a kind of thing: a wish or offer ("I'd love to help"), a reaction to something
    in front of the speaker ("I love it", "I love how you ...", "I love the colour"), a compliment, a promise
    ("I won't quit"), a hedge ("I believe that ...")."""
    cue, before, rest = m.group(0), sent[: m.start()], sent[m.end():]
    cleft = bool(forms.CLEFT.search(before))
    if not cleft and not re.search(r"\w", rest.replace(" to", "", 1)) and re.search(
            r"\b(?:love|like|enjoy|adore|prefer|hate|dislike|allergic|into|of|about|to|for|with|on|"
            r"(?:an?|huge|big|massive|die-?hard|lifelong|devoted) (?:fan|supporter))$", cue, re.I):
        return True  # "Yeah, I love to.", "since I'm allergic.": nothing it is about
    if forms.EMBEDDED.search(before) and not cleft and not (forms.FRONTED.match(before) and "," not in before):
        return True  # "something I love", "what I like to hear", "even if I'm not into games": not asserted
    if re.search(r"\b(?:want|need)$", cue, re.IGNORECASE) and re.match(r"\s+(?!to\b)(?:\w+\s+){1,3}to\b", rest):
        return True  # "I don't want future generations to ...": about someone else
    if re.search(r"\b(?:want|need)$", cue, re.IGNORECASE) and re.match(
            r"\s+to\s+\w+(?:\s+(?!(?:any|some|every|no)(?:thing|one|where)\b)\w+)?\s+(?:it|this|that|them)\b",
            rest, re.IGNORECASE):
        return True  # "I don't want to spoil it": this one occasion (not "... to buy anything that burns gasoline")
    if re.search(r"\brather$", cue, re.IGNORECASE) and " than " not in rest and re.match(
            r"\s+(?:not\b|\w+\s+(?:it|this|that|them)\b)", rest, re.IGNORECASE) and not forms.EVERY_WEEK.search(rest):
        return True  # "I'd rather not say", "I'd rather do it myself": this one occasion (not "... on Fridays")
    if re.search(r"\b(?:want|need)$", cue, re.IGNORECASE) and forms.CONCERN.match(rest) \
            and not forms.HABITUAL.search(rest):
        return True  # "I don't want to come off as too pushy", "... to hurt any of my dogs": a concern, not a taste
    if re.search(r"\bfind$", cue, re.IGNORECASE) and re.match(
            r"\s+(?:one|a|an|some|something|anything|out|myself|other|ways?|time)\b", rest, re.IGNORECASE):
        return True  # "I find other ways", "Hope I find one": finding, not judging
    if forms.WISH.search(cue):
        return True  # "I'd love to see it", "I would like that": a wish for one thing, or an offer
    if re.search(r"\b(?:love|like|hate|dislike|enjoy|adore|can't stand|cannot stand)$", cue, re.IGNORECASE) and (
            re.match(r"\s+that\s+(?:i|you|we|they|he|she|it|my|your|our|his|her|their)\b", rest, re.IGNORECASE)
            or (re.search(r"hate$", cue, re.IGNORECASE) and forms.HEDGE.match(rest))):
        return True  # "I hate that I didn't think of it", "I hate to say it, but ...": a reaction, a hedge
    said_that = re.search(r"\b(?:believe|feel|think|know)$", cue, re.IGNORECASE) and re.match(r"\s+that\b", rest)
    if re.search(r"\brather$", cue, re.IGNORECASE) and re.match(r"\s+you\b[^.;!?]*\bthan\b", rest, re.IGNORECASE):
        return False  # "I'd rather you ask a clarifying question than guess": how the assistant is to work, for good
    if forms.SECOND.match(rest) or (forms.DEICTIC.match(rest) and not forms.EXTRAPOSED.match(rest) and not said_that):
        return True  # "I love your turtles", "I love how it shows", "I find it soothing": no referent of its own
    if re.search(r"\bbelieve$", cue, re.IGNORECASE) and not re.search(r"\b(?:firmly|strongly|really|truly|deeply)\b",
                                                                     cue, re.IGNORECASE):
        return True  # a hedge ("I believe that ..."), not a conviction ("I firmly believe ...")
    if re.search(r"\bwon't$", cue, re.IGNORECASE) and not forms.WONT_DO.match(rest):
        return True  # a promise ("I won't give up"), not a refusal ("I won't eat meat")
    if re.search(r"\binterested$", cue, re.IGNORECASE) and forms.WANT_NOW.match(rest) and not re.search(r"\bnot\b", cue):
        return True  # "I'm interested in the course you mentioned", "... in trying out Yin Yoga": a want of the moment
    return bool(re.search(r"\b(?:love|like|enjoy|adore)$", cue, re.IGNORECASE)) and (
        bool(forms.PROPOSAL.match(rest)) or _the_one(rest))  # "I like the idea of ...": a reaction to a proposal


def _the_one(rest: str) -> bool:
    """The object is one thing in front of the speaker ("the color and texture", "all the yellow leaves"): a
    definite phrase, short, with nothing that makes it a kind ("the scent of citrus", "the authors narrating")."""
    clause = re.split(r"[.,;:!?()\u2014]|\s-\s", rest, maxsplit=1)[0].strip().lower().split()
    if not clause or clause[0] not in ("the", "all") or (clause[0] == "all" and clause[1:2] != ["the"]):
        return False
    if set(clause) & {"it", "they", "he", "she", "this", "these", "those"}:
        return True  # "the smell and taste it adds", "the food of this city": this one thing
    if len(clause) > 6 or len(clause) == 2 and clause[0] == "the":
        return False  # "the ocean", "the cold": a kind
    return not set(clause) & {"of", "in", "for", "from", "with", "that", "which", "who", "when", "where", "about",
                              "like", "by", "on", "without", "to"}


def episodic(sent: str) -> bool:
    """The sentence tells of an occasion, not of a standing disposition: a past time, a recalled liking, an offer,
    a promise, someone else's doing, or a bare hedge ("I've been practising yoga twice a week" is a habit)."""
    return bool(forms.PAST.search(sent) or forms.RECALLED.search(sent) or forms.OFFER.search(sent)
                or ((plan := forms.PLAN.search(sent)) is not None and not _habit(sent)
                    and not _under_way_for_good(sent, plan.group(0))))


def since_then(sent: str) -> str:
    """What a sentence that tells of a past occasion says holds since, '' when it says nothing after its cause:
    "I had knee surgery two years ago, so I can't do high-impact exercise" gives "I can't do high-impact exercise"
    (after ", so", a leading "Ever since ...,", ", and I'm still" / "and now", "I learned the hard way that")."""
    m = (forms.SO_AFTER_REASON.search(sent) or forms.AFTER_CAUSE.match(sent) or forms.AND_SINCE.search(sent)
         or forms.LEARNED.search(sent))
    return sent[m.end():] if m else ""


def holds_since(sent: str) -> bool:
    """A past occasion told as the cause of what holds since: the clause after it (:func:`since_then`, three words or
    more) tells of no occasion and no moment of its own and asks nothing of the assistant. The learned gate reads
    such a sentence whole ("I had knee surgery two years ago, so I can't do high-impact exercise"; "I missed the bus,
    so I can't make it to the meeting" is read and left; "I got a new palette, so if you have any ideas that use
    those shades, that'd be great!" is not read)."""
    rest = since_then(sent)
    return (len(rest.split()) >= 3 and not episodic(rest) and not of_the_moment(rest)
            and not forms.MOMENT.search(rest) and not forms.YOU.search(rest))


def of_the_moment(sent: str) -> bool:
    """A preference of one occasion (``sent`` clean: apostrophes plain): the moment leads ("Just for tonight, ..."),
    a wish beside a moment anywhere ("..., so I'd prefer a quick answer this time", "If it rains tomorrow, I'd rather
    ..."), or the occasion named as this one ("I'd pay by card for this order")."""
    return bool(forms.OCCASION.search(sent) or (forms.WOULD.search(sent) and forms.NOW_ONLY.search(sent))
                or forms.FOR_THIS.search(sent))


def _under_way_for_good(sent: str, plan: str) -> bool:
    """Something under way for good, not a plan of the moment (``plan``: what forms.PLAN read): "I'm doing low-carb long
    term" (a promise, "I'll take good care of my shoes from now on", stays one)."""
    return bool(forms.UNDER_WAY.match(plan) and forms.FOR_GOOD.search(sent) and not forms.MOMENT.search(sent))


def _habit(sent: str) -> bool:
    """A habit said with how often ("I do physical therapy exercises every day"), not a plan to make one."""
    return bool(forms.HABIT.search(sent)) and not forms.INTENT.search(sent)


def _kind(sent: str, *, after_past: bool = False) -> str | None:
    """The kind of standing item ``sent`` states, or None. ``after_past``: ``sent`` is the consequence of a past
    occasion, and what every one of a kind must do after it is that occasion's ("I got a new puppy, so any rental has
    to allow dogs")."""
    if _refused(sent):
        return "preference"
    if sent.endswith("?"):
        return None
    if of_the_moment(sent):
        return None
    if forms.PICKED.search(sent) and not forms.LASTING.search(sent):  # "I'll go for the home game ticket package": one pick
        return None
    if episodic(sent):
        # a past cause with a lasting consequence: "I was diagnosed with celiac disease last year, so even a little
        # wheat makes me sick" (the consequence decides; the item keeps the whole sentence)
        rest = since_then(sent)
        if len(rest.split()) >= 3:
            return _kind(rest, after_past=True)
        # "Knee surgery last year means no running for me anymore": what the past cause rules out from now on
        return "preference" if forms.MEANS_NO.search(sent) and not forms.MOMENT.search(sent) else None
    request = forms.REQUEST.search(sent)
    if request:
        if forms.MOMENT.search(sent):
            return None  # "... so I need a hotel tonight": an errand
        phrase = phrase_kind(sent)  # "Atheist here, so skip the 'blessed' language", "UK stores please" after a state
        if phrase:
            return phrase
        if forms.REASONED_NEED.search(sent) or _lasting_need(sent) or forms.OVER_ANY_DAY.search(sent):
            return "preference"  # "..., so I need a vehicle with a usable third row": a need with its lasting reason
        # "Hostels aren't for me, I need a private bathroom": the need says what a standing clause before it wants
        head = sent[:request.start()].rstrip()
        before = head.rstrip(" ,;-—")
        if head.endswith((",", ";", "-", "—")) and len(before.split()) >= 3 and not forms.SUBORDINATE.match(before):
            kind = _kind(before, after_past=after_past)
            if kind:
                return kind
        if not _a_reason(sent, request):
            return None
    who = forms.IDENTITY.search(sent)
    if (who and not _reasoned_preference(sent, who)) or _memberships(sent):
        return "identity"
    if forms.BUDGET.search(sent) or (forms.MONEY.search(sent) and find_cue(sent, forms.PREF)):
        return "constraint"
    if _rule(sent):
        return "rule"
    if find_cue(sent, forms.PREF) or find_cue(sent, forms.STATE) or find_cue(sent, forms.HAVE) \
            or forms.FAV.search(sent) or forms.BEING.search(sent):
        return "preference"
    if find_cue(sent, forms.OPINION_SUBJECT) or _habit(sent) or forms.RULED_OUT.search(sent) \
            or forms.ONLY_KIND.search(sent) or forms.AVERSE.search(sent) or forms.CANNOT.search(sent) \
            or forms.HOUSE_RULE.search(sent) or forms.TRIGGERED.search(sent) or forms.SOMEONE_WHO.search(sent) \
            or ((forms.TO_ME.search(sent) or (forms.NO_INTENTION.search(sent) and forms.FIRST_PERSON.search(sent))
                 or (forms.ANY_EFFECT.search(sent) and not forms.YOU.search(sent))) and not forms.MOMENT.search(sent)):
        return "preference"
    if forms.REQUIRED.search(sent) and not forms.MOMENT.search(sent):  # "any book I read this summer must be short": a plan
        return "rule"
    if _lasting_need(sent):
        return "constraint"
    if forms.SELF_LABEL.search(sent):
        return "identity"
    if forms.OVER_ANY_DAY.search(sent) or forms.ALWAYS_WHEN.search(sent) or forms.THROUGH.search(sent):
        return "preference"
    if (forms.NO_WITH_REASON.search(sent) or forms.THEN_DONT.search(sent)) and not forms.MOMENT.search(sent):
        return "rule"
    if _so_rule(sent):
        return "rule"
    if forms.MOMENT.search(sent):
        return None
    kind = _so_standing(sent)
    if kind:
        return kind  # "An old spinal injury means jolts leave me in pain, so a smooth ride matters more to me than ..."
    if forms.AS_SOMEONE.match(sent):
        return "preference"  # "As someone with a real fear of flying, I'll go to almost any length to stay grounded"
    if forms.HOUSEHOLD.search(sent):
        return "preference" if forms.SO_THEN.search(sent) else "identity"
    said = with_subject(sent)  # "allergic to penicillin", "can't do dairy": typed without "I'm" or "I"
    kind = phrase_kind(sent) or (_kind(said, after_past=after_past) if said else None)
    return kind or ("rule" if not after_past and forms.MUST_DO.search(sent) else None)  # MOMENT was read above


def _lasting_reason(reason: str, *, lead: bool = False) -> bool:
    """``reason`` (what a sentence gives before its need or instruction) is the speaker's own lasting state ("My
    partner uses a wheelchair", "With two toddlers at home"): nothing under way or done ("It's raining", "My car
    broke down"), and, unless it leads the sentence as a reason clause, about the speaker, not about what someone
    else thinks ("She thought that nature does not guarantee our survival, so we have to ...")."""
    return not forms.PASSING_REASON.search(reason) and (lead or bool(forms.SPEAKER.search(reason)))


def _lasting_need(sent: str) -> bool:
    """A need said with a lasting reason before it (``forms.LASTING_NEED``), not one of the moment."""
    m = forms.LASTING_NEED.search(sent)
    if not m or forms.MOMENT.search(sent):
        return False
    if m.start() == 0:  # "With two toddlers at home, we need ...": the reason is the leading clause
        return _lasting_reason(m.group(0)[:m.group(0).rfind(",")], lead=True)
    return _lasting_reason(sent[:m.start()])


def _so_rule(sent: str) -> bool:
    """A standing instruction after its lasting reason (``forms.SO_RULE``), not an errand of the moment."""
    m = forms.SO_RULE.search(sent)
    return bool(m and not forms.MOMENT.search(sent) and len(sent[:m.start()].split()) >= 3
                and _lasting_reason(sent[:m.start()]))


def _so_standing(sent: str) -> str | None:
    """The kind of what a sentence says holds after its lasting reason and ", so" ("An old spinal injury means jolts
    leave me in pain for days, so a soft, smooth ride matters more to me than handling"): the reason is the speaker's
    own lasting state (:func:`_lasting_reason`) and the clause after it states a kind of its own. :func:`_kind` asks
    only of a sentence with nothing of the moment ("I'm exhausted, so I'd rather stay in tonight" is not read)."""
    m = forms.SO_AFTER_REASON.search(sent)
    if not m:
        return None
    head, rest = sent[:m.start()].rstrip(" ,;"), sent[m.end():].strip()
    if len(head.split()) < 3 or len(rest.split()) < 3 or not _lasting_reason(head):
        return None
    return _kind(rest)


def _reasoned_preference(sent: str, who: re.Match) -> bool:
    """Whether the identity fact ``who`` is given as the reason of a preference after it ("I live in a tiny studio,
    so I only buy compact furniture"): the sentence says what the user takes, and is a preference ("I'm 20, and I
    like cultural activities" stays an identity fact with a liking beside it)."""
    pref = find_cue(sent, forms.PREF)
    return bool(pref and who.end() <= pref.start() and forms.REASON.search(sent[who.end():pref.start()]))


def main_clause(text: str) -> str:
    """The part of a standing item that says what holds, without the reason given for it: "I always book a suite,
    because my kids go to sleep at 7 pm" holds for lodging, not for what the reason's words are near (a coffee
    table for a home with kids); "I'm lactose intolerant, so milk and cheese are a no-go" for milk and cheese.
    ``text`` when it gives no reason, or when what is left would be under three words."""
    for m in (forms.LEADING_REASON.match(text), forms.SO_AFTER_REASON.search(text)):
        if m and len(text[m.end():].split()) >= 3:
            return text[m.end():]
    m = forms.REASON_AFTER.search(text)
    if m and len(text[:m.start()].split()) >= 3:
        return text[:m.start()]
    return text


def _a_reason(sent: str, request: re.Match) -> bool:
    """Whether ``request`` is only the reason a stated preference before it gives ("I always book a suite, because
    my kids sleep at 7 and I need a space to stay up"), not a request of its own ("I avoid crowds, so I want you to
    find quiet places" is one)."""
    pref = find_cue(sent, forms.PREF)
    return bool(pref and pref.end() <= request.start() and "you" not in request.group(0).lower()
                and forms.REASON.search(sent[pref.end():request.start()]))


def _rule(sent: str) -> bool:
    """An instruction that holds from now on: "never book flights before 8am" (a verb and its object, not
    "Never give up!" or "Always here to help")."""
    if forms.RULE_ANY.search(sent) or forms.DONT_ME.search(sent) or forms.COUNT_OUT.search(sent) \
            or forms.RULE_HEADER.match(sent) or forms.ALWAYS_TAIL.match(sent) or MANNER.match(sent) \
            or forms.WHENEVER_YOU.match(sent) or forms.SHOULD_ALWAYS.match(sent):  # MANNER: how to answer, for good
        return True
    m = forms.RULE.search(sent)
    return bool(m and len(sent.split()) >= 4 and not forms.RULE_NOT.match(sent[m.end():]))


def _head(phrase: str) -> str:
    """The attribute an item is about: its head noun (stemmed), or '<object>_budget' for an amount."""
    words = tokenize(re.split(r"\b(?:under|below|over|above|up to|at most|before|after|for|with|from|in|on|at)\b",
                              phrase, maxsplit=1)[0])
    if forms.MONEY.search(phrase):
        obj = next((o for o in forms.BUDGET_OBJECTS if re.search(rf"\b{o}s?\b", phrase, re.IGNORECASE)), "")
        return f"{obj}_budget" if obj else "budget"
    words = [w for w in words if w not in forms.STOP_HEAD and not w.isdigit()]
    return words[-1] if words else ""


def _memberships(sent: str) -> list[tuple[str, str]]:
    """(content, attribute) per membership number the sentence states, each its own item ("... MileagePlus number
    is UA-MP 88213457 and my Marriott Bonvoy number is 412998771" gives two): attribute '<program>_number', so a
    new number replaces the old one of its program only."""
    out = []
    for m in forms.MEMBERSHIP.finditer(sent):
        name = m["name"].strip()
        if forms.NOT_MEMBER.search(name) or not (forms.MEMBER_WORD.search(name) or re.search(r"\b[A-Z]", name)):
            continue
        words = [w for w in tokenize(forms.MEMBER_WORD.sub(" ", name)) if w not in forms.STOP_HEAD] or tokenize(name)
        out.append((sent[m.start():m.end()], f"{words[-1]}_number" if words else "member_number"))
    return out


def _parallel(prefix: str, rest: str, parts: list[str]) -> bool:
    """Whether ``parts`` are the items of one list the preference verb ending ``prefix`` governs, each read as
    "<prefix> <part>": none starts a clause, a second verb or a phrase of its own (``forms.NOT_ITEM``; an "-ing" item
    only beside an "-ing" first item, as in "hiking, cycling and swimming"), the verb is no reason's ("..., as I
    prefer open-source and interoperable solutions") nor a relative clause's ("any trip that involves ferries,
    boats or cruises": the list is what the trip involves), and no item is set against another ("rather than")."""
    if forms.REASON_BEFORE.search(prefix) or forms.RATHER.search(rest) or forms.RELATIVE.search(parts[0]):
        return False
    firsts = [(p.split() or [""])[0].lower() for p in parts]
    gerunds = firsts[0].endswith("ing")
    return not any(forms.NOT_ITEM.match(p) or (not gerunds and w.endswith("ing")) for p, w in zip(parts, firsts))


def _items(sent: str) -> list[tuple[str, str]]:
    """(content, attribute) per item of a listing sentence; the whole sentence otherwise."""
    members = _memberships(sent)
    if members:
        return members
    m = forms.PREF.search(sent)
    # a list has a comma of its own: one before the verb ends a leading reason ("Since I was diagnosed with
    # diabetes, I keep my meals low in refined carbs and added sugar" is one item, not "I keep added sugar")
    if m and sent[m.end():].count(",") >= 1 and not forms.EXAMPLES.search(sent[m.end():]):
        prefix, rest = sent[: m.end()], sent[m.end():]
        prefix = prefix[prefix.rfind(":") + 1:].strip() if ":" in prefix else prefix
        parts = [p.strip(" .;:") for p in forms.LIST_SPLIT.split(rest) if p and p.strip(" .;:")]
        # two parts with no "and"/"or" are one item's words ("straightforward, traditional learning methods",
        # "personalized, one-on-one instruction"), not a list
        listed = len(parts) >= 3 or forms.LIST_CLOSE.search(rest) is not None
        if listed and 2 <= len(parts) <= 8 and all(len(p.split()) <= 6 for p in parts) \
                and _parallel(prefix, rest, parts):
            return [(f"{prefix} {p}".strip(), _head(p)) for p in parts]
    if forms.MONEY.search(sent):
        return [(sent, _head(sent))]
    return [(sent, "")]


def extract(text: str, *, role: str, entry_id: str = "") -> list[Candidate]:
    """Candidates stated in one message (only the user's own words count)."""
    if role != "user" or not isinstance(text, str) or len(text) > 20_000:
        return []
    out: list[Candidate] = []
    heading = ""  # a scope said on its own ("Ground rules for anything you book for me:") holds for the next one
    for sent in sentences(text):
        sent = clean(sent)
        said = stated_scope(sent)
        requests, heading = said or heading, said if said else ""
        if len(sent) < MIN_SENTENCE or len(sent.split()) > 80:
            continue
        kind = _kind(sent) or (_scoped_rule(sent, said) if requests else None)
        if kind is None:
            continue
        heading = ""
        scoped = bool(re.search(r"\b(?:this|our) (?:project|repo|service|codebase|team)\b", sent, re.IGNORECASE))
        if kind == "rule" and re.search(r"\b(?:deploy|release|merge|push|production|staging)\w*\b", sent, re.I):
            scoped = True
        for content, attribute in _items(sent):
            item_kind = kind
            if kind == "constraint" and not (forms.MONEY.search(content) or forms.BUDGET.search(content)):
                item_kind = "preference"  # "an aisle seat" beside "hotels under $200"
            ruled = ruled_scope(content) if item_kind in ("rule", "constraint") and not requests else ""
            out.append(Candidate(item_kind, content, attribute, [entry_id] if entry_id else [],
                                 project_scoped=scoped, requests=ruled or requests))
    return out


def _scoped_rule(sent: str, said: str) -> str | None:
    """What a sentence under a stated scope asks of every such errand ("For any restaurant you book for me, I want a
    quiet table", "When you order food for us, no peanuts ever"): read as the user's standing terms for it, not as
    a request of the moment; None when it asks nothing (a question, a story)."""
    if sent.endswith("?") or episodic(sent):
        return None
    rest = SCOPE.sub(" ", sent) if said else sent
    m = forms.SCOPED_ITEM.search(rest)
    if not m or len(tokenize(rest)) < 2:
        return None
    return "rule" if m.group(0).lower() in ("no", "nothing", "never", "always", "only", "don't", "do not") \
        else "preference"


def stated_scope(sent: str) -> str:
    """The kind of request ``sent`` binds its items to, as said ("anything you book for me"), or ""."""
    m = SCOPE.search(sent)
    if not m:
        return ""
    return re.sub(r"^(?:for|with|on|in|about)\s+", "", m.group(0), flags=re.IGNORECASE).strip()[:80]


def requirement_attributes(prompt: str) -> set[str]:
    """Attributes the current prompt itself sets ("a hotel under $400 this time"): they override stored ones."""
    out = set()
    for sent in sentences(prompt):
        if forms.MONEY.search(sent) or forms.PREF.search(sent):
            for _content, attribute in _items(clean(sent)):
                if attribute:
                    out.add(attribute)
    return out
