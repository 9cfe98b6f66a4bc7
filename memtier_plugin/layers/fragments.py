"""What people say for good in a phrase, not a sentence (MemSidecar §3.2, the Global layer; docs/standing.md
"Said in a phrase").

Users type labels and fragments: "Wheelchair user here, step-free access isn't optional", "Renting, so nothing
that needs drilling into walls", "iPhone user, so Android-specific tips don't help me", "Single dad of three",
"No spoilers, ever", "Bullet points over paragraphs whenever you can". The extractor's sentence forms
(:mod:`.extract`) want a subject and a verb; these forms read the phrase. Each is tested beside what shares its
words and holds for a moment only ("Running late, so skip the intro", "Same here", "No worries, ever so kind").
:func:`phrase_kind` is asked by :func:`.extract._kind` after its sentence forms, on a sentence with no moment in it.
"""

from __future__ import annotations

import re

# what the speaker is, in a phrase: an agent noun ("Wheelchair user", "Atheist", "Marathon runner", "iPhone user",
# "Liverpool fan since birth", "Introvert to the core", "Not much of a sports guy", "Not a big drinker"); a word in -er
# or -or only after a word that says what of ("Marathon runner", not "Winter" or "Late winter")
_NOT_AGENT = (r"winter|summer|weather|dinner|water|number|paper|order|border|corner|matter|letter|power|hour|floor|door|"
              r"colou?r|error|monitor|mirror|computer|printer|charger|timer|trailer|theat(?:er|re)|cent(?:er|re)|shower|"
              r"flower|finger|shoulder|liver|fever|cancer|sweater|poster|sticker|burger|butter|sugar|flour|pepper|river|"
              r"tower|quarter|semester|register|cover|offer|answer|chapter|character|member|ever|never|over|under|"
              r"other|after|later|together|whatever|however|either|neither|rather|better|faster|bigger|smaller|"
              r"sister|brother|daughter|partner|neighbou?r|doctor|tutor|author|mentor|counselor|visitor|editor")
_AGENT = (r"(?:(?:[\w/-]+\s+){0,2}?(?:[\w-]+(?:ist|ian|arian|ite|aholic|holic)|user|owner|fan|parent|mom|mum|dad|"
          r"introvert|extrovert|homebody|nerd|geek|snob|foodie|vegan|atheist|muslim|jew|catholic|christian|buddhist|"
          r"hindu|guy|gal|girl|person|type|nurse|student|retiree|veteran|athlete|klutz|night owl|early bird)|"
          rf"(?:[\w/-]+\s+){{1,2}}(?!(?:{_NOT_AGENT})s?\b)[\w-]+(?:er|or))")
_LABEL = (rf"(?:not (?:much of |really |exactly )?an? (?:big |huge )?{_AGENT}s?|"
          rf"(?:an? |total |big |huge |lifelong |proud |die-?hard |single |stay-at-home |full-time |"
          rf"retired |recovering ){{0,3}}{_AGENT}s?(?:\s+(?:since|for|of|to|by|through)\b[^,;.!?]{{1,30}})?|"
          r"renting|car-free|childfree|child-free|sober|retired|disabled|(?:type ?[12] |t[12] )?diabetic|celiac|coeliac|deaf|blind|"
          r"(?:two|three|four|five|\d+) (?:kids|toddlers|dogs|cats|jobs)(?: (?:at home|in the house|under \w+))?)")
# the label leads the sentence, alone or with "here" ("Atheist here"), and the rest says what follows from it
_LABEL_LEAD = re.compile(rf"^(?:honestly,?\s+|tbh,?\s+)?(?:{_LABEL})(?:\s+(?:here|tbh|lol))?\s*(?:,|;|\s[-\u2014\u2013]+\s|"
                         r"\u2014)\s*(?:(?:and\s+)?so|hence|which means)?\b", re.IGNORECASE)
