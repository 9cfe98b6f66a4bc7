"""Precompiled patterns, lexicons and normalisers behind ``facts.py``.

Everything here is pure and import-cheap: regexes are compiled once at import
(no I/O), and the helpers only transform strings. ``facts.py`` owns the rule
order and the ``Fact`` type; this module owns the vocabulary.
"""

from __future__ import annotations

import re
from functools import lru_cache

F = re.IGNORECASE

# --------------------------------------------------------------------------
# Tokens (private: the shared tokenizer lives in tokenize.py)
STOP = frozenset(
    "a an the and or but if then so of to in on at by for with from into onto "
    "about as is are was were be been being am do does did have has had i me my "
    "mine myself we us our ours you your yours he him his she her hers it its "
    "they them their theirs this that these those there here what which who whom "
    "whose when where why how not no nor can could will would shall should may "
    "might must just also very really too than up down out over under again "
    "further once all any both each few more most other some such only own same "
    "s t don't i'm i've i'll i'd it's that's let's let now still currently".split()
)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def content_tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP]


def singular(word: str) -> str:
    if len(word) <= 3 or word.endswith(("ss", "us", "is", "ous")) or word in _NO_SINGULAR:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


_DETS = re.compile(r"^(?:the|a|an|my|our|your|his|her|their|this|that|these|those|some)\s+", F)
_OF_FOR = re.compile(r"^(.{1,30}?)\s+(?:for|of)\s+(.{1,30})$", F)
_ATTR_STOP = STOP | {"new", "current", "usual", "typical", "preferred", "per", "max",
                     "maximum", "minimum", "total", "overall", "main", "before", "after",
                     "during", "between", "around", "lately", "user", "their", "really"}
_NO_SINGULAR = frozenset("postgres kubernetes series species news physics mathematics economics "
                         "diabetes glasses jeans pants shorts clothes lens gas yes thanks always".split())
# Domain nouns that give a generic head ("budget", "limit") its context.
DOMAIN = frozenset(
    "hotel flight airfare ticket rent car rental meal dinner lunch breakfast food gift "
    "wedding trip vacation room apartment house laptop phone grocery restaurant "
    "train bus taxi uber hostel airbnb accommodation coffee wine concert event "
    "party furniture tv camera bike shoe dress suit book course class".split()
)
GENERIC_HEADS = frozenset("budget limit cap deadline price cost spend spending time".split())


def slug(phrase: str, max_tokens: int = 3) -> str:
    """Normalise a noun phrase to an attribute key: 'the Hotel Budgets' -> 'hotel_budget'."""
    p = phrase.strip().lower().strip(" .,:;!?\"'")
    p = _DETS.sub("", p)
    m = _OF_FOR.match(p)
    if m and len(m.group(1).split()) <= 2:  # "budget for hotels" -> "hotels budget"
        p = f"{_DETS.sub('', m.group(2))} {m.group(1)}"
    toks = [singular(w.replace("'s", "")) for w in _WORD.findall(p)]
    toks = [t for t in toks if t not in _ATTR_STOP and t]
    return "_".join(toks[:max_tokens])


def contextual(attr: str, sentence: str, near: tuple[int, int] | None = None) -> str:
    """Prefix a bare generic head ('budget') with the sentence's domain noun ('hotel').

    With ``near`` (a character span of ``sentence``, e.g. the money amount) the
    domain noun closest to that span wins, so in "anything you book for me:
    ... hotels under $200 a night" the budget is the hotels', not the book's.
    """
    if attr not in GENERIC_HEADS and attr not in {"price", "spend"}:
        return attr
    s = nearest_domain(sentence, near) if near is not None else domain_of(sentence)
    if s is not None:
        head = "budget" if attr in {"limit", "cap", "price", "cost", "spend", "spending"} else attr
        return f"{s}_{head}"
    return "budget" if attr in {"limit", "cap", "spend", "spending"} else attr


def nearest_domain(sentence: str, span: tuple[int, int]) -> str | None:
    """The domain noun of ``sentence`` closest to the character ``span`` (earlier one on a tie)."""
    best: tuple[int, str] | None = None
    for m in _WORD.finditer(sentence.lower()):
        s = singular(m.group(0))
        if s not in DOMAIN:
            continue
        gap = span[0] - m.end() if m.end() <= span[0] else max(0, m.start() - span[1])
        if best is None or gap < best[0]:
            best = (gap, s)
    return best[1] if best else None


def norm_value(value: str) -> str:
    return " ".join(_WORD.findall(value.lower().replace("$", " usd ")))


def domain_of(sentence: str) -> str | None:
    for w in _WORD.findall(sentence.lower()):
        s = singular(w)
        if s in DOMAIN:
            return s
    return None


# --------------------------------------------------------------------------
# Sentences and clauses
_ABBREV_END = re.compile(r"(?:^|\W)(?:mr|mrs|ms|dr|st|ave|vs|etc|e\.g|i\.e|approx|no|jr|sr)\.$", F)
SENT_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9$])|\n+")
CLAUSE_SPLIT = re.compile(
    r"\s*;\s+|,?\s+(?:and|but|so|plus)\s+(?=(?:I|I'm|I've|I'll|I'd|we|we're|we've|my|our)\b)|"
    r",\s+(?=(?:I|I'm|I've|I'll|I'd|we|we're|we've)\s)"
)
MARKDOWN = re.compile(r"^\s*(?:[-*+>#]+|\d{1,2}[.)])\s+|\*\*|__|`")
DISCOURSE = re.compile(
    r"^(?:(?:oh|ah|well|so|also|btw|anyway|actually|by the way|fyi|just so you know|"
    r"for (?:context|reference|the record)|honestly|basically|ok|okay|yeah|yes|"
    r"and|but|plus|hmm|um|alright|great|thanks|thank you|"
    r"(?:please\s+)?(?:note|remember|keep in mind|bear in mind|be aware)\s+that)\b[,!:]?\s*)+",
    F,
)


