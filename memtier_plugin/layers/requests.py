"""Whether a prompt asks for a choice: the kind of request a user's standing preferences bear on.

A preference is said once and applies for good, but only to the decisions it
is about: "I avoid graphic violence" bears on "What shows would you recommend
for this weekend?" and on "Book two tickets for Saturday", not on "Why does
this C++ loop overflow?". The embedding cosine of prompt and preference cannot
tell these apart on its own (a coding question and a preference about
programming courses share words and topics), so calibration
(:mod:`..recall.calibration`) also reads the prompt's request type:
``asks_for_choice`` is 1.0 when the prompt asks memory's owner to be advised
or served (a recommendation, a suggestion, options, ideas, what to pick, plan,
book, buy or order; or an act in the world told in the imperative: "Fly out
from SFO on the 9th", "can you push it to production?"), else 0.0 (also for a single question about what a
named person did, said or likes: "Why did Caroline choose the agency?"). It is one feature among the others, weighed by
the fitted model: an item that shares a prompt's topic and embedding closely
is still delivered to a prompt that asks for nothing (the release-notes style
to "write the release notes of 2.4", workspace-fixtures/steps), one that only
loosely matches is not.

The cues are English request forms, not any benchmark's topics; a prompt in
another language reads 0.0 and is scored by its other signals, as before.
"""

from __future__ import annotations

import functools
import re

from ..tokenize import tokenize

# words of worth: what the user wants a thing to be ("a great outing", "a quick, healthy lunch", "an ideal routine")
_WORTH = (r"great|fun|nice|good|healthy|quick|easy|comfortable|efficient|romantic|ideal|perfect|cheap|affordable|"
          r"decent|solid|reliable|relaxing|cozy|safe|simple|memorable|unique|authentic|scenic|quiet|practical|"
          r"budget-friendly|family-friendly|kid-friendly|low-key|hearty|comforting|fresh|suitable|worthwhile|"
          r"stylish|elegant|sturdy|durable|versatile|spacious|charming|peaceful")
# what a user may be choosing to do ("thinking of getting a dog", "thinking about trading in my car")
_CHOOSING = (r"(?:getting|buying|adopting|trying|switching|trading|taking up|learning|renting|upgrading|leasing|"
             r"booking|joining|moving)")
