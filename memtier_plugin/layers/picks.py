"""A preference revealed by a choice (PrefEval's choice-based form; MemSidecar §3.2, the Global layer).

An assistant message offers options and the user's next message picks one: when the pick also turns the others
down by a judgement of them ("the other options don't appeal to me", "the wool one seems a bit too formal for my
taste") or says a disposition ("I prefer ...", "since I'm vegetarian"), the exchange is a standing preference
(:func:`choice`). A reason of the moment ("for now, since I'm just starting out") shows no lasting preference. A
bare pick of one item of a short numbered offer made to a question that asked for a choice ("Let's watch the
basketball game.") is kept as a *pick*: what the user went for when asked, delivered only to a later prompt that
asks for a choice, never read as a preference nor held against a tool call (:func:`bare_pick`). :func:`picks_an_option`
tells recall that a short reply picks from the offer just made, so the reply is searched together with it.
"""

from __future__ import annotations

import re

from ..tokenize import stem, tokenize
from . import forms
from .extract import MAX_TEXT, Candidate, find_cue
from .requests import asks_for_choice

_CHOICE = re.compile(r"\b(?:I(?:'ll| will) (?:go|check|try|pick|take|choose|opt|stick|get|book|do|start)|"
                     r"I(?:'d| would) (?:go|prefer|choose|pick|rather|like to go)|I (?:choose|pick|select)|"
                     r"I think I(?:'ll| will| would|'d)|(?:let's|lets) (?:go|do|try|pick|choose)|"
                     r"option (?:\d|one|two|three|four)|the (?:first|second|third|fourth|last) (?:one|option)|"
                     r"(?:would|will|could|might) (?:work|be) (?:best|better|perfect|ideal|great)|"
                     r"sounds? (?:best|perfect|great|ideal|like the best)|would be the best|"
                     r"(?:other|rest of the) options?|the others?\b|I'll pass|(?:better|best) (?:choice|fit|option)|"
                     r"sounds? (?:most |really |more )?(?:appealing|interesting|intriguing|good|fun|right)|"
                     r"sounds? like (?:a|an|the) (?:\w+ ){0,2}(?:option|fit|choice|pick|match|idea)|"
                     r"would be the (?:most|best) \w+|(?:is|are) the way to go|makes? (?:the most|more) sense|"
                     r"(?:is|are) the (?:one|ones) for (?:me|us)|"
                     r"(?:don't|doesn't|do not|does not) (?:really )?(?:appeal|interest|suit))\b",
                     re.IGNORECASE)
_OPTIONS = re.compile(r"(?:^|\s)(?:1[.)]|\(1\)|option 1|first,)|\b(?:options?|choices|possibilities|ideas|"
                      r"suggestions|you could|you might|consider|here are|such as)\b|,[^,]+,[^,]+\bor\b",
                      re.IGNORECASE)
# a pick reveals a standing preference when the user turns the others down by a judgement of them ("the other
# options don't appeal to me", "the oversized ones seem a bit too casual") or says why in terms of a disposition
# ("I prefer ...", "for my taste", "since I'm vegetarian", "I'll pass on ..."); a bare "I think I'll try the
# brisket", a reason of the moment ("for now, since I'm just starting out") or "other options I haven't thought
# of" is one occasion's pick
_EVALUATIVE = (r"appeal|align|fit|suit|work|interest|match|resonate|meet|offer|suitable|keen|fan|mood|thing|ideal|"
               r"effective|engaging|practical|helpful|accessible|comfortable|compatible|best|right for me|for me|"
               r"my (?:style|taste|cup of tea|liking|needs|values|preferences?)")
_NEGATED = rf"(?:\bnot|n't)\s+(?:[\w-]+\s+){{0,3}}?(?:{_EVALUATIVE})\w*\b"  # "don't really appeal", "aren't my style"
_OTHERS_JUDGED = (r"\b(?:the\s+)?(?:other|remaining|[\w-]+)\s+options?\b[^.;!?]{0,80}?"  # "the other options with
                  r"(?:n't|\b(?:not|might|may|could|would|seems?|sounds?|looks?))\b[^.;!?]{0,40}?"  # fragrances might
                  rf"\b(?:seem|sound|look|feel|cause|strain|{_EVALUATIVE})")  # irritate my skin", "... don't seem as ..."