def split_sentences(text: str) -> list[str]:
    out: list[str] = []
    for part in SENT_SPLIT.split(text):
        part = part.strip()
        if not part:
            continue
        if out and _ABBREV_END.search(out[-1][-8:]):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


# --------------------------------------------------------------------------
# Sentences to skip
GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening|night)|thanks|thank you|"
    r"thx|ok|okay|sure|great|cool|nice|awesome|perfect|got it|sounds good|yes|no|yep|"
    r"nope|bye|goodbye|see you|cheers|welcome|you're welcome|no problem|np|lol|wow|"
    r"that's (?:great|helpful|perfect|awesome|all)|that helps|makes sense)"
    r"(?:\s+(?:there|so much|a lot|again|very much|everyone|all|you|for (?:the|your) \w+))*[\s!.,:)]*$",
    F,
)
REQUEST = re.compile(
    r"^(?:(?:can|could|would|will) you\b|please\b|help me\b|tell me\b|show me\b|give me\b|"
    r"i (?:was|am|'m) wondering\b|i'm wondering\b|do you (?:know|have|think)\b|"
    r"i(?:'d| would) (?:like|love) (?:to know|some|you|a few|any|more|help|suggestions|"
    r"recommendations|ideas|advice|tips)\b|i (?:need|want) (?:some|a few|your|help|"
    r"to know|advice|ideas|suggestions|recommendations|tips)\b|any (?:ideas|suggestions|tips)\b|"
    r"what about\b|how about\b|let me know\b|remind me\b)",
    F,
)
BOILERPLATE = re.compile(
    r"^(?:sure|certainly|of course|absolutely|great question|good question|i'd be (?:happy|glad)|"
    r"i would be (?:happy|glad)|i'm (?:happy|glad) to|happy to help|here's|here is|here are|"
    r"i hope (?:this|that) helps|hope (?:this|that) helps|let me know|feel free|as an ai|"
    r"i'm sorry|i am sorry|i apologi[sz]e|you're welcome|glad|no problem|"
    r"that's a great|that sounds|what a|it's great|i understand|i see|understood|noted|"
    r"in summary|to summari[sz]e|overall|enjoy|good luck|have a great|congratulations)\b",
    F,
)
# --------------------------------------------------------------------------
# Sentence mood (issue 25): what states no fact. A request (imperative, "let's ...", a verbless
# "a hotel near the venue"), a question without its "?", an acknowledgement or a leave-taking is
# said to the agent about this conversation; none of it is knowledge about the user or the project.
# An acknowledgement word with its punctuation before the rest ("Fine, book it", "Ugh. ...").
# a preamble that announces what follows and states nothing itself ("Quick note before we start", "One more thing:",
# "Heads up!"); "A quick reminder about my allergy" goes on to say something and is read
PREAMBLE = re.compile(r"^(?:(?:a|one)\s+)?(?:(?:quick|short|small|last|final|one more)\s+)?(?:note|question|thing|"
                      r"heads[- ]up|reminder|request)(?:\s+(?:before (?:we|you|I) (?:start|begin|go)|first|for you|"
                      r"here|then))?[\s.!:,]*$", F)