# advice and options asked for ("what would you recommend", "any tips", "which one should I take")
_ADVICE = (r"recommend\w*|suggest\w*|advice|advise|ideas?|options?|tips?|alternatives?|"
           r"(?:should|could|can|shall) (?:i|we)|(?:i|we) should|help me|looking for|what are some|"
           r"ways? to|ways? for (?:\w+ ){1,2}to(?=[^.!?]*\?)|"
           r"(?:where|which|what) (?:\w+ )?(?:should|would|could) (?:i|we)|any good|best|good|favou?rite|"
           # what would fit the user ("Which one would be easier to care for?", "What would suit me?", "What
           # supplements would help my memory?"), a dish or thing they can make; asked, not told: a way for them to,
           # the places not to miss; a recipe for them
           r"(?:which|what)(?: \w+){0,2} (?:would|will|might) (?:suit|fit|help|work (?:for|in|well)|be (?:best|"
           r"better|easier|easiest|easy|good|ideal|right))|suits? me|for someone like me|"
           r"what(?:'s| is) something (?:i|we) (?:can|could|might|should)\b|"
           r"what(?:'s| is| are) (?:a|an|some)(?: [\w-]+){1,3} (?:i|we) (?:can|could|might) (?:make|cook|do|try)|"
           r"must-(?:try|see|visit|do|eat|have|read|watch|hear|buy)(?=[^.!?]*\?)|"
           # what is worth doing, asked ("What sports events are worth seeing in Spain?")
           r"(?:are|is) (?:\w+ )?worth (?:seeing|visiting|trying|doing|watching|reading|buying|a visit)(?=[^.!?]*\?)|"
           r"(?:give|send|show) (?:me|us) (?:a|an|some)(?: [\w-]+){0,3} recipes?|"
           # a thing of a kind the user would like, asked by what it should be ("What's a great baseball outing?",
           # "What's a quick, healthy lunch I can bring?", "What would be a romantic place to stay?", "What dog
           # breed would make a great trail companion?"): an asked question with an adjective of worth in it
           rf"(?:what|which)(?:'s| is| are| would be| might be|(?: [\w-]+){{0,3}} (?:would|will|might) make)"
           rf"(?: (?:a|an|some|the))?(?: [\w-]+,?){{0,3}}? (?:{_WORTH})\b(?=[^.!?]*\?)|"
           # the kind named first ("Which breeds are great with kids?", "What shoes are comfortable for standing all
           # day?")
           rf"(?:what|which)(?: [\w-]+){{1,2}} (?:is|are) (?:\w+ )?(?:{_WORTH})\b(?=[^.!?]*\?)|"
           # things of a kind asked for ("Any recipes?"; not "Any new games you're into?", a question about the
           # listener), a choice asked about
           r"any(?: [\w-]+)? (?:recipes?|dishes|picks|spots|suggestions)(?=[^.!?]*\?)|choices?(?=[^.!?]*\?)|"
           # something made for the user, asked of the agent ("Can you create a playlist for my road trip?", "Could
           # you provide some routines I can follow at home?")
           r"(?:can|could|would|will) you (?:please )?(?:create|make|put together|provide|design|compose|curate|"
           r"come up with|draw up|build)(?: [\w-]+){0,6} (?:for (?:me|my|us|our)\b|(?:i|we) (?:can|could) )|"
           # asked the way people ask each other, not the way a form asks (a fresh author's questions, 2026-12-07):
           # what would help or fit ("What can help?", "What kind of dog fits a busy family?", "Which streaming
           # service is right for me?", "What kind of plants would do well in a dark apartment?"), what is there to
           # do ("What's worth doing?", "What's there to do in Denver?", "What do people usually do in Kyoto?",
           # "Where do people usually stay in Paris?"), where to start or go ("Where do I start?", "Where to eat?"),
           # what the agent would do or point to ("what would you do?", "a laptop you'd point me to"), thoughts asked
           # for ("Thoughts?", "Any thoughts on where to go?"), what should be ("What should be on the menu?")
           r"(?:what|anything|something) (?:\w+ ){0,2}(?:can|could|would|might|will) help(?=[^.!?]*\?)|"
           r"(?:fits?|suits?) (?:a|an|me|us|my|our)\b(?=[^.!?]*\?)|(?:would|will|could|might) do well\b(?=[^.!?]*\?)|"
           r"(?:right|best|ideal) for (?:me|us)\b(?=[^.!?]*\?)|"
           r"what(?:'s| is) (?:\w+ )?worth\b(?=[^.!?]*\?)|what(?:'s| is) there to (?:do|see|eat|try)|"
           r"things to (?:do|see|eat|try)\b(?=[^.!?]*\?)|"
           r"(?:what|where) do (?:people|locals|folks|tourists|visitors) (?:\w+ )?(?:do|stay|eat|go)\b(?=[^.!?]*\?)|"
           r"where (?:do|should|can) (?:i|we) (?:start|begin)|where to(?:\s+\w+)?(?=\s*\?)|"
           r"(?:what|where|which) would you (?:do|go|pick|choose|get|order|try|eat|stay|take)\b|point (?:me|us) (?:to|toward)|"
           r"your go-to\b|any (?:strateg(?:y|ies)|pointers)\b|"
           r"thoughts(?=\s*\?)|any thoughts on (?:where|what|which|how)|"
           r"(?:what|which) (?:\w+ )?should (?:be|go)\b(?=[^.!?]*\?)|"
           # an opinion asked on an option, or on what to do ("What do you think of cruises for a family
           # vacation?", "What do you think I should do?"; not "What do you think of this?", the listener's thing),
           # an intention to choose told as a thought under way ("I've been thinking about getting a dog", "Thinking
           # of trading in my car."; not "I was thinking about getting one", "She's thinking of adopting")
           r"what do you think (?:of|about)\b(?! (?:it|this|that|these|those|them|him|her)\b)(?=[^.!?]*\?)|"
           r"what do you think (?:i|we) should\b|"
           rf"(?:(?:i've been|i have been|i'm|i am|we're|we are|we've been) |^|(?<=[.!?] ))thinking (?:of|about) "
           rf"{_CHOOSING}\b")