_TOO = (r"\b(?:seems?|sounds?|looks?|feels?|is|are|be|get)\s+(?:a (?:bit|little)\s+|way\s+|far\s+|rather\s+|"
        r"quite\s+|slightly\s+|just\s+|either\s+)?too\s+\w+")  # "seems a bit too formal"
_NEGATIVE = (r"\b(?:distract(?:ing|ed|ion)|overwhelm(?:ing|ed)?|confus(?:ing|ed)|irritat(?:e|es|ing|ion)|bor(?:ed|ing)|"
             r"challenging|difficult|tedious|cluttered|intimidat(?:ing|ed)|uncomfortable|disrupt(?:ive)?|"
             r"(?:less|more)\s+(?:engaging|effective|appealing|interesting|suitable)\s+(?:to|for)\s+me)\b")
_JUDGED = re.compile("|".join((_NEGATED, _OTHERS_JUDGED, _TOO, _NEGATIVE)), re.IGNORECASE)
_DISPOSED = re.compile(r"\b(?:prefer|preference|rather|avoid|dislike|hate|can't stand|cannot stand|allergic|sensitive|"
                       r"for my (?:[\w-]+ )?(?:taste|liking|needs|values|style)|my (?:values|taste|style)|suits? me|"
                       r"pass on|out of the question|instead of|I find|I struggle)\b", re.IGNORECASE)

# the reason a pick gives, read as a disposition in the reply to an offer (where a reason is about the options, not
# a story): the others judged ("The others would spike my blood sugar"), a kind ruled out ("Anything with needles is
# out for me", "No honey or dairy for me"), what the user never does ("I don't buy new if I can help it", "I don't
# trust video consults"), what they must ("I have to be home for my dad in the evenings")
_PICK_REASON = re.compile(r"\b(?:the others|the rest|everything else|any of the others)\b[^.;!?]{0,40}?\b(?:would|will|"
                          r"are|is|were|seem|sound|look|feel|aren't|isn't|don't|won't|just)\b|"
                          r"\b(?:is|are|'s|'re)\s+(?:\w+\s+)?out(?:\s+for\s+(?:me|us))?\s*[.!]|"
                          r"\bno\s+(?:[\w-]+\s+){1,4}for (?:me|us)\b|"
                          r"\bI\s+(?:don't|do not|never|won't|can't|cannot)\s+(?:really\s+|ever\s+)?(?:trust|buy|eat|drink|"
                          r"do|use|take|fly|drive|ride|sleep|sit|stand|walk|climb)\b|"
                          r"\b(?:isn't|aren't|is not|are not)\s+(?:happening|how I)\b|"
                          r"\bI\s+(?:need|have to|must)\b(?!\s+(?:to\s+)?(?:think|check|ask|see|know|decide))|"
                          # what the user won't have happen ("I don't want to hurt or scare him"), what they want
                          # set against the rest ("I want to be there, not watching a screen"), a kind judged
                          # alike ("Big chain hotels all feel the same to me")
                          r"\bI\s+(?:don't|do not|never)\s+want\s+to\s+(?:hurt|harm|scare|frighten|stress|upset|risk|"
                          r"deal with|be stuck|sit through)\b|"
                          r"\bI\s+(?:want|like|prefer|need)\s+to\s+[^.;!?,]{2,40},\s+not\b|"
                          r"\b(?:all\s+)?(?:feel|feels|seem|seems|look|looks|taste|tastes)\s+(?:all\s+)?(?:the same|alike|"
                          r"generic|soulless|samey)\b",
                          re.IGNORECASE)

# words of the choosing itself, not of what is chosen ("that sounds great, I'll go with ...")
_CHOICE_WORDS = frozenset("sound sounds great good perfect best better ideal option options choice choose pick think "
                          "would could might like really more most other others rest with that this those these "
                          "interesting appealing fun right work works".split())
# a phrase that is a clause of its own, with a subject, not an option named
_CLAUSE = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|we|we're|our|you|your|it|it's|that|that's|this|these|those|"
                     r"there|there's|they|he|she|is|are|was|were)\b", re.IGNORECASE)