ACK_PREFIX = re.compile(
    r"^(?:(?:yes|yeah|yep|fine|right|sure|perfect|cool|ugh|ok|okay|alright|all right|good|nice|great|excellent|awesome|"
    r"got it|understood|noted|sorry|oops|hmm|right then|fair enough|sounds good|will do)\s*[,!.:;]\s*)+",
    F,
)
# Whole-sentence acknowledgements and reactions GREETING does not list.
ACK = re.compile(
    r"^(?:will do|fair enough|(?:that|this) works(?: for me)?|works for me|sounds (?:good|great|fine|perfect|right)|"
    r"all good|no worries|good to know|go ahead|do it|ship it|exactly|agreed|deal|correct|of course|"
    r"my bad|never ?mind|right,? (?:my|that's) (?:own |the )?\w+|(?:ok|okay|sure|yes|fine),? (?:go|do it|go ahead|book it)|"
    r"(?:i|we) (?:see|agree|understand)|(?:love|like) it|nice one|well done|good job)"
    r"(?:\s+(?:then|again|thanks|thank you|too))*[\s!.,:)]*$",
    F,
)
# Leaving the conversation, or putting its task off: "I have to run", "let's fix it next time".
_LEAVE_END = r"(?=\s*(?:$|[,.!;:]|-|\s(?:now|soon|for now|for today|in a (?:bit|minute|sec|second)|and|but|so|though|sorry)\b))"
LEAVE_TAKING = re.compile(
    r"^(?:(?:(?:i|we)(?:'ve| have)?\s+(?:got|have|need)\s+to|(?:i|we)\s+(?:gotta|must|should)|gotta|(?:i|we)(?:'ll| will)\s+have\s+to)\s+"
    r"(?:run|go|leave|head (?:out|off)|jump(?: off)?|bounce|dash|sign off|log off|hop off|get going)" + _LEAVE_END + r"|"
    r"(?:i'm|i am|we're|we are)\s+(?:off|heading (?:out|off)|signing off|logging off|done for (?:today|the day|now))"
    + _LEAVE_END + r"|"
    r"(?:talk|speak|chat|catch you|see you|see ya)(?:\s+(?:to|with)\s+you)?\s+(?:later|soon|tomorrow|next time|then)\b|"
    r"(?:ttyl|brb|bye|bye for now|good ?night|later)\b" + _LEAVE_END + r"|that's (?:all|it) for (?:now|today)\b)"
    r"|^(?:let's|let us|we(?:'ll| will| can)|i(?:'ll| will| can))\s+(?:have to\s+|just\s+)?(?:pick|continue|finish|fix|do|"
    r"handle|deal with|look at|look into|get back to|come back to|return to|sort|wrap|talk about|discuss|resume|"
    r"revisit|tackle)\s+(?:it|this|that)\s+(?:up\s+|out\s+)?(?:later|next time|another time|tomorrow|some other time)"
    r"\s*[.!,;]?\s*$",
    F,
)
# A base-form verb opening the clause, followed by what an instruction's object starts with.
IMPERATIVE = re.compile(
    r"^(?:(?:and|also|then|now|so|just|quickly|please|pls|kindly)\s+)*"
    r"(?P<verb>book|rebook|fly|take|fix|get|add|schedule|reschedule|note|find|send|push|deploy|make|put|move|cancel|"
    r"check|run|show|give|tell|remind|help|write|create|update|change|try|go|come|email|text|order|buy|reserve|"
    r"pick|choose|look|search|set|bring|hold|ship|merge|revert|roll|restart|stop|start|open|close|delete|remove|"
    r"draft|prepare|arrange|sign|pay|print|log|save|upload|download|install|build|review|summari[sz]e|"
    r"translate|list|compare|describe|explain|rotate|provision|grab|forward|share|invite|ping|confirm|"
    r"double-check|figure|sort|clean|drop|post|publish|renew|swap|switch|upgrade|downgrade|route|reply|respond)"
    r"\s+(?=(?:the|a|an|my|me|it|that|this|those|these|us|them|him|her|our|your|up|out|in|on|off|back|down|"
    r"over|all|some|any|both|another|one|to|from|for|with|at|home|again|now|first|ahead|everything)\b|(?-i:[A-Z0-9$]))",
    F,
)
# "let's <verb>" proposes an action; "let's use/go with X" (DECISION) states a choice and is kept.
HORTATIVE = re.compile(
    r"^(?:let's|let us)\s+(?!(?:use|go with|stick with|switch to|adopt|migrate to|standardi[sz]e on)\b)\w+", F)
# A request phrased as the speaker's wish for the agent to act. "I need to get my sneakers
# polished" and "I'd like to find a job" state the user's own need and are kept.
WANT_ACTION = re.compile(
    r"^(?:(?:i|we)(?:'d| would) (?:like|love|want) (?:you to|to (?:book|order|reserve|schedule)\b)|"
    r"(?:i|we) (?:need|want) you to\b|(?:could|can|may) (?:i|we) (?:get|have|book)\b)",
    F,
)
# A question without its "?": a wh-word with an auxiliary, or an auxiliary before its subject.
QUESTION_START = re.compile(
    r"^(?:(?:who|what|when|where|why|how|which)(?:\s+(?!i\b|we\b|you\b|they\b|he\b|she\b)\w+)?(?:'s|\s+(?:is|are|was|were|do|does|did|can|could|would|should|"
    r"will|about|if)\b)|(?:is|are|was|were|do|does|did|can|could|would|will|should|shall|have|has)\s+"
    r"(?:you|we|i|it|they|he|she|there|this|that|the|my|our|your)\b)",
    F,
)
# A verbless fragment that opens with an article or a count ("A hotel near the venue for Dec 1",
# "two nights in Porto, please"): an order or an answer, not a statement. Any auxiliary, pronoun
# or past form (FINITE) makes it a sentence.
FRAGMENT_START = re.compile(r"^(?:a|an|another|one more|some|one|two|three|four|five|the same)\s+\w", F)
_AUX = frozenset("is are was were am be been being has have had do does did will would can could should shall "
                 "may might must i we he she they it you there".split())
LABEL = re.compile(r"^(?P<k>[A-Za-z][\w' /-]{0,30}?)\s*:\s+(?P<rest>\S.*)$")


def has_finite_verb(text: str) -> bool:
    """True when ``text`` has an auxiliary, a subject pronoun, a known past form, or a known verb + -ed/-s."""
    for w in _WORD.findall(text.lower()):
        if w in _AUX or "'" in w or w in _KEEP_VERB:
            return True
        if w.endswith("ed") and (w[:-2] in VERBS or w[:-1] in VERBS or w[:-3] in VERBS):
            return True
        if w.endswith("s") and (w[:-1] in VERBS or (w.endswith("es") and w[:-2] in VERBS)):
            return True
    return False


# A tool outcome as the ledger writes it, ``name(args) -> outcome`` (store/tool_entries.py), and
# what an outcome that reports a failure in its own text starts with.
TOOL_RENDERING = re.compile(r"^\s*(?P<name>[\w.:/-]{1,200})\((?=[\[{)\"])")
TOOL_ERROR = re.compile(
    r"^\s*(?:failed\b|failure\b|error\b|err\b|exception\b|traceback\b|fatal\b|panic\b|denied\b|forbidden\b|"
    r"unauthori[sz]ed\b|not found\b|timeout\b|timed out\b|invalid\b|cannot\b|can't\b|could not\b|couldn't\b|"
    r"unable\b|refused\b|aborted\b)|traceback \(most recent call last\)|\bexit (?:code|status) [1-9]|"
    r"\bhttp [45]\d\d\b|\bstatus(?: code)?:? [45]\d\d\b",
    F,
)


FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'll|i'd|me|my|mine|we|we're|we've|our|us)\b", F)
DISTINCT = re.compile(r"\d|(?<=\s)[A-Z][\w-]+")

# --------------------------------------------------------------------------
# Rule patterns.  Values are captured up to a clause boundary.
_V = r"(?P<v>[^,;]{2,120}?)"
_END_BODY = r"\s*(?:,|;|$|\.\s|\.$|!|\bbecause\b|\bsince\b|\bas\b|\bwhich\b)"
END = _END = r"(?=" + _END_BODY + r")"
_NAME = r"(?P<n>[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+)?)"
RELATIONS = (
    r"dog|cat|pet|puppy|kitten|parrot|bird|hamster|rabbit|horse|fish|sister|brother|mom|"
    r"mother|mum|dad|father|wife|husband|partner|spouse|son|daughter|kid|child|baby|friend|"
    r"best friend|boss|manager|coworker|co-worker|colleague|roommate|neighbou?r|cousin|aunt|"
    r"uncle|grandma|grandmother|grandpa|grandfather|niece|nephew|girlfriend|boyfriend|"
    r"fianc[ée]e?|therapist|doctor|dentist|trainer|coach|teacher|mentor|landlord"
)
MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
NUMWORD = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|several|\d+)"

# Cheap prefilters: the costly rule regexes only run when these hit.
MY_HINT = re.compile(r"\b(?:my|our|named|called|call me)\b", F)
ID_HINT = re.compile(r"\b(?:number|no\.|id|code|num)\b|#", F)
MONEY_HINT = re.compile(r"[$€£]|\busd\b", F)
MY_NAME = re.compile(r"\b(?:my name is|call me|my name's)\s+" + _NAME, F)
REL_NAME = re.compile(
    r"\b(?:my|our)\s+(?:new\s+|little\s+|older\s+|younger\s+|old\s+)?(?P<r>" + RELATIONS
    + r")(?:'s name is|,? (?:named|called|is named|is called))?,?\s+(?-i:" + _NAME + r")",
    F,
)
NAMED = re.compile(
    r"\b(?:a|an|my|our)\s+(?:\w+\s+)?(?P<r>" + RELATIONS + r"|\w+)\s+(?:named|called)\s+(?-i:" + _NAME + r")",
    F,
)
PLACE = re.compile(
    r"\b(?:i|we)\s+(?:currently\s+|now\s+)?(?P<verb>live[sd]?|lived|work(?:ed)?|grew up|am from|'m from|"
    r"moved|relocated|study|studied)\s+(?P<prep>in|at|for|to|from|as an?)\s+" + _V + _END,
    F,
)
ID_NUMBER = re.compile(
    r"\b(?P<k>(?:[\w-]+\s+){0,2}(?:frequent[- ]flyer|loyalty|membership|member|rewards?|passport|"
    r"confirmation|booking|reservation|account|policy|order|tracking|license|licence|customer|"
    r"employee|student|insurance|ticket)\s+(?:number|no\.?|#|id|code|num))\s*(?:is|was|:|=|-)?\s*#?"
    r"(?P<v>[A-Za-z0-9][A-Za-z0-9-]{2,})",
    F,
)
ADDRESS = re.compile(
    r"\b(?P<v>\d{1,5}\s+(?:[A-Z][\w.]*\s+){1,3}(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|"
    r"Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|Terrace|Parkway)\b\.?(?:,\s*[A-Z][\w]+(?:\s[A-Z][\w]+)?)?)"
)
MY_KV = re.compile(
    r"\b(?:my|our)\s+(?P<k>[a-z][\w'-]*(?:\s+[\w'-]+){0,3}?)\s+(?:is|are|=|:)\s+(?:now\s+|currently\s+|still\s+)?"
    + _V + _END,
    F,
)
NOW_KV = re.compile(
    r"(?:^|\bthe\s+)(?P<k>[a-z][\w'-]*(?:\s+[\w'-]+){0,3}?)\s+(?:(?:is|are|has been|was)\s+now|"
    r"(?:has|have)\s+(?:been\s+)?(?:changed|moved|updated|increased|decreased|raised|lowered|bumped|"
    r"switched|set)\s+to|(?:was|were|is|got)\s+(?:changed|moved|updated|increased|decreased|raised|"
    r"lowered|bumped|switched|set)\s+to|(?:changed|moved|switched)\s+to)\s+" + _V + _END,
    F,
)
# "Caroline: Thanks, Mel!": a transcript line, the speaker's name then their words. The label is
# never a key; the words are read as the message. A "Key: value" line is kept as one when its value
# reads as a value ("Seat: 14C", "Budget: $500"), not as someone talking (a first- or second-person
# word, a question or exclamation, a greeting or an acknowledgement first, or a sentence of five words
# or more with a verb: "Caroline: Kids are amazingly resilient").
SPEAKER_LABEL = re.compile(r"^(?P<who>[A-Z][a-z]+(?:\s[A-Z][a-z]+)?):\s+(?P<said>\S.*)$", re.S)
UTTERANCE = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|you|you're|your|we|we're|our|us)\b|[!?]|"
    r"^(?:hi|hey|hello|thanks|thank|wow|oh|ah|aw+|yeah|yes|no|ok|okay|sure|great|haha|lol|omg|congrats)\b|"
    r"^(?=(?:\S+\s+){3,}\S).*\b(?:is|are|was|were|am|been|have|has|had|do|does|did|can|could|will|would)\b",
    F,
)
# A line's label that names a part of a reply, not a person ("Summary: I booked ...", "Plan: I will deploy
# on Friday"): such a line is read without its label, in its own role, and in nobody's name.
# "Yes: never book flights before 8am", "Also: my number is ...": an answer or a word of discourse before a colon,
# not a person's name on a transcript line
NOT_SPEAKER = re.compile(r"^(?:yes|yeah|yep|no|nope|ok|okay|sure|also|and|but|so|well|fine|right|thanks|hi|hello|hey|"
                         r"oh|ah|ps|btw|correction|again|done|note|update)$", F)