# errands done on the user's behalf, where their standing choices apply ("book me a flight", "plan our trip")
# ("book" as a verb only: "book me a flight", "book two tickets", not "read the book" or "what book did she like";
# "plan" and "schedule" alike: "plan our trip", "planning a weekend", "schedule a call", not "the project plan", "the
# planned publishing schedule", "stay on this schedule", nor a quiz's "As a project manager, you plan the release
# dates", said of a "you" that is no one asked: the inter chats' pasted coursework was read as asking); a change of
# plans revises an errand under way ("Change of plans: after Lisbon I'm going to Porto for two nights")
_OBJECT = r"(?:me|us|him|her|them|it|a|an|the|my|our|this|that|these|those|one|two|three|four|some|\d+)"
_ERRANDS = (r"(?:(?<=\bcan you )|(?<=\bcould you )|(?<=\bwould you )|(?<=\bwill you )|(?<!\byou ))"
            r"plan(?:ning|s)?(?=\s+(?!(?:is|was|are|were|has|had|will|would|should|could|can|of|that|which|and|or|"
            r"in|on)\b)[a-z])|changes? (?:of|to|in) (?:the |my |our )?plans?|"
            rf"book(?=\s+{_OBJECT}\b)|booking|"
            rf"reserve|order(?! to\b)|buy|purchase|pick|choose|find me|get me|schedule(?=\s+(?:{_OBJECT}|time)\b)")
# a thing needed, wanted or sought, said rather than asked ("I need a gift for my sister's birthday.", "I'd like a
# new hobby that gets me off the couch", "I'm looking to get in shape", "I'm stuck on what to get her"), time or a
# place to make something of ("How do I spend a layover in Istanbul?", "make my small apartment feel bigger"):
# requests for a choice unless they are about code, tools or text ("I need a function that parses dates"), which
# ask for knowledge. "How do I ...?" asks for either ("How do I meet people?", "How do I cite a website in APA
# format?"): the words do not tell them apart, the prompt's embedding does (:mod:`.asking`)
_WANTS = re.compile(
    r"\b(?:(?:i|we) need (?:a |an |some )?(?:new |good )?[\w-]+(?: [\w-]+)? (?:for|to wear)\b|(?:i|we) need (?:a )?new\b|"
    r"(?:i'd|i would|we'd|we would) (?:like|love) (?:a|an|some)\b|"
    r"(?:i'm|i am|we're|we are) (?:looking to|hosting)\b|"
    r"how (?:do|would|should) (?:i|we) spend\b|what to (?:get|buy|give|wear|cook|make|bring|eat|order|read|watch|see|pack)\b|"
    r"(?:which|what)(?: [\w-]+){0,3} (?:is|are|would be) (?:the )?(?:easiest|best|simplest|safest|most [\w-]+)\b"
    r"(?=[^.!?]*\?)|make (?:my|our) (?:[\w-]+ ){1,3}(?:feel|look)\b|keep (?:my|our|the|everyone)(?: [\w-]+){0,2} "
    r"(?:entertained|busy|occupied|happy)\b)", re.IGNORECASE)
# code, tools or text: a request about them asks for knowledge, whatever its words of wanting (picks.py reads code
# alike): code's marks, a file name or an identifier ("parser.py", "max_items"), or a word of the trade that names
# nothing else (not "app", "build" or "windows": "I need a good app for tracking runs" asks for a choice)
_TECHNICAL = re.compile(
    r"[{};`]|\(\)|\b\w+\.(?:py|js|ts|go|rs|java|cpp|rb|sh|ya?ml|json|toml|sql|md|csv|html|css|txt)\b|\b[a-z]+_[a-z_]+\b|"
    r"\b(?:code|function|method|class|variable|error|exception|bug|compile[rd]?|script|python|java|javascript|"
    r"typescript|rust|golang|sql|query|regex|api|json|yaml|csv|html|css|array|string|integer|loop|database|server|"
    r"git|bash|shell|terminal|command line|cli|excel|spreadsheet|formula|algorithm|library|package|framework|deploy|"
    r"install|configure|config|docker|container|kubernetes|flask|django|react|npm|pip|linux|macos|repo|repository|"
    r"commit|branch|merge|rebase|debug|endpoint|backend|frontend|pytest|test suite|stack trace|dataframe|pandas|numpy|"
    r"migration|schema|essay|sentence|paragraph|translate|equation|grammar)s?\b", re.IGNORECASE)