# code: braces, a semicolon that ends a line (one between two clauses is prose: "I never take boats; I get seasick")
_CODE = re.compile(r"[{}]|;[ \t]*(?:\n|$)|\(\)|\bdef |\bclass |\breturn\b|\bimport\b|```|\n\s{2,}\S|=\s*\w+\(")


def choice(query: tuple[str, str] | None, options: tuple[str, str], selection: tuple[str, str]) -> Candidate | None:
    """A preference revealed by a choice: (text, entry id) of the question, the offered options, the pick."""
    opt_text, sel_text = options[0], selection[0]
    if not _OPTIONS.search(opt_text) or sel_text.strip().endswith("?") or _own_list(sel_text):
        return None
    # the reason the pick gives: the whole reply when it says it picks ("I'll go with ..."), else what follows an
    # option's name at its start ("Fenway, obviously. Anything Bronx-related is out."); a name alone shows nothing
    reason = sel_text if _CHOICE.search(sel_text) else _after_the_pick(sel_text, opt_text)
    kind, option = "choice", None
    if not reason or not _reveals(reason):
        option = bare_pick(query, opt_text, sel_text)
        if option is None:
            return None  # "Sounds great!", a pick of the moment in a long chat: no choice shown
        kind = "pick"  # a bare pick of an option asked for: what the user went for, not why
    else:
        option = _by_place(sel_text, opt_text)  # "I'll go with option 2. The others ...": which one it was
    if forms.PAST.search(sel_text) or forms.OFFER.search(sel_text) \
            or re.match(r"\s*(?:maybe|perhaps)\b", sel_text, re.I) or not _names_an_option(sel_text, opt_text):
        return None  # a past story, an offer, a hedge: no choice shown
    if not among_options(query, sel_text):
        return None  # a follow-up in a coding or writing task, not a choice among offered options
    asked = f"Asked {query[0].strip()[:200]!r}, " if query else ""
    ids = ([query[1]] if query else []) + [options[1], selection[1]]
    # a pick, or a choice made by number, says which option it took ("Number 2." alone says nothing to the agent or
    # to a reader of the ledger)
    took = f"{TOOK}{_as_offered(option)})" if option is not None else ""
    return Candidate(kind, f"{asked}{CHOSE}{sel_text.strip()[:MAX_TEXT]}{took}", "",
                     [i for i in ids if i], form=kind)


# a bare pick (:func:`bare_pick`): the question asks for a choice in at most QUESTION_CHARS, the offer lists 2-8
# numbered options in at most OFFER_WORDS, the reply picks one in at most PICK_ALONE_WORDS, with no "!" and no
# request, or opens with its pick and says a word of its own after it that names no other option, in at most
# PICK_REPLY_WORDS ("Let's do the steakhouse. That sounds like our kind of evening."). LongMemEval-S dev's first
# 80 haystacks: long answers and chatty follow-ups ("I'm excited to start learning!", "More ideas", "I'll do my best
# to stay calm") are none of these
QUESTION_CHARS, OFFER_WORDS, PICK_ALONE_WORDS, PICK_REPLY_WORDS = 300, 150, 12, 25
OPTION_CHARS = 200  # the option a pick took, as the offer words it, written beside the reply
TOOK = " (the option: "
CHOSE = "the user chose: "  # after the question asked: what the user said when they chose
_LISTED = re.compile(r"(?:^|\s)([1-9])[.)]\s+(.+?)(?=\s+[1-9][.)]\s|$)", re.DOTALL)
_PICK_FILLER = frozenset({"let", "lets", "one"})  # tokenize drops the stop words ("the", "I'll") already
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def as_said(content: str) -> str:
    """A pick's or choice's content without the option written beside it: what the user said when asked. Its vector
    is made from this (the offer's wording near other questions' words handed probe_b's picks to 0.025 fewer own
    questions)."""
    return content.split(TOOK, 1)[0]


def reply_of(content: str) -> str:
    """What the user said when they chose, without the question asked or the option written beside it."""
    said = as_said(content)
    return said.split(CHOSE, 1)[1] if CHOSE in said else said


def _as_offered(option: str) -> str:
    """The option as the offer worded it, its first sentence: the last item runs on to what the offer says after
    the list ("4. Char-grilled oysters at an oyster bar. Let me know which appeals!")."""
    return _SENTENCE_END.split(" ".join(option.split()), maxsplit=1)[0][:OPTION_CHARS]