SECTION_LABEL = re.compile(
    r"^(?:summary|answer|result|results|plan|status|reason|option|options|recommendation|recommendations|next|"
    r"next steps?|steps?|details?|context|conclusion|overview|notes?|tips?|caution|important|reminder|todo|"
    r"fix|issue|problem|solution|question|response|reply|output|input|example|source|sources|important note|"
    r"bottom line|tl;?dr|edit|update|short answer|long answer|explanation|analysis|verdict|outcome|goal|task)$", F)
# Wishes said to the listener ("I hope you're okay", "Hope you have a great weekend", "Wishing you the best"):
# about the conversation, not knowledge. "I hope to visit Japan" states a plan and is not one of them.
WELL_WISHING = re.compile(r"^(?:(?:i|we)\s+)?(?:hope|hoping|wish|wishing)\s+(?:you|you're|your|y'all|all)\b", F)
# A name the clause is said to, not about: "I totally agree, Melanie", "Hey Caroline, ...". Only the
# note rule (a first-person clause kept for its distinctive words) looks through it: a name said to
# someone is no content of its own.
VOCATIVE = re.compile(
    r"^(?i:hey|hi|hello|oh|wow|aw+|yeah|yes|thanks|thank you|congrats|sorry)[\s,]+[A-Z][a-z]+\s*[,!.]\s*"
    r"|,\s*[A-Z][a-z]+\s*[!.?]*$")
COLON_KV = re.compile(r"^(?P<k>[A-Za-z][\w '/-]{0,38}?)\s*(?::|=)\s+(?P<v>\S.{0,118})$")
YOUR_KV = re.compile(r"\byour\s+(?P<k>[a-z][\w' -]{1,40}?)\s+(?:is|are)\s+(?P<v>[^,;]{2,80}?)" + _END, F)
ING_VALUE = re.compile(r"\w+ing\b|going\b|not\b", F)
PRONOUN_START = re.compile(r"(?:i|we|you|he|she|they|it|this|that)\b", F)
KV_KEY_BAD = re.compile(r"^(?:i|we|you|he|she|it|they|note|update|edit|ps|p\.s|tip|warning|example|q|a|step \d+|"
                        r"got it|noted|ok|okay|sure|understood|perfect|great|thanks|thank you|sounds good)$", F)
# "User said: ...", "My boss told me that ...": a reporting verb is not an attribute. ``REPORTED``
# splits a clause into the speaker and the reported clause (after a colon, a comma or "that");
# ``REPORTING_KEY`` refuses a "key: value" key that ends in a reporting verb.
_REPORTING = (r"said|says|say|told|tells|tell|mentioned|mentions|wrote|writes|noted|notes|stated|states|"
              r"explained|explains|added|adds|replied|replies|answered|answers|asked|asks|reported|reports|"
              r"confirmed|confirms|remarked|commented")