_CUE = re.compile(rf"\b(?:{_ADVICE}|{_ERRANDS})\b", re.IGNORECASE)
# errands in the imperative, as an agent is told them ("Fly out from SFO on the 9th", "Last piece: fly me home",
# "can you push it to production?"): a verb of acting in the world for the user where a request starts. Only
# there: "how do I deploy a Flask app?" asks for knowledge, not for an act.
_ACTS = (r"fly|travel|drive|ship|send|pay|rent|hire|cancel|reschedule|arrange|deploy|push|release|roll out|"
         r"install|renew|upgrade|register|sign (?:me )?up|check (?:me )?in")
_REQUEST_START = r"(?:^|[.!?:;]\s+|\b(?:please|can you|could you|would you|will you|go ahead and|let's|let us|then)\s+)"
_ACT = re.compile(rf"{_REQUEST_START}(?:{_ACTS})\b", re.IGNORECASE | re.MULTILINE)
# a pick among options the agent laid out, told as the agent is told it ("Infante Sagres this time", "Take the
# United one", "Let's go with the second"): the user's choice, which their standing preferences bear on
_PICK = re.compile(rf"\b(?:this time|the (?:\w+ )?one)\b(?![^.!?]*\?)|{_REQUEST_START}(?:take|go with|let's go with)\s+"
                   rf"(?:the|option|that|this)\b", re.IGNORECASE | re.MULTILINE)
# an errand continued by a noun phrase alone, as the next prompt of a request ("And a hotel near the venue for Dec 1
# to Dec 4.", "Also two tickets for Sunday."): "and / also / plus" and a thing at the prompt's start, told with no
# verb of a story ("And a car was waiting for us." is told, not asked)
_CONTINUED = re.compile(r"^\s*(?:and|also|plus)(?: also)?,? (?:a|an|some|one|two|three|four)\b"
                        r"(?![^.!?]*\b(?:is|was|were|are|am|has|had|did|does|do|went|came|got|said|told|made)\b)",
                        re.IGNORECASE)
MAX_CHARS = 2000  # a pasted document is read at its start and its end only, where a request is
# a question about what someone else did, said or likes ("Why did Caroline choose the agency?", "What book did
# Melanie recommend?", "What are Caroline's plans for the summer?") asks for a fact about them, not for a choice
# of the user's: its subject is a named third party (capitalised; I, we and you are the user and the agent; "How
# should I explore Tuscany's hill towns?" is the user's)
_NOT_US = r"(?!(?:I|We|You|Me|Us)\b)"
_ABOUT_SOMEONE = re.compile(
    rf"^\s*(?:\w+\s+){{0,4}}?(?i:did|does|do|is|are|was|were|has|have|had|would|will|might|may)\s+{_NOT_US}"
    rf"[A-Z][a-z]+\b(?!\s*,)|"
    rf"^\s*(?i:what|which|how|why|when|where|who)\s+(?:(?!(?i:i|we|you)\b)\w+\s+){{0,4}}?{_NOT_US}[A-Z][a-z]+'s\b")


# a quiz or coursework pasted to be answered ("3.Question 3 ... 1 pointOnly the last", "Select all that apply"):
# it asks for the answer, never for the user's own choice
_QUIZ = re.compile(r"\bquestion\s?\d+|\b1 point|\bselect all that apply\b|\b(?:which|what) of the following\b",
                   re.IGNORECASE)


def asks_for_choice(prompt: str) -> float:
    """1.0 when ``prompt`` asks for a recommendation, options or an errand done for the user, else 0.0."""
    if not prompt:
        return 0.0
    text = _bounded(prompt)
    if about_someone(text) or _QUIZ.search(text):
        return 0.0
    if _CUE.search(text) or _ACT.search(text) or _PICK.search(text) or _CONTINUED.search(text):
        return 1.0
    return 1.0 if _WANTS.search(text) and not _TECHNICAL.search(text) else 0.0


def _bounded(prompt: str) -> str:
    """A pasted document is read at its start and its end only (MAX_CHARS each), where a request is."""
    return prompt if len(prompt) <= 2 * MAX_CHARS else prompt[:MAX_CHARS] + "\n" + prompt[-MAX_CHARS:]