def bare_pick(query: tuple[str, str] | None, offer: str, reply: str) -> str | None:
    """The item of a short numbered ``offer`` made to a question that asked for a choice that ``reply`` picks, as the
    offer words it, when the reply says no reason that holds for good ("Let's watch the basketball game.", "I'll take
    the private office.", "Number 3.", "Let's do the steakhouse. That sounds like our kind of evening."); else None.
    The user went for it when asked, which later questions of the kind can bear in mind (it is kept as a "pick",
    never a preference: docs/standing.md "Picks")."""
    if query is None or len(query[0]) > QUESTION_CHARS or not asks_for_choice(query[0]):
        return None
    if len(reply.split()) > PICK_REPLY_WORDS or "!" in reply or forms.REQUEST.search(reply) or len(offer.split()) > OFFER_WORDS:
        return None
    items = _items(offer)
    alone = _picked(reply, items) if len(reply.split()) <= PICK_ALONE_WORDS else None
    if alone is not None:
        return items[alone]
    # a longer reply opens with its pick ("Let's do the steakhouse", "Option 3 sounds ideal") and what follows it
    # names no other option: not a statement that shares the offer's words ("I think the vaccinations are due ...")
    first, rest = (_PHRASE_END.split(reply.strip(), maxsplit=1) + [""])[:2]
    if not _pick_phrase(first):
        return None
    mine = _picked(first, items)
    if mine is None:
        return None
    others = set().union(*(_words_of(it) for i, it in enumerate(items) if i != mine)) - _words_of(items[mine])
    return None if any(w in others for w in _pick_words(rest)) else items[mine]


def _by_place(reply: str, offer: str) -> str | None:
    """The item of the numbered ``offer`` that ``reply`` names by number or place ("I'll go with option 2."), else
    None (an item named in words is said in the reply already)."""
    items = _items(offer)
    if not (_BY_PLACE.search(reply) or _BARE_NUMBER.match(reply)):
        return None
    i = _picked(reply, items)
    return items[i] if i is not None else None


_PLACES = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "first": 1, "second": 2, "third": 3, "fourth": 4}


def _picked(reply: str, items: list[str]) -> int | None:
    """The index of the one item of ``items`` that ``reply`` names, else None: by number or place, or in words that
    are mostly that item's, one of them that item's alone ("the basketball game" of "4. The college basketball
    game.")."""
    if not 2 <= len(items) <= 8:
        return None
    m = _BY_PLACE.search(reply) or _BARE_NUMBER.match(reply)
    if m:
        said = next(g for g in m.groups() if g).lower()
        place = len(items) if said == "last" else _PLACES.get(said) or int(said)
        return place - 1 if place <= len(items) else None
    words = _pick_words(reply)
    if not words:
        return None
    sets = [_words_of(it) for it in items]
    best = max(range(len(items)), key=lambda i: sum(w in sets[i] for w in words))
    mine = [w for w in words if w in sets[best]]
    others = set().union(*(sets[:best] + sets[best + 1:]))
    # and no word that only another item has ("the steakhouse or the oyster bar")
    if (2 * len(mine) >= len(words) and any(w not in others for w in mine)
            and not any(w in others and w not in sets[best] for w in words)):
        return best
    return None


def _items(offer: str) -> list[str]:
    return [m.group(2) for m in _LISTED.finditer(offer)]


def _words_of(item: str) -> set[str]:
    return {stem(w) for w in tokenize(item) if len(w) >= 3}


def _pick_words(text: str) -> list[str]:
    return [stem(w) for w in tokenize(text) if len(w) >= 3 and w not in _CHOICE_WORDS and w not in _PICK_FILLER]


def among_options(query: tuple[str, str] | None, selection: str) -> bool:
    """The exchange is a choice among offered options, not a follow-up in a coding or writing task: a reply of at
    most 600 characters, no code in it or in the question."""
    return not (len(selection) > 600 or _CODE.search(selection)
                or (query and (len(query[0]) > 400 or _CODE.search(query[0]))))


#: how much of the question a reply answered is kept beside what the reply said (``applies.asked``)
ASKED_CHARS = 200