# "Wheelchair user here", "Atheist here.", "Pescatarian fyi": the label stated, alone
_LABEL_HERE = re.compile(rf"^(?:{_LABEL})\s+(?:here|btw|fyi|for the record|for context)\s*(?:[,.!;]|$)", re.IGNORECASE)
# a label of the moment, not of who the speaker is: "Running late", "New here", "Same here", "First-timer here"
_NOT_A_LABEL = re.compile(r"^(?:same|new|nobody|everyone|hello|hi|hey|thanks|cheers|just|still|back|again|first-?timer|"
                          r"newbie|running|heading|driving|walking|working|waiting|travel(?:l)?ing|stuck|sitting|"
                          r"visiting|shopping|cooking|eating|packing|leaving|moving|flying|staying|another|this|that|"
                          r"the|your|his|her|their|my|our|whoever|whatever|someone|anyone)\b", re.IGNORECASE)
# what follows from the label for good: a kind ruled out or required, an instruction of every time ("nothing that
# needs drilling", "big group tours are a no", "Android-specific tips don't help me", "skip the game-day stuff",
# "don't even mention United to me", "assume a turntable setup", "step-free access isn't optional")
_FOLLOWS = re.compile(r"^(?:(?:please\s+)?(?:skip|avoid|assume|keep|leave out|no more)\b|"
                      r"(?:don't|do not|never)\s+(?:even\s+|ever\s+)?(?:mention|suggest|recommend|send|show|"
                      r"book|plan|offer|give)\b|"
                      r"(?:nothing|anything|everything|any|no|all|only)\b|"
                      r"when(?:ever)? I\b|"
                      r"[^,;:?]{2,60}?\b(?:(?:is|are|'s|'re)\s+(?:\w+\s+)?(?:out|a no|a no-go|off the table|a must|"
                      r"non-negotiable|not optional|not an option)|isn't optional|aren't optional|"
                      r"(?:won't|doesn't|don't|never) (?:\w+\s+)?(?:work|help|fly|cut it)(?: for me| me)?|"
                      r"(?:has|have|needs?|must) to\b|means\b|tops\b))", re.IGNORECASE)
# the same after a clause of the speaker's lasting state: "I'm in the UK, so prices in pounds and UK stores please",
# "I collect vinyl, so when I ask about music gear assume a turntable setup", "We live in a 400 sq ft studio, so big
# furniture is out" (with a comma before "so" or none: people type "I collect vinyl so when I ask ..." either way)
_SO_FOLLOWS = re.compile(r"(?:,\s*|\s+)(?:and\s+)?so,?\s+(?=(?:when(?:ever)? I\b|[^,;:?]{2,60}?\b(?:(?:is|are|'s|'re)\s+"
                         r"(?:\w+\s+)?(?:out|a no|a no-go|off the table|not an option)|(?:won't|doesn't|don't|never) "
                         r"(?:\w+\s+)?(?:work|help)(?: for me| me)\b)|[^,;:?]{3,60}\bplease\s*[.!]*$|"
                         # or what that means for anything suggested: "I use a CPAP so any camping has to have power",
                         # "I drive an EV so road trips need charging stops planned in", "I'm a widower, so skip the
                         # couples deals", "we only have a tiny balcony, so container gardening ideas only" (not the
                         # speaker's thought: "so I think schools should be funded")
                         # (a thing's need, not the speaker's errand: "so I need to calculate it", "so it should work")
                         r"(?:(?:(?:please|pls|plz)\s+)?(?:skip|avoid|steer clear|check|assume|plan|throw|feel free|"
                         r"don't (?!need|have)|do not (?!need|have)|no|nothing|any|every|only)\b|"
                         r"(?!(?:I|I'll|I'm|I'd|I've|we|we'll|we're|we'd|it|it's|this|that|these|those|they|he|she|"
                         r"you|now|then|there|don't|do not|much|many|far|well|good|great|glad|happy|excited|sorry)\b)"
                         r"(?:(?!\b(?:I|we|you|it|they|he|she)\b)[^,;:?]){2,60}?\b(?:should|needs?|has to|have to|must)\b|"
                         r"[^,;:?]{2,40}\bonly\s*[.!]*$)))",
                         re.IGNORECASE)
# a consequence for a while only: "My ankle's sprained so no hiking for a couple weeks"
_A_WHILE = re.compile(r"\bfor (?:a (?:couple|few)(?: of)?|two|three|\d+) (?:days|weeks)\b|\bfor now\b|"
                      r"\buntil (?:it|I|my|the|next|\w+day)\b", re.IGNORECASE)