def about_someone(text: str) -> bool:
    """A single question whose subject is a named third party ("When did Melanie read the book?")."""
    t = text.strip()
    if not t.endswith("?") or re.search(r"[.!?]\s", t[:-1]):
        return False
    return _ABOUT_SOMEONE.search(t) is not None


# ---- a stated scope: the kind of request a standing item was said for ------------------------------------------
# "Some ground rules for anything you book for me: an aisle seat, vegetarian meals ...", "whenever you order food
# for me, ...": the user binds what follows to a kind of errand the agent runs for them (MemSidecar §3.2: a
# knowledge node records the conditions under which it applies). The scope is the phrase as said; its verb names
# the kind, and the prompts of that kind are errands (``asks_for_choice``) that name it or its usual objects.
# Only what the user tells the agent ("you"): "I love trying new foods when I travel" is a preference about
# travel, found by its words, not a rule for every booking.
_SCOPE_VERBS = r"book|reserve|order|buy|purchase|plan|arrange|schedule|travel|fly"
SCOPE = re.compile(
    rf"\b(?:for|with|on|in|about) (?:anything|everything|whatever|all|any(?: \w+)?|every \w+) (?:that )?you "
    rf"(?:{_SCOPE_VERBS})\w*(?: for (?:me|us))?"
    # "whenever you book a restaurant for me: ...": the object as said, up to six words before the punctuation
    rf"|\bwhen(?:ever)? you (?:{_SCOPE_VERBS})\w*(?:(?:\s+(?!for\b)[\w'-]+){{1,6}}(?:\s+for (?:me|us))?(?=\s*[:,.;!?]|$))?"
    rf"(?: (?:anything|something|for me|for us))?",
    re.IGNORECASE)
# the words of a scope that are not its object ("anything you book for me" has none; "any restaurant you book")
_NOT_OBJECT = re.compile(rf"\b(?:for|with|on|in|about|anything|everything|whatever|something|all|any|every|that|you|"
                         rf"when|whenever|me|us|a|an|the|my|our|some|{_SCOPE_VERBS})\w*\b", re.IGNORECASE)
# what a request of each kind names: the verb itself, or what such requests are usually about
_KINDS = {
    # "book" as a verb only ("book my flight", not "the booking export")
    "book": r"book(?=\s+(?:me|us|it|a|an|the|my|our|this|that|one|two|three|four|\d+)\b)|reserv\w*|flights?|fly|flying|"
            r"hotels?|rooms?|trains?|tickets?|seats?|rentals?|trips?",
    "order": r"order\w*|deliver\w*|meals?|food|dinner|lunch|takeaway|takeout",
    "buy": r"buy\w*|purchas\w*|order\w*|shop\w*",
    "plan": r"plan\w*|trips?|itinerar\w*|schedul\w*|events?",
    "travel": r"travel\w*|trips?|fly\w*|flights?|hotels?|trains?|journey\w*",
}
_KIND_OF = {"reserve": "book", "arrange": "book", "schedule": "plan", "purchase": "buy", "fly": "travel"}
# a rule that names the errand it governs states its own scope: "never book flights before 8am" holds for every
# flight booking, as "for anything you book for me: ..." does for what follows it
_RULED_ERRAND = re.compile(
    r"\b(?:book|reserve|order|buy|purchase)\w*\s+(?:(?:me|us|a|an|the|my|any|some|only)\s+)*"
    r"(?:flights?|hotels?|trains?|tickets?|rooms?|seats?|tables?|cars?|rentals?|trips?|meals?|food)\b", re.IGNORECASE)