def asked_in(query: tuple[str, str] | None, offer: str, reply: str) -> str:
    """The question ``reply`` answered by choosing among the options ``offer`` made for it, or "": the user's message
    before the offer asked for a choice ("What's a good way to get from Athens to Santorini?"), the offer lists
    options and the exchange is a choice among them (:func:`among_options`). What the user says in such a reply
    ("The flight. I get horribly seasick.") bears on what was being chosen, which its own words need not name. A
    reply that is a choice node (:func:`choice`) gives "": the node holds the question in its own words, and its
    parts ("The other options don't appeal to me") would otherwise reach every prompt the question is near, beside
    it."""
    if not query or not _OPTIONS.search(offer) or not among_options(query, reply) or not asks_for_choice(query[0]):
        return ""
    chose = choice(query, (offer, ""), (reply, ""))
    if chose is not None and chose.node_kind == "choice":
        return ""
    return " ".join(query[0].split())[:ASKED_CHARS]


def answered(messages) -> dict[str, str]:
    """Entry id of each user message that answers an offer of options → the question it answered (:func:`asked_in`);
    ``messages`` are (entry id, role, text) in order."""
    out: dict[str, str] = {}
    query, prev = None, ("", "", "")
    for eid, role, text in messages:
        text = text if isinstance(text, str) else ""
        if role == "user":
            asked = asked_in(query, prev[2], text) if prev[1] == "assistant" else ""
            if asked:
                out[eid] = asked
            query = (text, eid)
        prev = (eid, role, text)
    return out


def reason_given(selection: str, options: str, *, asked: bool = False) -> str:
    """What a reply that picks one of ``options`` says besides the pick: the rest after its first phrase ("Audiobook.
    I'm dyslexic, listening is just way easier for me.", "Gluten-free — celiac, unfortunately.", "Let's do the slow
    cooker one, I never have time to cook on weeknights."); "" when the reply is the pick alone. The learned gate
    reads it (layers/gate.py): a reason that states something lasting makes the pick a standing preference.
    ``asked``: the question before the offer asked for a choice, so a first sentence that names an option and is
    said as choosing it is the pick, as an intention or a verdict too ("I'll go with walking dogs at the shelter.",
    "I'll rent a desk at the coworking space.", "The 10 a.m. coffee group works best."); without a question that
    asked for one, "I'll definitely try to establish a routine." takes up advice and picks nothing."""
    sel = selection.strip()
    if "\n" in sel:
        return ""  # a pasted text, not a pick and its reason
    parts = _PHRASE_END.split(sel, maxsplit=1)
    if len(parts) < 2 or not _OPTIONS.search(options) or _own_list(sel):
        return ""
    if _is_the_pick(parts[0], options):
        return parts[1].strip()
    if asked:
        first = forms.SENT.split(sel, maxsplit=1)
        # what follows such a pick is a reason when it is a clause ("Quick and simple." describes the option)
        if len(first) == 2 and _chosen_in(first[0], options) and _CLAUSE.search(first[1]):
            return first[1].strip()
    # a longer pick said as a phrase, with its reason after it in the user's own words ("The solid oak one from the
    # estate sale. I want something that'll last"; not "Put in table." nor "knowledge and expertise." after a phrase
    # that shares a word with a list)
    if _is_the_pick(parts[0], options, longer=True) and _OWN_WORDS.search(parts[1]):
        return parts[1].strip()
    return ""


# where a reply's phrases end: a sentence's end, a dash, a comma after a word
_PHRASE_END = re.compile(r"(?<=[.!;])\s+|\s+(?:[\u2014\u2013]|-{1,2})\s+|[\u2014\u2013]|(?<=\w),\s+")
# a first sentence said as choosing, when a choice was asked for: an intention at its start ("I'll go with ...",
# "We'll take ...", "Let's book ..."), or a verdict on what it names ("... works best", "... is ideal", "... is what
# I need", "... is what matters most to me")
_CHOOSING = re.compile(r"^(?:I(?:'ll| will)|we(?:'ll| will)|let's|lets)\s+(?:\w+ly\s+)?[a-z]+\b|"
                       r"\b(?:works?|suits?|fits?)\s+(?:me\s+|us\s+)?(?:best|better|perfectly)\b|"
                       r"\b(?:is|are|'s|sounds?|seems?|looks?)\s+(?:\w+\s+)?(?:ideal|perfect|right for (?:me|us))\b|"
                       r"\b(?:is|are|'s)\s+(?:exactly\s+)?what\s+(?:I|we)\s+(?:need|want)\b|"
                       r"\bwhat matters (?:most )?to (?:me|us)\b", re.IGNORECASE)