REPORTED = re.compile(
    r"^(?P<who>(?:the\s+)?user|i|we|he|she|they|(?:my|our|the)\s+[a-z][\w-]*(?:\s+[a-z][\w-]*)?|"
    r"[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)\s+(?:(?:just|also|then|once|already|had|has|have|earlier|again)\s+)*"
    r"(?:" + _REPORTING + r")(?:\s+(?:to\s+)?(?:me|us|you|them|him|her|the assistant))?"
    r"(?:\s+(?:earlier|today|yesterday|before|again))?(?:\s*[:,]|\s+that\b|\s+-)\s*(?P<c>\S.*)$",
    F,
)
REPORTING_KEY = re.compile(r"\b(?:" + _REPORTING + r"|shared|shares)(?:\s+(?:to\s+)?(?:me|us|you|them|him|her))?$", F)
USER_SPEAKER = frozenset({"user", "the user", "i", "we"})
# "the client office is at 27 Main Street": whose address it is, so it is not the user's ``address``.
ADDRESS_OWNER = re.compile(
    r"\b(?:the|my|our|their|his|her|your)\s+(?P<k>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,2}?)\s+"
    r"(?:is|are|was|were|(?:has|have)\s+moved|moved)\s+(?:now\s+)?(?:located\s+)?(?:at|to|in)\s+$",
    F,
)
OWN_ADDRESS = frozenset({"", "address", "home", "house", "place", "apartment", "flat", "home_address"})
# What a reply's list item says after its label when it gives advice ("Online event calendars: Check Eventbrite
# or Meetup", "Be kind to yourself: Remember that it's okay to have off days", "Support local venues: Frequent
# local bars ..."): the reader is told what to do, which is no value of the label. An agent's record keeps its
# values ("Flight: UA 8802, departs 7:40am", "Budget: $400 a night", "Status: fixed") and the rules it restates
# ("Rule: never book flights before 8am").
ADVICE_VALUE = re.compile(
    r"^(?:(?:also|just|then|simply|be sure to|make sure to|try to)\s+)?"
    r"(?:ask|avoid|bring|browse|check|choose|consider|contact|create|explore|find|focus|follow|frequent|get|"
    r"go|invest|join|keep|learn|limit|listen|look|make|opt|pack|pay|pick|plan|practice|practise|prioriti[sz]e|"
    r"reach|read|remember|research|seek|set|start|stay|stick|take|talk|track|try|use|visit|wear|write|"
    r"attend|book|compare|experiment|include|incorporate|reduce|increase|schedule|support|treat|allow|give|"
    r"let|note|think|suggest|recommend|encourage|ensure|inspect|share|imagine|place|add|combine|replace|spend|save|"
    r"cut|turn|be)\s+(?!(?:is|are|was|were|has|had)\b)\w",
    F,
)
# "Booked: UA 8802 ...", "Done: Lisbon Marriott ...": a report of one action (an event), not the
# current value of a revisable attribute, so two bookings never supersede each other.
ACTION_KEY = re.compile(
    r"^(?:all\s+)?(?:set|done|booked|re-?booked|reserved|confirmed|ticketed|scheduled|rescheduled|"
    r"cancell?ed|ordered|purchased|bought|paid|sent|submitted|updated|changed|saved|added|removed|"
    r"deleted|created|registered|completed|finished|fixed|deployed|shipped|released|checked[- ]in)$",
    F,
)
# The same report without its colon, as an agent writes it: "Booked LH 455 on Dec 1, seat 27C",
# "I booked Motel One Alexanderplatz at $165 a night" (the verb, then a name or a number).
ACTION_REPORT = re.compile(
    r"^(?:(?:i|we)(?:'ve| have)?\s+(?:just\s+|also\s+)?)?(?P<k>booked|re-?booked|reserved|ticketed|scheduled|"
    r"rescheduled|cancell?ed|ordered|purchased|bought|added|registered|deployed|shipped|released)\s+"
    r"(?P<v>(?-i:[A-Z0-9])[^;]{2,200})$",
    F,
)
OWN_USE = re.compile(
    r"\bi(?:'ve| have)?\s+(?:just\s+|recently\s+|finally\s+|also\s+)?(?P<verb>have|own|bought|got|"
    r"purchased|use|used|been using|am using|'m using|drive|ride|adopted|ordered|installed|"
    r"signed up for|subscribed to|joined|picked up)\s+(?:a|an|the|my|our|some|this)?\s*"
    r"(?!back\b|to\b|from\b|into\b|up\b|off\b|out\b|home\b|there\b|it\b|used\b|that\b|married\b|"
    r"engaged\b|lost\b|sick\b|better\b|in\b|on\b|rid\b|ready\b|to\b)" + _V + _END,
    F,
)
PREF_LIKE = re.compile(
    r"\b(?:i|we)\s*(?:really\s+|absolutely\s+|definitely\s+|much\s+|strongly\s+|generally\s+|"
    r"usually\s+|(?:do|still)\s+)?(?P<verb>prefer|like|love|enjoy|adore|hate|dislike|detest|"
    r"'ve been (?:really |so |very )?into|have been (?:really |so |very )?into|can't stand|cannot stand|don't like|do not like|don't enjoy|avoid|am into|'m into|"
    r"am a (?:big )?fan of|'m a (?:big )?fan of|am not a fan of|'m not a fan of)\s+" + _V + _END,
    F,
)
FAVOURITE = re.compile(
    r"\b(?:my|our)\s+(?:all-time\s+|absolute\s+)?favou?rite\s+(?P<k>[\w' -]{2,30}?)\s+(?:is|are|has to be|would be)\s+"
    + _V + _END,
    F,
)
HABIT = re.compile(r"\b(?:i|we)\s+(?P<pol>always|never|usually|rarely|typically|tend to)\s+" + _V + _END, F)
CONSTRAINT_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?P<pol>never|always|don't|do not|avoid|make sure(?: to| that)?|only|must|"
    r"no more than|keep)\s+" + _V + _END,
    F,
)
CONSTRAINT_MODAL = re.compile(
    r"\s(?P<pol>must not|mustn't|must|has to|have to|needs to|need to|should never|"
    r"cannot|can't|can only|should only)\s+(?P<v>be\b[^,;]{1,100}?|[^,;]{2,100}?)" + _END,
    F,
)
MONEY_LIMIT = re.compile(
    r"(?P<v>(?:under|below|less than|no more than|not more than|at most|max(?:imum)?|up to|within|"
    r"cap(?:ped)? at|around|about|over|above|at least)?\s*(?:\$|€|£|usd\s?)\s?\d[\d,.]*k?"
    r"(?:\s*(?:usd|dollars|euros|pounds))?(?:\s*(?:a|per|/)\s*(?:night|day|week|month|year|person|head|hour))?)",
    F,
)
BUDGET_WORD = re.compile(r"\b(?:budget|under|below|less than|no more than|at most|max|cap|up to|within|spend|afford)\b", F)
ONLY_WHEN = re.compile(
    r"\bonly\s+(?:\w+\s+){0,2}?(?P<v>(?:on|in|during|at|before|after|between|via|by|with)\s+[^,;]{2,60}?)" + _END, F
)
NO_LATER = re.compile(
    r"\b(?P<pol>no later than|no earlier than|not before|not after|by no later than)\s+(?P<v>[^,;]{1,40}?)" + _END, F
)
DECISION = re.compile(
    r"\b(?:(?:we|i)(?:'ve| have)?\s+(?:finally\s+)?(?:decided|agreed)\s+(?:to\s+(?:go with|use|adopt|switch to|"
    r"move to|stick with|stay with|migrate to)|on)|(?:we|i)(?:'ll| will| shall| are going to|'re going to)\s+"
    r"(?:go with|use|adopt|switch to|stick with|migrate to)|let's\s+(?:use|go with|stick with|switch to|"
    r"adopt|migrate to)|(?:we|i)(?:'re| are)\s+(?:going with|switching to|migrating to|standardi[sz]ing on)|"
    r"we\s+use|(?:we|i)\s+(?:chose|picked|selected|settled on|went with|switched to|opted for)|"
    r"(?:the )?decision (?:is|was)(?: to use| to go with)?:?)\s+(?:the\s+)?"
    r"(?P<v>[^,;]{1,80}?)(?=\s+(?:for|as|in|on|to|over|instead|rather|because|since)\b|" + _END_BODY + ")",
    F,
)
DECISION_FOR = re.compile(r"\b(?:for|as)\s+(?:the|our|its|their)?\s*(?P<k>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)", F)
DECIDED_TO = re.compile(r"\b(?:we|i)(?:'ve| have)?\s+decided\s+(?:to|that)\s+(?P<v>[^,;]{3,100}?)" + _END, F)
PROGRESS = re.compile(
    r"\b(?P<s>deployed|shipped|released|launched|finished|completed|done with|wrapped up|failed|fixed|"
    r"resolved|merged|migrated|published|submitted|passed|broke|crashed|set up|installed|upgraded|"
    r"rolled back|reverted|finalized|finalised|is (?:done|complete|live|ready|broken|blocked|finished)|"
    r"are (?:done|complete|live|ready|broken|blocked|finished))\b",
    F,
)
PLAN = re.compile(
    r"\b(?:(?:i|we)(?:'m| am|'re| are)\s+(?:going to|gonna|planning (?:to|on)|thinking (?:of|about)|"
    r"hoping to|about to|scheduled to|supposed to)|(?:i|we)\s+(?:plan|intend|hope|aim|expect)\s+to|"
    r"(?:i|we)(?:'ll| will)(?! use\b| go with\b)|my plan is to|our plan is to)\s+(?P<v>[^,;]{3,120}?)" + _END,
    F,
)
FUTURE = re.compile(
    r"\b(?:tomorrow|next\s+(?:week|weekend|month|year|summer|spring|fall|winter|" + WEEKDAY
    + r")|in\s+" + NUMWORD + r"\s+(?:days?|weeks?|months?))\b",
    F,
)
DATE_ISO = re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b")
DATE_MD = re.compile(r"\b(?P<mon>" + MONTH + r")\.?\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y>\d{4}))?", F)
DATE_DM = re.compile(r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>" + MONTH + r")\b(?:,?\s+(?P<y>\d{4}))?", F)
DATE_REL = re.compile(
    r"\b(?P<rel>yesterday|today|tonight|this (?:morning|afternoon|evening|week|weekend|month|year)|"
    r"last (?:night|week|weekend|month|year|summer|spring|fall|autumn|winter|time|" + WEEKDAY + r")|"
    r"this past (?:week|weekend|month|" + WEEKDAY + r")|(?P<n>" + NUMWORD + r")\s+(?P<unit>days?|weeks?|months?|years?)\s+ago|"
    r"earlier (?:today|this (?:week|month|year))|the other day|over the weekend|"
    r"on " + WEEKDAY + r"|in (?:early |late |mid-?)?" + MONTH + r"\b(?:\s+\d{4})?|in \d{4}|"
    r"(?:this|last) (?:jan(?:uary)?|feb(?:ruary)?|march|april|june|july|august|september|october|november|december))\b",
    F,
)
MONTHS = {m: i for i, names in enumerate(
    [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
     ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
     ("oct", "october"), ("nov", "november"), ("dec", "december")], start=1) for m in names}
NUMWORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a few": 3, "a couple of": 2, "several": 3}

# value -> decision attribute, for "we'll use Postgres" without an explicit "for X"
TECH_CATEGORY = {
    **dict.fromkeys("postgres postgresql mysql sqlite mongodb mongo dynamodb mariadb cockroachdb "
                    "cassandra supabase firestore".split(), "database"),
    **dict.fromkeys("redis memcached valkey".split(), "cache"),
    **dict.fromkeys("kafka rabbitmq sqs nats pubsub celery".split(), "queue"),
    **dict.fromkeys("react vue svelte angular nextjs next.js".split(), "frontend"),
    **dict.fromkeys("aws gcp azure heroku vercel netlify fly.io digitalocean".split(), "hosting"),
    **dict.fromkeys("python go golang rust java typescript javascript kotlin ruby".split(), "language"),
    **dict.fromkeys("django flask fastapi rails express spring".split(), "framework"),
    **dict.fromkeys("docker kubernetes k8s nomad".split(), "deployment"),
    **dict.fromkeys("github gitlab bitbucket".split(), "repository_host"),
    **dict.fromkeys("jest pytest mocha vitest".split(), "test_framework"),
}
PROJECT_SUBJECT = re.compile(
    r"\b(?:the\s+)?(?P<s>[A-Z][\w-]+)\s+(?:project|app|service|repo|repository|api|backend|frontend|"
    r"codebase|pipeline|cluster)\b|\b(?:for|in|on)\s+(?P<t>[A-Z][a-z][\w-]+)\b(?!\s+[A-Z])"
)
NOT_SUBJECT = frozenset(
    "i the we our my this that it monday tuesday wednesday thursday friday saturday sunday "
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec today tomorrow yesterday".split()
)