# how the assistant should answer, for good: an instruction about answers in general, not about one draft ("Keep
# answers short.", "Skip the disclaimers", "Never use emoji with me", "Don't sugarcoat things"); "Keep it short",
# "Skip the intro on this draft" are the moment's. Such a rule holds for every answer (ruled_scope: ANSWERS).
# None of LongMemEval-S dev's 22,644 user turns, LoCoMo dev's or the PrefEval inter chats' matches it.
MANNER = re.compile(r"^(?:please\s+)?(?![^.;!?,]*\b(?:this|that|it|these|those|here|today|now)\b)(?:"
                    # marked for good: "Never use emoji with me", "Always use metric units", "Don't add disclaimers"
                    r"(?:always|never|don't|do not|stop)\s+(?:keep|make|give|write|use|put|format|add|include|"
                    r"answer|reply|respond|explain|using|adding|giving|writing)\b[^.;!?]{0,40}?\b(?:answers|"
                    r"responses|replies|explanations|summaries|disclaimers|caveats|jargon|emoji|emojis|bullet points|"
                    r"metric|imperial)\b|"
                    # answers in general: "Keep answers short", "Keep your replies brief" (not "Make the email
                    # concise", "write 10 questions ... answers only": an artifact of the task at hand)
                    r"(?:keep|make|give me)\s+(?:[\w-]+\s+){0,2}?(?:answers|responses|replies|explanations)\b|"
                    r"(?:skip|drop|spare me|leave out|cut)\s+(?:the\s+|all\s+(?:the\s+)?)?(?:disclaimers|caveats|"
                    r"fluff|small talk|pleasantries|jargon)\b|"
                    r"(?:don't|do not|never)\s+(?:sugarcoat|sugar-coat|dumb (?:it|things) down|beat around the bush)\b|"
                    r"(?:talk|speak|write) to me like\b)", re.IGNORECASE)
ANSWERS = "every answer you give me"  # the scope of a rule about how to answer: every prompt


def ruled_scope(rule: str) -> str:
    """The errand a rule's own words govern ("never book flights before 8am" → "book flights"; "Keep answers
    short." → :data:`ANSWERS`), or ""."""
    if MANNER.match(rule or ""):
        return ANSWERS
    m = _RULED_ERRAND.search(rule or "")
    return m.group(0).lower() if m else ""


def scope_kind(phrase: str) -> str:
    """The kind of request a stated scope names ("anything you book for me", "book flights" → "book"; every
    answer → "answer"), or ""."""
    if phrase == ANSWERS:
        return "answer"
    m = re.search(rf"^(?:\w+ )*?(?:you )?({_SCOPE_VERBS})\w*\b", phrase or "", re.IGNORECASE)
    if not m:
        return ""
    verb = m.group(1).lower()
    return _KIND_OF.get(verb, verb)


def scope_object(phrase: str) -> str:
    """What a stated scope says its errands are about ("whenever you book a restaurant for me" → "restaurant",
    "book flights" → "flights"), or "" ("anything you book for me": every booking; every answer)."""
    if phrase == ANSWERS:
        return ""
    return " ".join(_NOT_OBJECT.sub(" ", phrase or "").split())


_ERRAND_VERBS = re.compile(r"\b(?:book|booked|booking|bookings|reserve|reserved|reservation|reservations)\b",
                           re.IGNORECASE)


def errand_objects(prompt: str) -> str:
    """``prompt`` without the words that name the kind of errand ("book", "reserve"): what is left says what it
    is about ("book my flight" is about a flight, not lodging, though "booking" is a lodging word)."""
    return _ERRAND_VERBS.sub(" ", prompt)


def in_scope(prompt: str, phrase: str, *, asks: float | None = None) -> bool:
    """Whether ``prompt`` is a request of the kind ``phrase`` (a stated scope) names: an errand or a request for
    a choice (:func:`asks_for_choice`; ``asks``: its value, when the caller has it) that names the kind's verb or
    its usual objects ("Fly out from SFO on the 9th" is a booking: "anything you book for me"), or the object the
    scope names ("Find me a restaurant for Friday": "whenever you book a restaurant for me")."""
    kind = scope_kind(phrase)
    if kind == "answer":  # how to answer holds for whatever is asked
        return bool(prompt and prompt.strip())
    if not kind or not prompt or not (asks_for_choice(prompt) if asks is None else asks):
        return False
    text = _bounded(prompt)
    if re.search(rf"\b(?:{_KINDS[kind]})\b", text, re.IGNORECASE):
        return True
    named = _words(scope_object(phrase))
    return bool(named and named & _words(text))


@functools.lru_cache(maxsize=64)
def _words(text: str) -> frozenset:
    """The stemmed words of ``text``: a prompt is read once, whatever the number of scoped items it is checked
    against, and a scope's object once for good."""
    return frozenset(tokenize(text))