CHOSEN_WORDS = 15  # a first sentence that picks, at most this long ("I'll go with option 2 and reserve the ...")


def _chosen_in(sentence: str, options: str) -> bool:
    """``sentence`` (a reply's first, to a question that asked for a choice) picks one of ``options``: said as
    choosing (_CHOOSING), at most CHOSEN_WORDS words, naming an option, nothing asked."""
    return (len(sentence.split()) <= CHOSEN_WORDS and not sentence.rstrip().endswith("?")
            and bool(_CHOOSING.search(sentence.replace("\u2019", "'"))) and _names_an_option(sentence, options))


def _is_the_pick(phrase: str, options: str, *, longer: bool = False) -> bool:
    """``phrase`` is a pick: "Audiobook.", "Number 4.", "Let's do the slow cooker one", "2"; ``longer``: also a
    longer phrase with no clause ("The solid oak one from the estate sale.", "Temple food for me."); not a clause of
    its own ("That's really helpful to know.", "My skin type is combination, ...": a reply to advice, not a pick)."""
    # a verdict ("... works best") is a pick only when a choice was asked for (reason_given's ``asked``)
    named = _pick_phrase(phrase) or (longer and len(phrase.split()) <= PICK_PHRASE_WORDS
                                     and not _CLAUSE.search(_FOR_ME.sub("", phrase)) and not _NOT.search(phrase)
                                     and not _CHOOSING.search(phrase))
    return bool(named and not forms.INTENT.search(phrase) and _names_an_option(phrase, options))


# a pick said as a phrase with no clause, at most this long ("At home with a couple of friends.")
PICK_PHRASE_WORDS = 10
# "... for me." ends a pick said as a phrase ("Temple food for me."): it says whose pick, not a clause
_FOR_ME = re.compile(r"\s+for (?:me|us)\b(?=\W*$)", re.IGNORECASE)
_NOT = re.compile(r"n't\b|\bnot\b", re.IGNORECASE)  # "winter outdoor sports aren't an option": a clause, not a pick
# the user's own words, in the first person singular: a reason said of themselves (not forms.FIRST_PERSON's "our":
# "... work hand-in-hand with our manufacturers" after a phrase that names an option is a brand's pitch pasted in)
_OWN_WORDS = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself)\b", re.IGNORECASE)


def _pick_phrase(phrase: str) -> bool:
    """``phrase`` is said as a pick: with a word of choosing, or short and no clause of its own."""
    return bool(_CHOICE.search(phrase) or (len(phrase.split()) <= 6 and not _CLAUSE.search(phrase)))


def _reveals(sel: str) -> bool:
    """The pick says what the user holds to: a judgement of the options turned down, or a disposition."""
    sel = sel.replace("\u2019", "'")
    return bool(_JUDGED.search(sel) or _DISPOSED.search(sel) or _PICK_REASON.search(sel) or find_cue(sel, forms.STATE)
                or find_cue(sel, forms.HAVE))


def _after_the_pick(sel: str, options: str) -> str:
    """What the reply says after the pick when it opens with the pick itself, a short phrase naming one of the
    options ("Fenway, obviously.", "The roast chicken with rice and greens.", "Number four, in person."); "" when it
    does not, or says nothing after it (a topic typed as a reply, "disruptive innovations in flexible packaging",
    is no pick), or opens with a plan that takes up the advice ("I'll definitely try to establish a routine")."""
    parts = re.split(r"(?<=[.!;])\s+", sel.strip(), maxsplit=1)
    if len(parts) < 2 or "\n" in sel.strip():  # one phrase alone, or a pasted text: no pick and reason
        return ""
    first, rest = parts
    if len(first.split()) > 12 or forms.INTENT.search(first) or not _names_an_option(first, options):
        return ""
    return rest


def picks_an_option(reply: str, offer: str) -> bool:
    """``reply`` (not a question) picks one of the options ``offer`` lays out ("Infante Sagres this time" to
    "Infante Sagres ($284) or the Porto Marriott ($231)")."""
    reply = reply.strip()
    return bool(reply) and not reply.endswith("?") and not _own_list(reply) and _offers(offer) \
        and _names_an_option(reply, offer)