# First-person -> third-person rewrite for readable fact statements. A rewrite that is not
# certain keeps the user's own words: "I <word>" is conjugated only when <word> is a known verb
# (``VERBS``, a past form, a modal), and a clause with any "I" left over is returned unchanged, so
# "I the client office ..." never becomes "User thes client office ...".
_ADV = (r"just|also|really|usually|often|always|never|still|recently|finally|actually|already|"
        r"currently|sometimes|mostly|normally|generally|typically|definitely|totally|absolutely|"
        r"rarely|seldom|occasionally|frequently|barely|hardly|even|only|almost|probably|honestly|"
        r"personally|mainly|now|then|once|regularly|certainly|truly|strongly|kind of|sort of")
_I_VERB = re.compile(r"\bI((?:\s+(?:" + _ADV + r"))*)\s+([a-z]+)\b")
_KEEP_VERB = frozenset(
    "can could will would should might must may shall did was got went bought took made saw met "
    "had said found left came ran read ate drove flew gave told thought felt began became kept lost "
    "paid put sent spent sold won wrote heard held brought caught taught built chose fell forgot knew "
    "led lent slept sat stood swam hit cut set let quit rode".split()
)
# Base forms "I <verb>" is conjugated from ("I need" -> "User needs"); anything else is kept as said.
VERBS = frozenset("""
accept access add admire adopt advise afford agree aim allow answer appreciate apply arrange arrive ask
attend avoid bake be believe belong bike book borrow bring browse build buy call camp care carry catch
change charge chat check choose clean climb close coach code collect come commute compare complete
consider cook copy cost count cover craft create cycle dance deal decide delete deliver depend deploy
design develop die dine dislike do donate draw dream dress drink drive drop earn eat edit email enjoy
enter exceed exercise expect experience explore face fail feed feel fight fill find finish fish fit fix fly focus
follow forget garden get give go grow guess hang hate have head hear help hike hire hold hope host hunt
imagine improve include install intend invest join jog keep kayak know knit lack launch lead learn
leave lend let lift like listen live look lose love maintain make manage mean meditate meet mention
migrate mind miss move need note notice offer open order organize organise own paint pack pass pay
perform pick plan plant play practice practise prefer prepare print proceed promise protect publish pull
purchase push put read realize realise receive recommend record recycle refuse relax remember rent
repair repeat reply report require research reserve rest return ride rock row run save say schedule
see seem sell send serve set share shop should sing sit skate ski sleep smoke snowboard speak spend
stand start stay stop store stream study subscribe succeed suffer suggest supply support surf swim switch take
talk teach tend test text think train travel try turn understand update upgrade use visit volunteer
wait wake walk want watch wear wish wonder work worry write
""".split())
_IRREG = {"have": "has", "do": "does", "go": "goes", "am": "is", "be": "is"}
_SIMPLE_SUBS = [
    (re.compile(r"\bI(?:'m| am)\b"), "User is"), (re.compile(r"\bI(?:'ve| have)(?= \w+(?:ed|en|ne|wn|t|ght)\b)"), "User has"),
    (re.compile(r"\bI've\b"), "User has"), (re.compile(r"\bI'll\b"), "User will"),
    (re.compile(r"\bI'd\b"), "User would"), (re.compile(r"\bI don't\b"), "User doesn't"),
    (re.compile(r"\bI haven't\b"), "User hasn't"), (re.compile(r"\bI(?=\s+(?:can't|cannot|won't|didn't|wasn't|couldn't|wouldn't|shouldn't)\b)"), "User"),
    (re.compile(r"\bmyself\b", F), "themselves"),
    (re.compile(r"^[Mm]y\b"), "User's"), (re.compile(r"\bmy\b", F), "their"), (re.compile(r"\bme\b"), "them"),
]
_LONE_I = re.compile(r"\bI\b")


def _conj(verb: str) -> str:
    if verb in _IRREG:
        return _IRREG[verb]
    if verb in _KEEP_VERB or (verb.endswith("ed") and verb not in VERBS):  # a past form ("need" is not)
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _user_verb(m: re.Match) -> str:
    verb = m.group(2)
    if verb in VERBS or verb in _KEEP_VERB or (verb.endswith("ed") and not verb.endswith("eed")):
        return f"User{m.group(1)} {_conj(verb)}"
    return m.group(0)  # not a verb we know: left as said (and the clause with it, below)


@lru_cache(maxsize=8192)
def third_person(clause: str) -> str:
    """'I just got back from my trip' -> 'User just got back from their trip'.

    Returns ``clause`` unchanged when any "I" in it cannot be rewritten with certainty
    ("I prefers ...", "I the ...", "I-95", "I/O"): the user's own words beat a garbled rewrite.
    """
    out = clause
    for pat, rep in _SIMPLE_SUBS:
        out = pat.sub(rep, out)
    out = _I_VERB.sub(_user_verb, out)
    if _LONE_I.search(out):
        return clause
    return out[:1].upper() + out[1:]