# the speaker's own state leads ("I collect vinyl", "My apartment is tiny"), not someone else's ("My girlfriend hates
# horror movies, so that's out for date night")
_OWN_LEAD = re.compile(r"^(?:I|I'm|I've|we|we're|we've|(?:my|our)\s+(?![\w-]*\s*(?:husband|wife|partner|boyfriend|"
                       r"girlfriend|son|daughter|kids?|children|sister|brother|mom|mother|dad|father|parents|friends?|"
                       r"boss|colleagues?|coworkers?|roommates?|neighbou?rs?|family|team|guests?)\b))\b", re.IGNORECASE)
# a state of the moment given as the reason: "I'm tired, so skip the details please"
_NOW_STATE = re.compile(r"\b(?:tired|exhausted|busy|sick|ill|hungry|thirsty|late|sleepy|bored|stressed|swamped|broke|"
                        r"hungover|jet-?lagged|sprained|twisted|sore|"
                        r"in a (?:rush|hurry)|short on time|on my way|out|away|off|here|there|back|done|ready)\b",
                        re.IGNORECASE)
_PRONOUNS = r"(?:she/her|he/him|they/them|she/they|he/they)"
# who the speaker is, said as a phrase: "Single dad of three", "Cat mom of three", "My pronouns are they/them",
# "Trans woman, she/her"
_WHO = re.compile(r"^(?:(?:a |proud |single |busy |working |stay-at-home |full-time |[\w-]+ )?(?:mom|mum|dad|mother|"
                  r"father|parent|grandma|grandpa|grandparent) (?:of|to) (?:\w+\s+)?(?:one|two|three|four|five|six|"
                  r"\d+|twins|a|an)\b)|\bmy pronouns are\b|"
                  # the speaker's own pronouns, not a pasted profile's ("Bailey Baker (She/Her) 2:31 AM")
                  rf"^(?:(?:[\w-]+\s+){{0,3}}[\w-]+,\s*)?{_PRONOUNS}\s*[.!]*$|\bI(?:'m| am| go by| use)\s+{_PRONOUNS}\b",
                  re.IGNORECASE)
# one kind over another for good: "Give me a dive bar over a rooftop lounge every single time", "Honestly a train over
# a plane any day", "Bullet points over paragraphs whenever you can"
_OVER = re.compile(r"^(?:honestly,?\s+|tbh,?\s+)?(?!(?:it|this|that|he|she|they|you|we)\b)[^.;!?]{2,60}?\bover\s+"
                   r"(?!(?:there|here|it|the weekend|the holidays|the summer|the phone|dinner|lunch|coffee|drinks)\b)"
                   r"[^.;!?]{2,60}?\b(?:any day|any time|anytime|every (?:single )?time|all day|whenever (?:you|I|we) "
                   r"can|when(?:ever)? possible|if possible)\b", re.IGNORECASE)
# "window seat or I'm miserable": what the speaker cannot do without ("Nonstop or nothing" is a rule: extract._RULE)
_OR_ELSE = re.compile(r"^(?!(?:it|this|that|he|she|they|you)\b)[^.;!?]{2,60}?\bor (?:I'm|I am|I get|I'll be) "
                      r"(?:\w+\s+)?(?:miserable|cranky|grumpy|useless|a mess|a wreck|a zombie|sick|no good|unbearable)\b",
                      re.IGNORECASE)
# an instruction for every time: "Stop apologizing in every message", "No spoilers, ever", "When I ask for a recipe
# just give the recipe"
_EVERY_TIME = re.compile(r"^(?:(?:can you |could you |please )?(?:stop|quit)\s+\w+ing\b[^.?!]{0,60}?\b(?:every|each|all "
                         r"the time|always|constantly)\b|"
                         r"no\s+(?!(?:worries|worry|problem|problems|thanks|way|doubt|offense|pressure|rush)\b)[\w-]+"
                         r"(?:\s+[\w-]+)?,\s*ever\s*(?:[,.!]|$)|"
                         r"when(?:ever)? I (?:ask|want|need|say) (?:for|about)\b[^.?!]{3,60}?\b(?:just|always|only)\s+"
                         r"(?:give|tell|show|send|list|answer|use|write)\b)", re.IGNORECASE)