def _own_list(reply: str) -> bool:
    """``reply`` is numbered as a list of its own, answering point by point ("1. Already done: ... 2. That method
    doesn't work on a QVBoxLayout"), and picks nothing. Linear in the reply: a host's prompt reaches this on the
    prompt's path (intake), so no pattern here may rescan the text from every "1." it holds."""
    first = _ITEM_ONE.search(reply)
    return bool(first and _ITEM_TWO.search(reply, first.end()))


_ITEM_ONE = re.compile(r"(?:^|\s)1[.)]\s")
_ITEM_TWO = re.compile(r"\s2[.)]\s")


def _offers(text: str) -> bool:
    """``text`` lays out options: a list or an options cue (_OPTIONS), or two named ones with "or" between."""
    return bool(_OPTIONS.search(text) or re.search(r"\b[A-Z0-9][\w$()-]*[^.?!]{0,60}\bor (?:the )?[A-Z0-9]", text))


# a reply that opens with an option's number alone: "2, sensitive teeth forever", "3. winter camper" (of a pick's
# length: a longer one opening "1." is a text of its own)
BARE_NUMBER_WORDS = 25
_BARE_NUMBER = re.compile(r"^\s*#?([1-9])\s*(?:[.,:;)!]|\s[-\u2014\u2013]|$)")
# an option named by number or place ("option 2", "#3", "the second one", "go with the first")
_BY_PLACE = re.compile(r"\b(?:option|number|choice) (\d|one|two|three|four|five)\b|#(\d)\b|"
                       r"\b(first|second|third|fourth|last) (?:one|option|choice|idea|suggestion)\b|"
                       r"\b(?:pick|take|choose|go with|do|try) (?:the )?(first|second|third|fourth|last)\b|"
                       # a reply that opens with the place alone: "Definitely the first.", "The second, please."
                       r"^(?:(?:definitely|probably|maybe|honestly|easily|oh|ok|okay|hmm)[,!]?\s+)?the "
                       r"(first|second|third|fourth|last)(?=\s*(?:[.,!;:\u2014\u2013-]|$))",
                       re.IGNORECASE)


def _names_an_option(selection: str, options: str) -> bool:
    """The pick names one of the offered options: by number or place, or by a content word of the offer."""
    if _BY_PLACE.search(selection):
        return True
    m = _BARE_NUMBER.match(selection)  # "2, sensitive teeth forever" to a numbered list (in a short reply)
    if m and len(selection.split()) <= BARE_NUMBER_WORDS and re.search(rf"(?:^|\s){m.group(1)}[.)]\s", options):
        return True
    offered = _offered(options)
    return any(stem(w) in offered for w in tokenize(selection) if len(w) >= 3 and w not in _CHOICE_WORDS)


def restates_pick(sent: str, options: str) -> bool:
    """A pick's "reason" that is the pick said again: an option named by number or place ("option 4, seems like a good
    fit for us") or in the offer's own words (half its content words or more: "the split schedule with a break at
    3, would work best for us", "private listings plus an inspection.")."""
    if _BY_PLACE.search(sent):
        return True
    offered = _offered(options)
    # words of four letters or more: a three-letter word of the offer ("bus") names an option, but too little of a
    # sentence to make it the pick said again
    words = [stem(w) for w in tokenize(sent) if len(w) > 3 and w not in _CHOICE_WORDS]
    return bool(words) and 2 * sum(w in offered for w in words) >= len(words)


def _offered(options: str) -> set[str]:
    """The offer's content words (stemmed; three letters or more: "bus", "500")."""
    return {stem(w) for w in tokenize(options) if len(w) >= 3}


def said_more(candidates: list[Candidate]) -> list[Candidate]:
    """``candidates`` without the picks whose reply also gave a standing item ("The salad. I'm vegan.": the reason,
    read by the rules or the learned gate, says more than the pick)."""
    said = {c.entry_ids[-1] for c in candidates if c.node_kind != "pick" and c.entry_ids}
    return [c for c in candidates if not (c.node_kind == "pick" and c.entry_ids and c.entry_ids[-1] in said)]