# "Citations matter to me", "Local produce really matters to us": what the speaker values (not thanks: "Your support
# means a lot to me")
_MATTERS = re.compile(r"^(?!(?:it|this|that|these|those|the|he|she|they|you|your|his|her|their|its|what|which)\b)"
                      r"[^.;!?,]{2,50}?\b(?:really\s+|just\s+)?(?:matters?|(?:is|are) (?:really |very |super )?"
                      r"important) to (?:me|us)\b", re.IGNORECASE)
# "I try to buy local whenever I can", "I avoid plastic if I can help it": a practice kept
_WHEN_I_CAN = re.compile(r"^I (?:always |really )?(?:try (?:hard |really hard )?(?:not )?to|avoid|skip|buy|use|pick)\b"
                         r"[^.;!?]{2,60}?\b(?:whenever|wherever|when|where|if) (?:I|we) can\b|\bif I can help it\b",
                         re.IGNORECASE)
# a standing allergy or diet in a phrase: "Tree nut allergy, keep that in mind", "Low-FODMAP for my IBS, that's just my
# life now", "Been vegetarian for twelve years"
_CONDITION = re.compile(r"^(?:severe\s+|bad\s+|mild\s+)?(?:[\w-]+\s+){0,2}(?:allergy|allergic|intolerance|intolerant)"
                        r"(?:\s+here)?\s*(?:[,;.!]|$|\s[-\u2014\u2013]+\s|\u2014)|"
                        r"^(?!(?:thanks|thank you|ok|okay|oh|lol|haha|yeah|well|yes|no)\b)(?:[\w-]+\s+){2,8}[^,;]{0,60},\s*"
                        r"that's (?:just )?(?:my life|how I live|how I am|who I am)(?: now)?\b|"
                        r"^(?:I've )?been (?:a\s+)?(?:vegetarian|vegan|pescatarian|sober|gluten-free|dairy-free|"
                        r"teetotal|kosher|halal)\s+(?:since|for (?:\w+\s+){1,2}(?:years|decades)|for ages|my whole "
                        r"life)\b", re.IGNORECASE)
# "Python person through and through": the kind the speaker is, for good
_THROUGH = re.compile(r"^(?:honestly,?\s+)?(?:[\w+#.-]+\s+){1,3}(?:person|guy|girl|gal|fan|type)\s+through and through\b",
                      re.IGNORECASE)
# what a kind is to the speaker: "Cruises are my idea of hell", "Sushi is my love language", "Paris is my happy place"
_MY_IDEA = re.compile(r"^(?!(?:it|this|that|these|those|he|she|they|you|what|which|there)\b)[^.;!?,]{2,50}?\b(?:is|are|'s|"
                      r"'re)\s+(?:basically |literally |pretty much |just |honestly )?my (?:idea of (?:hell|heaven|fun|a "
                      r"nightmare|torture|a good time)|love language|therapy|happy place|religion|comfort food|"
                      r"guilty pleasure|personality)\b", re.IGNORECASE)
# a kind turned down in a phrase: "Tents on the ground, absolutely not.", "Tents, hard pass."
_KIND_NOT = re.compile(r"^(?!(?:it|this|that|these|those|he|she|they|you|me|us|thanks|thank you|ok|okay|well|yes|sorry|"
                       r"so|and|but)\b)[\w' -]{3,50},\s*(?:absolutely|definitely|hell|just|a hard|hard|big) (?:not|no|"
                       r"pass)\s*[.!]*$", re.IGNORECASE)
# an instruction for every answer in a phrase: "Every reply, forever, just plain text.", "Low-maintenance only, forever."
_FOREVER = re.compile(r"^(?:every|each|all|any) (?:reply|replies|answer|answers|response|responses|message|messages)\b"
                      r"(?:(?!\b(?:I|you|it|he|she|they|we|is|are|was|were)\b)[^.?!]){0,40}?\b(?:forever|always|from now "
                      r"on|for good)\b|"
                      r"^(?!(?:I|you|it|he|she|they|we)\b)[\w' -]{2,30}\bonly,\s*(?:forever|always|ever|for good)\b",
                      re.IGNORECASE)
# a kind that sets off the speaker's condition: "Strong fragrances trigger my migraines"
_SETS_OFF = re.compile(r"^(?!(?:it|this|that|these|those|he|she|they|you|what|which)\b)[^.;!?]{3,60}?\b(?:trigger|triggers|"
                       r"set off|sets off|aggravate|aggravates|irritate|irritates|upset|upsets) my (?:\w+\s+)?(?:"
                       r"migraines?|asthma|allerg(?:y|ies)|eczema|skin|sinuses|stomach|ibs|reflux|back|knees?|joints?|"
                       r"anxiety|tinnitus)\b", re.IGNORECASE)
# what the speaker is not: "I'm really not a city person", "I'm not much of a cook" (not "I'm not a fan of this one")
_NOT_A = re.compile(rf"^(?:honestly,?\s+|tbh,?\s+)?I(?:'m| am) (?:\w+\s+)?not (?:much of |really |exactly )?an? "
                    rf"(?:big |huge )?{_AGENT}\b(?!\s+of\s+(?:this|that|it|its|these|those|them|the idea|yours|your|his|her|their)\b)",
                    re.IGNORECASE)


# a state said without its subject, as people type: "allergic to penicillin, just so you have it on file", "lactose
# intolerant since forever", "genuinely terrified of heights", "not a coffee person at all", "huge Arsenal fan, so
# nothing Spurs related" ("I'm" left out); "can't do dairy", "never fly budget airlines" ("I" left out; not "Don't
# use that word", an instruction)
_WITHOUT_I_AM = re.compile(r"^(?:(?:genuinely|severely|deathly|very|super|really|totally|seriously|pretty|so|also|mildly|"
                           r"extremely)\s+)?(?:allergic to|(?:lactose |gluten |dairy )?intolerant\b|terrified of|scared of|"
                           r"afraid of|deaf in|blind in|not an? (?:\w+\s+){0,2}(?:person|fan|drinker|eater|guy|gal|type)\b|"
                           r"(?:a\s+)?(?:huge|big|lifelong|die-?hard|massive|proud)\s+(?:[\w-]+\s+){0,2}(?:fan|nerd|geek|"
                           r"supporter|person)\b|(?:type\s*[12]|t[12])\s+diabetic\b|doing (?:low-carb|keto|paleo|whole30|"
                           r"intermittent fasting)\b|trying to (?:stay|keep|eat|avoid|cut)\b)", re.IGNORECASE)
_WITHOUT_I = re.compile(r"^(?:(?:just|really|honestly)\s+)?(?:can't|cannot|won't|never)\s+(?:do|eat|drink|"
                        r"handle|stand|stomach|sleep|sit|walk|climb|drive|fly|use|have|take)\b", re.IGNORECASE)


def with_subject(sent: str) -> str | None:
    """``sent`` with the "I'm" or "I" it was typed without, for the sentence forms to read; None when it has one or
    starts otherwise."""
    lead = sent[:1].lower() + sent[1:]
    if _WITHOUT_I_AM.match(sent):
        return "I'm " + lead
    if _WITHOUT_I.match(sent):
        return "I " + lead
    return None


def phrase_kind(sent: str) -> str | None:
    """The kind of what ``sent`` (one sentence, as extract.clean leaves it, with no moment in it) says for good in a
    phrase, or None."""
    if _WHO.search(sent):
        return "identity"
    if _LABEL_HERE.match(sent) and not _NOT_A_LABEL.match(sent):
        return "identity"
    m = _LABEL_LEAD.match(sent)
    if m and not _NOT_A_LABEL.match(sent) and _FOLLOWS.match(sent[m.end():].lstrip()):
        return "preference"
    m = _SO_FOLLOWS.search(sent)
    if m and _OWN_LEAD.match(sent) and not _NOW_STATE.search(sent[:m.start()]) and not _A_WHILE.search(sent[m.end():]):
        return "rule"
    if _EVERY_TIME.search(sent):
        return "rule"
    if _CONDITION.search(sent):
        return "constraint"
    if _FOREVER.search(sent):
        return "rule"
    if _OVER.search(sent) or _OR_ELSE.search(sent) or _MATTERS.search(sent) or _WHEN_I_CAN.search(sent) \
            or _THROUGH.search(sent) or _MY_IDEA.search(sent) or _KIND_NOT.search(sent) or _SETS_OFF.search(sent) \
            or _NOT_A.search(sent):
        return "preference"
    return None
