"""The sentence forms standing knowledge is said in: the patterns :mod:`.extract` reads a user's sentence with.

One regular expression (or word list) per form, each with the sentences it is for and those it is not: what a
preference, a rule, a constraint, an identity fact or a household looks like, and what marks a sentence as of one
occasion (a past time, an offer, a plan, a pick of the moment) rather than for good. :mod:`.extract` decides with
them; :mod:`.picks` and :mod:`.gate` read a few of them too. They are data: changing one changes what is stored,
so each is measured on the labelled set (tests/standing_labels.jsonl, docs/standing.md).
"""

from __future__ import annotations

import re

# what a user stops doing for good ("I stopped driving altogether"; not "I stopped by", "I stopped working at ...")
GIVEN_UP = (r"eating|drinking|taking|using|buying|driving|flying|smoking|vaping|wearing|watching|ordering|cooking|"
             r"gambling|shopping|going")
PREF = re.compile(
    r"\b(?:I|i)(?:'m| am| have| had|'ve|'d|'ll)?\s+(?:(?:really|strongly|strictly|usually|generally|always|absolutely|"
    r"definitely|totally|mostly|typically|much|also|only|still|just|even|so|\w+ly|do|don't|do not|never|would|'d|"
    r"tend to|try to|will always|'ll always)\s+){0,3}"
    r"(?:prefer|like|love|enjoy|adore|favou?r|hate|dislike|detest|loathe|avoid|can't stand|cannot stand|"
    r"can't eat|cannot eat|can't handle|cannot handle|can't tolerate|cannot tolerate|can't have|don't eat|"
    r"don't drink|don't wear|don't use|don't like|do not like|(?:don't|do not) (?:take|accept|schedule|watch|own)|"
    r"don't want|do not want|won't|refuse|(?<=always )(?:need|want)|(?<=usually )(?:need|want)|(?<=only )(?:need|want)|"
    r"(?<=always )(?:book|pick|choose|order|take(?! care)|sit|travel|ask for)|rather|"
    r"care about|value|(?:place|put) (?:a )?(?:(?:high|great|huge|real|lot of)\s+)?(?:value|premium) on|drawn to|"
    r"stick to|steer clear|stay away|opt for|find|learn best|learn better|work best|thrive|"
    r"struggle|firmly believe|believe|am against|'m against|am strongly against|'m strongly against|"
    r"go for|lean towards?|gravitate|follow|keep|limit|only (?:eat|wear|use|buy|read|watch|listen|play|drink|fly|stay|"
    r"consider|book|pick|choose|order|travel|shop|hire|visit|drive|ride|take|adopt|cook|trust|support|work|purchase|"
    r"train|feed|groom|rent|lease|pay|invest|commute|swim|hike|camp|stream)|"
    # a dependence or a kind of thing given up: "I rely entirely on public transit", "I've sworn off fast food",
    # "I'm cutting out added sugar", "I'll do almost anything to avoid injections"
    r"rely (?:entirely |only |solely |mostly |completely )?on|sworn off|swore off|(?:cutting|cut) (?:out|back on)|"
    # a thing done no more: "I stopped driving altogether", "I've given up eating red meat", "I quit drinking"
    rf"(?:stopped|quit|gave up|given up) (?:{GIVEN_UP})\b|"
    r"keep (?:halal|kosher)|(?<=always )(?:pay|stay|go|fly|get|eat|buy)|"
    r"(?:do|try) (?:almost |just about )?anything to avoid|"
    # a kind of thing never done (present tense: "I never finance a car", not "I never thought ..." or "I never
    # expected ...", one occasion)
    r"(?<=never )(?!(?:knew|saw|went|got|had|heard|thought|understood|felt|found|made|met|said|told|took|came|gave|"
    r"ate|drank|wrote|became|began|bought|brought|caught|did|fell|forgot|held|kept|left|lost|meant|ran|sat|sent|"
    r"slept|spent|stood|won|wore|would|could|should|was|were|been|really|even|ever|again|imagined?|dreamed|dreamt|"
    r"want|need|mind|stop|get|have|know|forget|give|let|be|gone|done|seen|eaten|flown|driven|ridden|taken|given|"
    r"known|shown|worn|written|spoken|grown|drawn|swum|run|begun|become|come|tried)\b)(?!\w+ed\b)[a-z]+|"
    # a standing want of a kind, said with a bare noun ("I want work that keeps me outdoors", "I need quiet places
    # where I can talk"; not "I want a hotel near the venue", "I need advice": one errand, or a request)
    r"(?:want|need)\s+(?!(?:to|an?|the|some|my|your|our|his|her|their|its|it|this|that|these|those|you|him|"
    r"them|us|me|help|more|one|advice|ideas?|suggestions?|recommendations?|tips|information|info|answers?|assistance|"
    r"guidance|feedback|something|anything|someone|somebody|somewhere|anywhere|everything|all|both|either|time|"
    r"money|coffee|sleep)\b)"
    r"(?:[a-z-]+\s+){0,2}[a-z]+\s+(?:that|where|which|with|without|in|on|at|near|far from|away from)\b|"
    r"(?:eat|wear|use|buy|read|watch|listen|play|drink|fly|stay) only)\b",
    re.IGNORECASE)
STATE = re.compile(
    r"\bI(?:'m| am|(?:'ve| have)(?: always| long| really)? been)\s+"
    r"(?:(?:a|an|very|really|strictly|severely|highly|quite|not|also|still|extremely|being|"
    r"always|long|just|so|\w+ly)\s+){0,3}"
    r"(?:vegetarian|vegan|pescatarian|allergic|intolerant|lactose|gluten|afraid|scared|terrified|claustrophobic|"
    r"sensitive|(?:type ?[12] |t[12] )?diabetic|colou?r ?blind|left-handed|night owl|early bird|fan of|big fan|not a fan|into|passionate|"
    r"keen on|on an? (?:[\w-]+ ){0,2}(?:diet|budget)|a (?:total |huge |big )?sucker for|on a fixed income|"
    r"uncomfortable|comfortable|interested|obsessed|picky|budget-conscious|environmentally|eco|committed|loyal to|"
    r"(?:light|heavy) sleeper|morning person|night person|early riser|late riser|germaphobe|introvert|extrovert|"
    r"homebody|digital nomad|non-?drinker|non-?smoker|teetotal(?:l?er)?|[\w-]+-phobic|sober|done with|"
    # a rule the user keeps for themselves: "so I'm being strict about treats and food portions"
    r"(?:strict|careful|cautious|particular|fussy) (?:about|with) (?!(?:it|this|that|him|her|them)\b)|"
    r"(?:die-?hard|lifelong|huge|massive|devoted) (?:[\w-]+ ){0,2}(?:fan|supporter)|"
    # "I'm a longtime board game enthusiast", "I'm a history buff", "I'm most productive in the late evening"
    r"(?:[\w-]+ ){1,3}(?:enthusiast|aficionado|buff|devotee|connoisseur)|most productive|"
    r"(?:a )?(?:beginner|novice|expert|visual|hands-on|auditory|kinesthetic)|"
    # a condition, a faith, a need that lasts: "I'm celiac", "I'm deaf in my left ear", "I'm Muslim and pray five times
    # a day", "I'm in a wheelchair", "I'm on warfarin"
    r"celiac|coeliac|deaf|hard of hearing|blind|visually impaired|disabled|autistic|dyslexic|epileptic|asthmatic|"
    r"immunocompromised|pregnant|retired|jewish|muslim|christian|catholic|hindu|buddhist|sikh|mormon|atheist|agnostic|"
    r"(?:in (?:a )?)?wheelchair(?: user)?|on (?:insulin|warfarin|blood thinners|dialysis|a pacemaker))\b", re.IGNORECASE)
# the same state given as a leading reason: "Being pescatarian, I eat fish ...", "As a non-drinker, ..."
BEING = re.compile(r"^(?:being|as) (?:an? )?(?:(?:strict|lifelong|committed|longtime|long-time|devout|very)\s+)?"
                    r"(?:vegetarian|vegan|pescatarian|diabetic|celiac|coeliac|light sleeper|germaphobe|introvert|"
                    r"non-?drinker|non-?smoker|teetotal(?:l?er)?|[\w-]+-phobic|early riser|morning person|night owl)\b",
                    re.IGNORECASE)
HAVE = re.compile(r"\bI(?:'ve| have)? (?:always |long )?(?:have|had|suffer from|struggle with|get)\s+"
                   r"(?:an? |some )?(?:[\w-]+ ){0,2}"
                   r"(?:fear|phobia|allergy|allergies|aversion|intolerance|sensitivity|condition|"
                   r"motion sickness|vertigo|anxiety|migraines?|bad knees?|back pain|asthma|diabetes|"
                   r"celiac(?: disease)?|coeliac(?: disease)?|arthritis|tinnitus|insomnia|sciatica|epilepsy|IBS|"
                   r"high blood pressure|hypertension|chronic pain|herniated disc|bad back|bad hips?|"
                   r"(?:love|passion|spot|weakness) (?:for|of))\b|"
                   r"\bI (?:use|rely on) (?:a |an )?(?:wheelchair|cane|walker|mobility scooter|hearing aids?|crutches)\b|"
                   # the body as it is: "My knees are bad", "my back can't take the hunched-over position"
                   r"\bmy (?:\w+ )?(?:knees?|back|hips?|joints|stomach|eyes|eyesight|ears|hearing|night vision|skin)\s+"
                   r"(?:is|are|(?:can't|cannot|won't) (?:take|handle|tolerate|cope with))\s+"
                   r"(?:(?:really|very|pretty|just|so|too)\s+)?(?:bad|weak|poor|shot|sensitive|terrible|awful|the)\b|"
                   # what a doctor has ruled: "my doctor wants me to avoid heavy lifting"
                   r"\b(?:doctor|physician|physio|physiotherapist|cardiologist|dentist|dermatologist|allergist|vet)\s+"
                   r"(?:(?:has\s+)?put me on\b|(?:wants|has told|told|says|has advised|advised|recommends|insists)\s+"
                   r"(?:that\s+)?(?:me|I)\s+"
                   r"(?:to\s+)?(?:avoid|not\b|never|stay away|steer clear|limit|cut|stop|should(?:n't| not)? avoid))",
                   re.IGNORECASE)
OPINION = re.compile(r"\b(?:prefer|preference|avoid|dislike|hate|can't stand|allergic|vegan|vegetarian|"
                      r"ineffective|distracting|disorienting|overwhelming|unengaging|engaging|boring|uncomfortable|"
                      r"against|appeal|works? best|learn best|thrive|struggle|"
                      r"sensitive|intolerant|phobia|exclusively|no interest|not interested|despise|detest|objection|"
                      r"opposed|averse|aversion|tolerance|fascinated|(?:don't|doesn't|do not) interest|"
                      r"never (?:wear|buy|eat|drink|use|read|watch|play|listen|fly|stay|book|travel|go)|"
                      r"cannot tolerate|can't tolerate|"
                      r"don't (?:watch|read|use|eat|drink|consume|wear|play|listen|like)|"
                      r"do not (?:watch|read|use|eat|drink|consume|wear|play|listen|like)|need to avoid|"
                      r"only (?:eat|wear|use|buy|read|watch|listen|play|drink)|keep (?:halal|kosher))\b",
                      re.IGNORECASE)
# the fallback: an opinion word in a clause whose subject is the speaker ("They love it when I ..." is not)
OPINION_SUBJECT = re.compile(r"\bI\b(?:'m|'ve)?[^,;:.!?]*?" + OPINION.pattern, re.IGNORECASE)
MY_FAV = r"\bmy (?:absolute |all-time |personal |new )?(?:favou?rites?|go-to|preferred|top pick)\b"
# "my favourite X is ...", "X is (one of) my favourites" — not "It's my favourite", "was my favourite part"
FAV = re.compile(MY_FAV + r"(?:\s+[\w-]+){0,3}\s+(?:is|are)\b|"
                  r"(?<![\w'])(?!(?:it|this|that|which|what|they|these|those|he|she)\s)[\w-]+\s+"
                  r"(?:is|are)\s+(?:(?:pretty much|really|definitely|always|still|also|probably)\s+)?(?:one of\s+)?"
                  + MY_FAV, re.IGNORECASE)
# a cue aimed at one thing, not at a kind (see _aimed)
HEDGE = re.compile(r"\s+to\s+(?:say|admit|break|tell|be the one|ask|bother|interrupt)\b", re.IGNORECASE)
WISH = re.compile(r"(?:'d|\bwould)\b.*\b(?:love|like|enjoy|adore)$", re.IGNORECASE)  # conditional: a wish
SECOND = re.compile(r"\s+(?:(?:in|about|how|that|when|what|the way)\s+)?(?:you|your|yours|us)\b", re.IGNORECASE)
DEICTIC = re.compile(r"\s+(?:(?:with|about|of|on|in|for|by)\s+)?(?:(?:any|some|all|none|one|most)\s+of\s+)?(?:"
                      r"(?:it|this|these|those|them|him|her|his|its|their|one)\b(?!\s+(?:kinds?|sorts?|types?)\b)|"
                      r"that\b(?!\s+(?:kinds?|sorts?|types?|all|the|a|an|every|each|no|some|i|you|we|they|he|she|it|"
                      r"my|our|people|there)\b)|"
                      r"\w+ing\s+(?:(?:lost|out|around|in|into|with|at|to|on|up)\s+){0,2}(?:it|them|him|her|those)\b|"
                      r"(?:how|when|the way)\s+(?:it|this|that|these|those|they|he|she|the)\b|"
                      r"that\s+(?:it|this|they|he|she|you)\b|the way\b|"
                      r"how\s+\w+\s+(?:it|this|that|they|he|she)\s+(?:is|are|was|were|looks?)\b|"
                      r"how\s+\w+\s+(?:this|that|these|those|the|my|your|our)\s+\w+\s+(?:is|are|was|were|takes?|"
                      r"took)\b)", re.IGNORECASE)
EXTRAPOSED = re.compile(r"\s+it\s+(?:\w+\s+){1,2}(?:to|when|if)\b", re.IGNORECASE)  # "I find it hard to focus"
WONT_DO = re.compile(r"\s+(?:ever\s+)?(?:eat|drink|wear|use|buy|watch|read|play|listen|fly|stay|book|travel|touch|"
                      r"consider|own|pay|do|go|take|work|shop|support|attend|keep|visit|ride|drive|rent|adopt|"
                      r"hire|sit|order|pick|choose|spend|crate|feed|allow|tolerate|accept|set foot)\b|"
                      r"\s+(?!(?:let|tell|say|give|stop|hurt|forget|miss|need|do|make|mind)\b)\w+\s+(?:any|anything|"
                      r"more than|over|under|less than)\b", re.IGNORECASE)
# the cue sits in a relative or conditional clause: "something I love", "which I find cute", "even if I'm not"
EMBEDDED = re.compile(r"\b(?:what|which|who|whom|something|anything|everything|thing|things|ones?|stuff|if|unless|"
                       r"whether|how|(?<!think )(?<!know )(?<!said )(?<!feel )(?<!sure )that)\s*$|"
                       r"\b(?:the|this|that|these|those|a|an|another|some|any|every|my|your|his|her|our|"
                       r"their)\s+(?:[\w-]+\s+){0,2}(?!(?:and|but|so|or|because|cause|as|since|though|although|while|"
                       r"why|think|know|say|guess|mean|feel|that|really|actually|too|just|still)\b)[a-z]+\s*$",
                       re.IGNORECASE)
# ... but a predicate is asserted: "lengthy drives are something I avoid" (not "That's what I like to hear")
CLEFT = re.compile(r"(?<![Tt]hat)(?<![Tt]his)(?<![Ii]t)(?:'s|'re|\s+is|\s+are)\s+(?:\w+\s+)?"
                    r"(?:something|anything|things?|what|ones?)\s*$")
FRONTED = re.compile(r"^(?:when|whenever|for|on|in|at|during|while|with|as for|after|before|since|ever since|"
                      r"because of|due to|given|thanks to)\b", re.IGNORECASE)
# the sentence tells of an occasion: a past time, a recalled liking, an offer, sympathy or certainty about others
PAST = re.compile(r"\b(?:used to|yesterday|last (?:night|week|weekend|month|year|summer|winter|spring|fall|autumn|"
                   r"time|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|the other (?:day|night|week)|"
                   r"(?:a|one|two|three|few|couple of|some) (?:days?|weeks?|months?|years?) ago|"
                   r"as a (?:kid|child|teen|teenager|little \w+)|when I was (?:a |an |young|little|small|younger|\d)|"
                   r"when I (?:took|went|got|lived|worked|studied|started)|"
                   r"(?:^|,\s*)(?:and |but |so |then |plus |also )?"
                   r"I (?:just |recently |finally |also |even |actually )?"
                   r"(?:found(?! out)|went|made|got|took|saw|met|tried|started|bought|thought|did|came|left|decided|"
                   r"was (?:thinking|wondering|hoping|a bit)|"
                   rf"(?!need|feed|proceed|embed|bleed|breed|exceed|succeed|speed|heed|stopped (?:{GIVEN_UP})\b)"
                   r"\w+ed))\b",
                   re.IGNORECASE)
RECALLED = re.compile(r"\bremind(?:s|ed|ing)? me (?:why|how|of|that|what)\b|\bremember (?:why|how)\b|"
                       r"^(?:hope|wish)\b|\bmade me (?:appreciate|realize|remember|think|feel)\b|"
                       r"\bI(?:'m| am) (?:so |really |just )?(?:glad|sure|grateful|thankful)\b|\bI (?:bet|wish|hope)\b",
                       re.IGNORECASE)
PLAN = re.compile(r"^(?:\w+,\s*)?I(?:'m| am) (?:\w+ly |just |currently |now )?(?!trying to\b|cutting (?:out|back)\b|"
                   r"avoiding\b|staying away\b|steering clear\b|"
                   # night work is a way of life, not a plan: "I'm working overnights at the hospital"
                   r"working (?:overnights|nights|night shifts?|the night shift|graveyard)\b)\w+ing\b|"
                   r"^(?:\w+,\s*)?I(?:'ve| have) (?:also |actually |just |recently )?been "
                   r"(?!(?:avoiding|eating|following|sticking|staying|trying|cutting|limiting|keeping|living|"
                   r"working)\b)\w+ing\b|"
                   r"\bI(?:'ll| will) (?:also |definitely |just |probably )?"
                   r"(?:start|try|think|make|get|check|look|see|keep|be|have|give|let|add|"
                   r"do(?! (?:almost |just about )?anything to avoid))\b", re.IGNORECASE)
OFFER = re.compile(r"\blet me know\b|\bif you (?:ever )?(?:need|want)\b|\b(?:here|happy|glad|love|willing|ready) to "
                    r"(?:help|support|lend|assist|cheer|share|chat|listen|hear)\b|\bshoot me\b|\banytime you\b|"
                    r"\bkeep you (?:updated|posted|informed)\b|\blet you know\b",
                    re.IGNORECASE)
# a budget as a noun ("my budget is $200", "the trip budget"), not as an adjective of the thing picked ("I'll take
# the budget hotel room", "a budget airline": one pick)
BUDGET = re.compile(r"\b(?:my|the|our)\s+(?:\w+\s+){0,2}budget\b(?![ -]+(?:friendly|hotels?|rooms?|airlines?|"
                     r"carriers?|options?|flights?|motels?|hostels?|inns?|stays?|cars?|rentals?|picks?|choices?|"
                     r"brands?|models?|versions?|tiers?|plans?|meals?|trips?|travel|phones?|laptops?)\b)|"
                     r"\bI\b[^.;!?]{0,30}\bon an? (?:[\w-]+\s+){0,2}budget\b|"
                     r"\b(?:under|below|at most|no more than|up to|"
                     r"less than|max(?:imum)?|within)\s+[$€£]\s?\d", re.IGNORECASE)
RULE = re.compile(r"^(?:(?:and |also |please |as a |a |my |our )?(?:rule|policy)[^:]{0,30}:\s*)?"
                   r"(?:please\s+)?(?:(?<=: )(?:I|we|she|he|they|it)\s+)?(?:always|never|don't ever|do not ever|only|"
                   r"no\s+\w+\s+(?:on|before|after))\b",
                   re.IGNORECASE)
RULE_ANY = re.compile(r"\b(?:only on (?:weekdays|weekends|mondays?|tuesdays?|wednesdays?|thursdays?|fridays?)|"
                       r"never on (?:weekends|saturdays?|sundays?|fridays?)|(?:rule|policy) going forward|"
                       r"from now on|going forward|no exceptions|non-?negotiable|(?:is|are) sacred|"
                       r"^(?:a\s+)?(?:hard|firm) (?:pass|no) on|"
                       r"(?:isn't|is not|aren't|are not) (?:going to|gonna) change|^(?:[\w'-]+\s+){1,4}or nothing|"
                       r"whatever it costs)\b", re.IGNORECASE)
# a rule said as one ("House rule: no screens at dinner", "My rule: no ride-hailing apps", "Golden rule is simple: …")
RULE_HEADER = re.compile(r"^(?:(?:my|our)\s+(?:own\s+|one\s+|golden\s+|personal\s+|travel\s+|money\s+)?|"
                          r"(?:(?:a|one|the)\s+)?(?:house|family|golden|personal)\s+)rules?(?: of thumb)?"
                          r"(?:\s+is(?: simple)?)?\s*:\s*\S", re.IGNORECASE)
# a kind taken every time, said as a fragment ("Window seat, always.", "Subtitles over dubs, always.", "Don't spoil
# endings for me, ever."); not a greeting ("Thanks, always.") or a one-word answer ("Yes, always.")
ALWAYS_TAIL = re.compile(r"^(?!(?:thanks|thank|love|miss|see|yes|yeah|no|nope|ok|okay|sure|same|as|it|he|she|they|"
                          r"that|this|you|there|which|what|who|we|his|her|their|I|I'\w+)\b)"
                          r"\w[^,;:?]{3,80},\s*(?:always|ever|every (?:single )?time|any day(?: of the week)?|"
                          r"no matter what|without fail|without exception)\s*[.!]*$", re.IGNORECASE)
# a landlord's or a lease's rule: "my lease forbids drilling", "Our landlord caps pets at 20 pounds"
HOUSE_RULE = re.compile(r"(?:^|,\s*(?:and\s+|so\s+)?)(?:my|our) (?:landlord|lease|building|hoa|condo board|employer|"
                         r"company)\s+(?:\w+\s+)?(?:forbids|bans|prohibits|caps|limits|doesn't allow|does not allow|"
                         r"won't allow|only allows)\b", re.IGNORECASE)
# "Count me out of anything labeled a detox"
COUNT_OUT = re.compile(r"^(?:\w+,\s*)?count me out of\b", re.IGNORECASE)
# an instruction about what to do with the speaker: "Don't even think about putting me in Yankee Stadium"
DONT_ME = re.compile(r"^(?:please\s+)?(?:don't|do not|never)\s+(?:ever\s+)?(?:even\s+)?(?:think about\s+|try\s+)?"
                      r"(?:book|put|seat|send|schedule|sign|suggest|recommend|offer|serve|give|take|drag|bring)\w*\s+"
                      r"(?:me|us)\b", re.IGNORECASE)
# "Always here to help", "Never had a chance": an adverb with no instruction after it
RULE_NOT = re.compile(r"\s*(?:here|good|great|happy|glad|nice|fun|so|such|a|an|the|up|had|been|was|were|did|knew|"
                       r"thought|mind|ever|done|heard|seen|gone|known|met|got|felt|made|said|told|"
                       r"(?!need\b|feed\b|proceed\b)\w+ed|\w+ing)\b", re.IGNORECASE)
# who lives with the user, what they drive, their time zone: "i have 2 rabbits that free roam the apartment", "We
# have three kids", "I own a 2014 Subaru Outback", "I'm on Central time" (not "I have two tickets", "I'm on time");
# read after every other form ("We have two big dogs who shed constantly, so anything I buy ... needs to survive" is
# the rule it gives a reason for)
HOUSEHOLD = re.compile(
    r"\b(?:(?:I|we) (?:have|own|live with|share (?:my|our|the) (?:home|house|place|apartment|flat) with) "
    r"(?:a|an|one|two|three|four|five|six|\d) (?:[\w-]+ ){0,2}?(?:dogs?|cats?|rabbits?|bunnies|birds?|parrots?|"
    r"hamsters?|guinea pigs?|horses?|ferrets?|turtles?|tortoises?|lizards?|snakes?|kids|children|sons?|daughters?|"
    r"toddlers?|teenagers?|teens|twins|boys|girls|grandkids|grandchildren|puppy|puppies|kittens?|roommates?|"
    r"flatmates?)|"
    r"I (?:own|drive) an? (?:(?:19|20)\d\d|(?:[\w-]+ ){0,3}?(?:car|truck|pickup|van|minivan|suv|hatchback|sedan|"
    r"wagon|motorcycle|motorbike|scooter|e-bike))|"
    r"I(?:'m| am) on (?:central|eastern|pacific|mountain|atlantic|alaska|hawaii|gmt|utc|bst|cet|cest|est|edt|pst|pdt|"
    r"cst|cdt|mst|ist|jst|aest|uk|london|berlin|paris|tokyo|sydney|new york|chicago|la) time|"
    r"my time ?zone is)\b", re.IGNORECASE)
# ... said with what it means for anything suggested ("..., so nothing with dangly cables"): the preference it gives a
# reason for ("so much", "so cute" are no consequence)
SO_THEN = re.compile(r"\bso\b(?!\s+(?:much|many|long|far|cute|sweet|fun|good|great|happy|excited|proud|glad|"
                      r"lucky|busy|that)\b)", re.IGNORECASE)
IDENTITY = re.compile(r"\b(?:my name is|I live in|I work (?:[\w-]+ ){0,2}(?:shifts|nights)|I'm (?:based|located) in|"
                       r"I am (?:based|located) in|I work (?:as|at|for|in)|"
                       r"I(?:'m| am) \d{1,2}(?: years old)?(?=\s*(?:[,.;]|and\b|$))|"
                       r"I'm a (?:[\w-]+ ){0,2}?(?:nurse|teacher|doctor|developer|engineer|student|designer|parent|mom|"
                       r"dad|"
                       r"manager|lawyer|chef|writer|researcher|retiree)|"
                       # "I'm the main caregiver for my elderly father"
                       r"I(?:'m| am) (?:the|a|an) (?:[\w-]+ ){0,2}?(?:caregiver|carer)|"
                       r"I am a (?:nurse|teacher|doctor|developer|engineer|student|designer|parent|manager|lawyer|chef|"
                       r"writer|researcher))\b", re.IGNORECASE)
# a membership the user holds, by its number ("My United MileagePlus number is UA-MP 88213457"): an identity fact a
# booking of its kind needs. The program's name is capitalised or a membership word says what it is; an order's,
# a ticket's, a card's or an account's number is not one (one occasion, or a secret), nor is a bare "my number",
# nor a document's (a passport, a national id, a licence, an insurance: identity papers stay in the episode)
MEMBERSHIP = re.compile(r"\bmy\s+(?P<name>(?:[\w&'-]+\s+){1,4}?)(?:number|no\.?|#|ID)\s*(?:\bis\b|=|:)\s*"
                         r"(?P<value>[A-Za-z0-9][A-Za-z0-9 -]{0,24}\d)\b", re.IGNORECASE)
MEMBER_WORD = re.compile(r"\b(?:member(?:ship)?|loyalty|rewards?|frequent[- ]fl[yi]er|miles|points|known traveler|"
                          r"traveller|global entry|redress)\b", re.IGNORECASE)
NOT_MEMBER = re.compile(r"\b(?:order|confirmation|booking|ticket|tracking|reference|case|invoice|receipt|card|credit|"
                         r"debit|bank|account|routing|pin|password|passcode|cvv|security|social|ssn|tax|phone|mobile|"
                         r"license|licence|driver'?s?|passport|national|identity|insurance|medicare|medicaid|nhs|visa|"
                         r"plate|room|seat|flight|table|house|street|apartment|flat|serial|model)\b",
                         re.IGNORECASE)
REVISION = re.compile(r"\b(?:changed my mind|from now on|instead|now (?:up to|under|at most)|no longer|any more|"
                       r"anymore|raise|lower|increase|decrease|bump)\b", re.IGNORECASE)
# not standing knowledge: requests, questions, prompts aimed at the assistant
REQUEST = re.compile(r"^\s*(?:can|could|would|will) you\b|"
                      r"\bI(?:'d| would) (?:like|love) to (?:know|ask|learn|get|find|see|hear|try|discuss|check|visit|"
                      r"explore|take|dive)\b|\bI (?:want|need|would like|would want|'d like) you\b|"
                      r"\bI (?:want|need) (?:to(?! (?:avoid|stay away|steer clear|limit|keep away|be careful|watch))|"
                      r"an?|some|help|the)\b|"
                      r"\bact as\b|\bpretend\b|^\s*(?:write|give|tell|show|generate|create|explain|list|translate|"
                      r"summari[sz]e|rewrite|convert|fix|make|help)\b", re.IGNORECASE)
# a reaction to a proposal, or a want of the moment: "I like the idea of ...", "I'm interested in the course"
# how the speaker comes across to, or what they do to, someone in the situation at hand
CONCERN = re.compile(r"\s+to\s+(?:come\s+(?:off|across|on)|seem|sound|look|appear|be\s+seen|hurt|offend|upset|"
                      r"disappoint|let\s+\w+\s+down|overstep|impose|intrude|be\s+(?:rude|pushy|a\s+burden))\b",
                      re.IGNORECASE)
# wherever the speaker goes: "on every trip", "everywhere I go"
_ALONG = r"(?:on|for) every (?:trip|journey|holiday|vacation|flight|outing)|everywhere I go|wherever I go"
# a habit said with how often: "I practise yoga two to three times a week", "I'm usually in a rush"
HABIT = re.compile(r"(?:\bI(?:'ve been|'m| am| have been)\s+(?:\w+ly\s+)?\w+ing|\bI\s+(?:also\s+|still\s+|\w+ly\s+)?"
                    r"(?:go|do|practi[cs]e|run|swim|cook|read|walk|cycle|ride|train|work out|meditate|play|fast|pray|"
                    r"drink|eat|wake up|get up|keep|tip|stretch|journal|nap)|\bI(?:'m| am) (?:in bed|up|asleep|awake))\b"
                    r"[^.;!?]{0,60}\b(?:regularly|every (?:day|morning|evening|night|afternoon|week|weekend|year)|"
                    rf"{_ALONG}|year-round|all year round|"
                    r"(?:once|twice|\w+ times|\d+ times) a (?:day|week|month))\b|"
                    # who or what comes along: "I take my 90-pound Newfoundland with me on every trip" (not "I take my
                    # camera with me every day for a month": a plan)
                    rf"\bI\s+(?:always\s+)?(?:take|bring)\b[^.;!?]{{0,60}}\b(?:{_ALONG})\b|"
                    r"\bI(?:'m| am) (?:usually|always|often|generally) (?:in a (?:rush|hurry)|short on time|on a budget)\b",
                    re.IGNORECASE)
# a kind of thing ruled out for the speaker: "NSAIDs are off-limits for me", "a dog just isn't an option for me",
# "spectator events don't interest me" (not "that's out of the question", "it doesn't suit me": one thing at hand)
RULED_OUT = re.compile(r"^(?!(?:that|it|this|which|what|these|those|they|he|she)\b)[^;:?]{3,120}?\b(?:"
                        r"(?:is|are|'s|'re)\s+(?:\w+\s+)?(?:off-limits|off limits|out of the question|a no-go|"
                        r"an? (?:(?:total|complete|absolute|real|huge|big|major|instant)\s+)?(?:deal-?breaker|"
                        r"non-starter)|a no (?:for|from) me)|"
                        r"(?:isn't|aren't|is not|are not)\s+(?:\w+\s+)?(?:an option|for me)|"
                        r"(?:don't|doesn't|do not|does not)\s+(?:really\s+)?(?:interest|appeal to|agree with|"
                        r"sit well with)\s+me|"
                        # "A bathtub is a must for me", "a shower-only room doesn't cut it for me"
                        r"(?:is|are|'s|'re)\s+(?:\w+\s+)?(?:a must|mandatory|essential|non-negotiable)\s+for me\b|"
                        r"(?:don't|doesn't|do not|does not)\s+(?:really\s+)?cut it for me\b|"
                        # "Raw fish is a hard no for me", "Shared bathrooms are absolutely out", "Minimalism is my
                        # thing", "Long walks are really hard for me", "Golf is the dullest thing on earth to me",
                        # "Buying new is a waste of money", "Caffeine and I don't mix"
                        r"(?:is|are|'s|'re)\s+(?:\w+\s+)?(?:a (?:hard|firm|big) no|(?:absolutely|completely|totally|"
                        r"definitely|strictly) out)|"
                        r"(?:is|are|'s|'re|isn't|aren't|is not|are not)\s+(?:(?:totally|really|very much|definitely|"
                        r"just|so|not|really not)\s+)?my thing|"
                        r"(?:is|are)\s+(?:(?:really|very|just|too|way too|so|pretty|incredibly)\s+)?(?:hard|difficult|"
                        r"impossible|painful|unbearable|exhausting|torture|miserable)\s+(?:for|on)\s+me|"
                        r"(?:is|are)\s+(?:(?:just|always|honestly)\s+)?the\s+(?:worst|dullest|most boring|least \w+)\s+"
                        r"[^.;!?]{0,40}?\b(?:for|to)\s+me|"
                        r"(?:is|are)\s+(?:(?:just|always|honestly)\s+)?a (?:total |complete )?waste of (?:money|time)|"
                        r"and I (?:just |really |simply )?(?:don't|do not) (?:mix|get along)|"
                        # "Mushrooms are a hard pass for me", "a daily commute is off the table", "leasing isn't worth
                        # it to me", "bars aren't my scene", "coffee shops never work for me", "cramped seating is a
                        # real problem for me", "meat is off my plate for good"
                        r"(?:is|are|'s|'re)\s+(?:\w+\s+)?a (?:hard|firm|huge|big|definite) (?:pass|no)|"
                        r"(?:is|are|'s|'re)\s+(?:\w+\s+)?off (?:the table|the menu|my plate|my list)|"
                        r"(?:isn't|aren't|is not|are not)\s+(?:\w+\s+)?worth it (?:to|for) me|"
                        r"(?:isn't|aren't|is not|are not|'s not|'re not)\s+(?:\w+\s+)?my "
                        r"(?:scene|style|cup of tea|jam)|"
                        r"(?:never|doesn't|don't|does not|do not)\s+(?:\w+\s+)?works? (?:out )?for me|"
                        r"(?:is|are)\s+(?:\w+\s+)?(?:an? )?(?:real |big |huge |total |absolute )?(?:problem|nightmare|"
                        r"no-go|dealbreaker|deal-breaker) for me|"
                        r"(?:has|have) an? (?:(?:strict|hard|firm)\s+)?(?:[\w-]+\s+){0,3}(?:limit|ban) on)\b",
                        re.IGNORECASE)
# a sentence that opens with a kind of thing, not a pronoun, a determiner of one thing or "there" (AVERSE, TO_ME),
# and no pronoun before what is said of it
_NOT_A_KIND = r"that|it|this|which|what|these|those|they|he|she|you|we|the|his|her|their|your|our|my|there|here"
_KIND_FIRST = r"(?:(?!\b(?:that|it|this|these|those|they|he|she|you|we)\b)[^;:?]){3,80}?\b"
# a kind of thing that does this to the speaker: "Mushrooms disgust me", "Loud, crowded restaurants give me a
# headache", "Layovers drive me up the wall", "Open-plan offices destroy my focus", "Cilantro tastes like soap to
# me" (present tense, a kind as subject: not "That movie gave me a headache", "it drives me crazy")
AVERSE = re.compile(r"^(?!(?:" + _NOT_A_KIND + r")\b)" + _KIND_FIRST + r"(?:"
                     r"(?:disgusts?|repulses?|nauseates?|sickens?|bores?|terrif(?:y|ies)|scares?|frightens?|"
                     r"stress(?:es)?|gross(?:es)?|freaks?) me(?: out| to tears)?|"
                     r"(?:give|gives) me (?:an? )?(?:headaches?|migraines?|hives|heartburn|indigestion|a rash|"
                     r"the creeps|anxiety|palpitations)|"
                     r"(?:drive|drives) me (?:crazy|nuts|mad|insane|up the wall|bonkers)|"
                     r"(?:make|makes) me (?:(?:so|very|really|extremely|incredibly|quite|deeply|a bit|a little|super)"
                     r"\s+)?(?:sick|nauseous|queasy|anxious|itch|sneeze|break out|miserable|unhappy|"
                     r"nervous|uneasy|cranky|want to (?:scream|cry|run|leave))|"
                     r"(?:ruin|ruins|spoil|spoils) (?:an? |the |any )?[\w-]+ for me|"
                     r"(?:destroy|destroys|kill|kills|ruin|ruins|wreck|wrecks) my (?:focus|concentration|productivity|"
                     r"sleep|back|knees|stomach|appetite)|"
                     r"(?:taste|tastes|smell|smells|feel|feels) (?:like [\w' -]{2,20}|awful|terrible|horrible|"
                     r"disgusting|gross|vile|wrong) to me)\b", re.IGNORECASE)
# what a kind of thing is to the speaker, the kind said first: "Country music is something I have never been able
# to get into", "Historical fiction is the genre I keep coming back to", "Boutique hotels have always appealed to me",
# "Reliability matters far more to me than performance", "Paper lists work better for me than any app", "Vintage
# shops are my first stop", "Jazz has been my favourite genre since my teens" (not "That has always appealed to me",
# "The talk mattered to me": one thing at hand; nor a pick or a time of the moment: "Option B works better for me",
# "Tuesday works better for me", "3pm works better for me than 2pm")
TO_ME = re.compile(r"^(?!(?:" + _NOT_A_KIND + r"|everything|nothing|something|anything|either|neither|both|option|"
                   r"choice|number|plan|package|tier|version|today|tonight|tomorrow|next|"
                   r"(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b)(?!\d)" + _KIND_FIRST + r"(?:"
                   r"(?:is|are)\s+(?:something|a thing|the (?:[\w-]+\s+)?(?:genre|kind|type|sort|style|thing|food|cuisine|"
                   r"place|music|sport|format)s?)\s+(?:that\s+)?I(?:'ve| have)?\s+(?:always\s+|never\s+|just\s+|simply\s+)?"
                   r"(?:been able to\s+|managed to\s+)?(?:get into|got into|keep (?:coming|going) back to|come back to|"
                   r"gravitate (?:to|towards?)|return to)|"
                   r"(?:has|have)\s+(?:always\s+|long\s+|never\s+)?(?:appealed|mattered) to me|"
                   r"(?:appeals?|matters?)\s+(?:(?:far|much|a lot|way|so|really|even)\s+)?(?:more\s+)?to me\b|"
                   r"(?:works?|suits?)\s+(?:(?:much|far|a lot|way)\s+)?better for me|"
                   r"(?:is|are)\s+(?:always\s+)?my first (?:stop|choice|port of call)|"
                   r"(?:has|have)\s+(?:always\s+)?been my (?:absolute\s+|all-time\s+)?favou?rite)\b", re.IGNORECASE)
# a lasting condition or way of being said as who the speaker is, before what follows from it ("As someone with a
# real fear of flying, I'll go to almost any length to stay on the ground"; not "As someone who loves you, ...", "As
# someone who just moved here, ...", "As someone who has donated to ...", what the speaker knows or thinks after it
# ("..., I know firsthand how impactful those things can be"), nor anything said to "you")
AS_SOMEONE = re.compile(r"^As (?:someone|somebody|a person|an? (?:[\w-]+ )?(?:person|traveler|traveller|eater|parent|"
                        r"owner|driver|patient|sufferer)) (?:with|who)\b(?![^,;]*\b(?:you|just|recently|once)\b)"
                        r"(?![^,;]*\b(?:has|have|had|was|were|'s|grew)\s+\w+ed\b|[^,;]*\bgrew up\b)"
                        r"[^,;?]{3,80},\s*(?=I\b|I'|my\b)(?!I (?:know|think|believe|feel|understand|realize|agree|"
                        r"guess|suppose|wonder|hope)\b|I'm (?:\w+ )?aware\b)(?![^.;!?]*\byou\b)", re.IGNORECASE)
# the speaker as a kind of person: "I'm someone who enjoys bold, fermented flavours", "I'm the type of person who
# never checks a bag"
SOMEONE_WHO = re.compile(r"\bI(?:'m| am) (?:\w+ )?(?:someone|somebody|a person|the (?:kind|type|sort) of (?:person|guy|"
                         r"woman|man|traveller|traveler|eater|reader)) who (?:\w+ly |always |never |really |just )?"
                         r"(?:enjoys|loves|likes|prefers|hates|avoids|values|needs|cares|can't|cannot|won't|doesn't|"
                         r"never|always|gets)\b", re.IGNORECASE)
# a standing instruction after what the assistant does: "Whenever you suggest a plan, present it as a numbered list",
# "Every time you write code for me, add type hints" (not "Whenever you get a chance, send me the file", nor "When
# you book the hotel, ...": this one errand)
WHENEVER_YOU = re.compile(r"^(?:whenever|every time|any ?time|each time)\s+you\s+(?:\w+\s+)?(?:suggest|recommend|"
                          r"write|give|answer|respond|reply|explain|list|plan|draft|show|present|summari[sz]e|book|"
                          r"schedule|propose|quote|mention|cite|translate|format|refer to|talk about|compare)\b"
                          r"[^,;:?]{0,80},\s*(?:please\s+)?(?:always\s+|never\s+|don't\s+|do not\s+)?"
                          r"(?!(?:I|we|it|that|this|they|he|she|you|the|a|an|my|there|thanks|thank)\b)[a-z]+\b",
                          re.IGNORECASE)
# what a kind of thing must always or never be: "Dates should always be written in day-month-year format", "Commit
# messages should never mention ticket numbers" (not "You should always be careful": a pronoun's)
SHOULD_ALWAYS = re.compile(r"^(?!(?:that|it|this|which|what|these|those|they|he|she|you|we|i|there|here|people|"
                           r"everyone|everybody|nobody|one)\b)[^,;:?]{3,60}?\bshould (?:always|never)\s+(?:be|use|"
                           r"include|follow|have|go|mention|contain|come|start|end)\b", re.IGNORECASE)
# what the speaker means never to do again, said of themself: "I've worked remotely for five years and have no
# intention of ever going back to an office" (not "I had no intention of ...": one occasion; nor with a time of the
# moment, read apart)
NO_INTENTION = re.compile(r"\b(?:I|I've|and|but|so)\s+(?:have\s+|I\s+have\s+)?(?:absolutely\s+)?no (?:intention|desire) "
                          r"(?:of|to) (?:ever |again )?[a-z]+", re.IGNORECASE)
# what a kind of thing does to the speaker, said of any of it or even the least of it: "Anything that bounces me
# around on washboard roads means a week of back pain afterward", "Even an ice machine clanking down the hall will
# wake me", "My cats would claw anything looped or shaggy to bits within a week" (present or would: "Even the staff
# made me feel welcome" tells of an occasion)
ANY_EFFECT = re.compile(r"^(?:anything|everything|any [\w-]+) (?:that|which|with|in|on|over|under|near|more|less)\b"
                        r"[^.;!?]{2,80}?\b(?:means?|leaves? me|gives? me|makes? me|sends? me|puts? me|costs? me|"
                        r"wakes? me|keeps? me)\b|"
                        r"^even (?:an? |the |one |the slightest |the smallest |a little )?[^,.;!?]{2,60}?\b"
                        r"(?:will |would |can |could )?(?:wakes?|keeps?|makes?|gives?|sets?|leaves?|sends?) (?:me|off)\b|"
                        r"^(?:my|our) (?:[\w-]+ ){1,2}(?:would|will) (?:\w+ )?(?:anything|everything)\b",
                        re.IGNORECASE)
# what the speaker's body rules out for good: "I can't play anything with sudden cutting", "I can't sit for hours"
CANNOT = re.compile(r"\bI (?:really |just |simply |physically )?(?:can't|cannot) (?:play|sit|stand|walk|eat|drink|"
                     r"lift|handle|tolerate|digest|sleep|run|climb|carry|hike|ride|wear|do) (?:anything\b|any\b|"
                     r"for (?:long|hours|more than)\b|more than\b|long (?:walks|distances|hours|flights|drives)\b)|"
                     # "I can't sleep without blackout curtains", "I can't work without a second monitor"
                     r"\bI (?:really |just |simply )?(?:can't|cannot) (?:sleep|work|focus|function|relax|travel|"
                     r"concentrate|start my day|write|cook) without\b|"
                     # where the user's mind or body never settles: "I simply can't get deep work done in open-plan
                     # spaces", "I can't focus in noisy cafes" (not "in this heat", "in the office today": MOMENT)
                     r"\bI (?:really |just |simply )?(?:can't|cannot) (?:get (?:any |much |deep |real |serious )?"
                     r"(?:work|writing|thinking|studying|sleep|rest) done|focus|concentrate|think straight|sleep|relax"
                     r") (?:in|on|around|near) (?!(?:this|that|these|those|here|there|the)\b)(?:an? |any )?[\w-]+|"
                     # what the user can do no more: "since the knee surgery I can't really do stairs anymore"
                     r"\bI (?:really |just |simply |physically )?(?:(?:can't|cannot) (?:really |even )?(?=(?:\w+ ){1,12}?"
                     r"(?:anymore|any more|any longer)\b)|can no longer )"
                     r"(?:do|handle|manage|eat|drink|have|take|walk|climb|sit|stand|lift|run|fly|ride|sleep|tolerate|"
                     r"digest|wear|play|hike|carry)\b(?! (?:this|that|it|them|him|her|you|anymore)\b)",
                     re.IGNORECASE)
# a condition of the speaker's set off by a kind of thing: "My asthma flares up with cold air", "My back acts up on
# soft mattresses" (present tense; not "my back flared up yesterday")
TRIGGERED = re.compile(r"^(?:my|our) (?:[\w-]+ ){0,2}?(?:asthma|allergy|allergies|eczema|migraines?|back|knees?|"
                        r"hips?|joints?|arthritis|ibs|stomach|skin|sinuses|rosacea|psoriasis|acid reflux|reflux|"
                        r"heartburn|tinnitus|anxiety|vertigo|motion sickness|hay fever) (?:flares? up|acts? up|gets? "
                        r"worse|plays? up) (?:with|in|on|around|when|whenever|after|if)\b", re.IGNORECASE)
# what a lasting condition rules out: "Knee surgery last year means no running for me anymore"
MEANS_NO = re.compile(r"\bmeans? (?:no|not|never) [^,;:?]{2,40}?\bfor (?:me|us)\b", re.IGNORECASE)
# "The only games I care about are esports": the one kind the speaker takes
ONLY_KIND = re.compile(r"^(?:the|my) only\s+(?:[\w-]+\s+){1,4}I\s+(?:\w+\s+)?(?:care about|like|love|enjoy|watch|"
                        r"eat|read|play|wear|buy|trust|follow|drink)\b|"
                        # a kind said with "only" and nothing else: "Firm mattresses only.", "Window seats only, please."
                        # (not an amount of the moment: "Two tickets only.")
                        r"^(?!(?:\d+|one|two|three|four|five|six|a|an|the|this|these|those)\b)(?:[\w-]+\s+){0,3}"
                        r"[\w-]+s\s+only(?:,?\s*(?:please|thanks))?[.!]*$", re.IGNORECASE)
# a need said with its lasting reason: "Because of my bad knees, I need a car with a high seat" (a request of the
# moment says when: MOMENT)
LEAD_REASON = r"^(?:because|since|as|given|being)\b[^,;]{3,80},"  # "Because of my bad knees, ...", "Being a light sleeper, ..."
REASONED_NEED = re.compile(rf"(?:\bso,?|{LEAD_REASON})\s*I\s+(?:always\s+|really\s+|"
                            r"generally\s+|usually\s+)?(?:need|want)\s+(?:an?|some)\b", re.IGNORECASE)
# what the household needs wherever it goes, said with the lasting reason before it: "My partner uses a wheelchair,
# so anywhere we go together needs ramps", "With a toddler and a baby in tow these days, we need restaurants that are
# truly kid-friendly", "We have a 90-pound German shepherd, so pet-friendly places need to allow big dogs", "I'm on
# warfarin, so I need to keep my vitamin K intake steady" (an errand says when, MOMENT; a past cause is extract.episodic,
# whose consequence alone is read again, without the reason this asks for: "My car broke down, so we need a new one")
LASTING_NEED = re.compile(
    rf"(?:,\s*so|{LEAD_REASON}|^with\b[^,;]{{3,80}},)\s*(?:"
    r"(?:I|we)\s+(?:always\s+|really\s+|truly\s+|still\s+)?need\s+"
    r"(?!(?:to|a break|more|some time|help|your|you|it|this|that|them|something|anything|someone|somewhere)\b)|"
    r"(?:I|we)\s+(?:always\s+|really\s+)?(?:need to|have to|must)\s+(?:keep|avoid|stay|watch|limit|stick|"
    r"be careful)\b|"
    r"(?:anywhere|anyplace|wherever|anything|everything|plans|(?:[\w-]+\s+)?(?:places?|spots?|rooms?|restaurants?|"
    r"hotels?|rentals?|trips?|outings?|apartments?|cars?))\b[^,;:?]{0,40}?\b(?:needs?|has to|have to|must)\b)",
    re.IGNORECASE)
# a reason of the moment, not a lasting one: something under way ("It's raining, so we need umbrellas") or done
# ("My car broke down, so we need a new one"); "I've got two dogs", "I've had asthma for years" hold
PASSING_REASON = re.compile(r"\b(?:is|are|am|was|were|'s|'re|'m)\s+(?:\w+\s+)?\w+ing\b|"
                             r"(?<!'ve )(?<!\bhave )\b(?:broke|got|went|came|fell|lost|ran|took|had|was|were|left|found|"
                             r"told|said|gave|"
                             r"made|bought|ate|drank|forgot|spent|sold|won|hurt|cut|split|quit)\b|"
                             r"(?<!\bis )(?<!\bare )(?<!\bam )(?<!'s )(?<!'re )(?<!'m )(?<!\bget )(?<!\bgot )\b\w+ed\b",
                             re.IGNORECASE)
# a standing instruction with the lasting reason before it: "I'm in Pacific time, so convert everything to that",
# "My passport is Canadian, so keep visa rules for Canadians in mind", "We're a Go shop, so default to Go" (what it
# asks holds for every such thing: an errand asks for one, "It's late, so book me a taxi"); the comma before "so" may
# be left out, as people type it
SO_RULE = re.compile(r"(?:,|;|\s)\s*(?:and\s+)?so,?\s+(?:please\s+)?(?:always\s+|never\s+)?(?:default\s+to\b|(?:convert|"
                      r"keep|leave|ask|use|avoid|plan|book|give|skip|assume|stick|write|explain|remind|factor|check|"
                      r"show|put|schedule|suggest|recommend|pick|choose|answer|reply|respond|format|list|quote|price|"
                      r"budget|stay|go|make)\b[^.;!?]{0,80}?\b(?:everything|anything|always|never|whenever|every|any|all|"
                      r"in mind|by default|schedules|plans|from now on)\b)", re.IGNORECASE)
# what the speaker calls themself in a phrase: "Early bird here, up at 5 every day", "Big sports fan here", "Vegetarian
# since I was twelve" (not "Same here!", "Nice weather here")
SELF_LABEL = re.compile(r"^(?:(?:a|an|total|big|huge|lifelong|proud|certified|hopeless|die-hard|diehard)\s+)*"
                         r"(?:[\w-]+\s+){0,2}(?:person|type|eater|sleeper|drinker|lover|fan|addict|freak|bird|owl|"
                         r"introvert|extrovert|homebody|foodie|minimalist|vegan|vegetarian|pescatarian|snob|nerd|geek)"
                         r"\s+here\b|"
                         r"^(?:(?:strict|lifelong|proud)\s+)?(?:vegetarian|vegan|pescatarian|sober|teetotal|gluten-free|"
                         r"dairy-free|kosher|halal)\s+(?:since|for (?:\w+\s+){1,2}(?:years|decades))\b", re.IGNORECASE)
# one kind over another for good: "Give me a hole-in-the-wall over a fancy restaurant any day", "I'd pick a rainy day
# over a heat wave any time"
OVER_ANY_DAY = re.compile(r"^(?:give me|I'd (?:pick|take|choose)|I would (?:pick|take|choose)|I'll (?:take|pick))\b"
                           r"[^.;!?]{2,80}?\bover\b[^.;!?,]{2,60}?\b(?:any day|any time|anytime|every time)"
                           r"(?: of the week)?\s*[.!]*$", re.IGNORECASE)
# what the speaker always or never does at a kind of moment: "I always check reviews before buying anything", "I never
# book a flight without seat selection when I travel for work" (not a feeling: "I always feel better when ...")
ALWAYS_WHEN = re.compile(r"^I (?:always|never) (?!(?:loved|liked|wanted|thought|knew|felt|feel|wondered|enjoyed|have|"
                          r"had|was|were|am|love|like|dreamed|find|found|get|got|make|made|look|looked|think|try|"
                          r"tried|hope|wish|want|appreciate|remember|forget|struggle|struggled|end up|ended up)\b)"
                          r"[a-z]+\b[^.;!?]{3,80}\b(?:before|when|whenever|if|after)\b", re.IGNORECASE)
# a kind ruled out in a phrase, with the speaker's reason after it: "No white furniture, we have kids and a dog", "No
# phone calls please, I'm much better over text" (not "No worries, I'm fine"); an instruction after a standing
# clause: "Sundays are for church, don't plan anything in the morning"; "I'm a Marriott Bonvoy person through and
# through"
NO_WITH_REASON = re.compile(r"^no\s+(?!(?:worries|worry|problem|problems|way|thanks|idea|doubt|kidding|rush|offense|"
                             r"pressure|need|matter|one|big deal|clue|luck|wonder|joke|shame|surprise|fear|regrets?|"
                             r"specific|particular|real|preferences?|plans?|comments?|hard feelings|sweat|biggie)\b)"
                             r"(?![^,]*\byet\b)"
                             r"(?:[\w-]+\s+){0,2}[\w-]+(?:\s+please)?\s*,\s*(?:I|I'm|I've|we|we're|we've|my|our)\b",
                             re.IGNORECASE)
THEN_DONT = re.compile(r"^[^,;:?]{8,80},\s*(?:so\s+)?(?:please\s+)?(?:don't|do not|never)\s+(?:ever\s+)?(?:plan|book|"
                        r"schedule|suggest|send|call|put|give|recommend|order|offer|serve)\b[^.;!?]{0,80}\b(?:anything|"
                        r"any|ever|again|me|us)\b", re.IGNORECASE)
THROUGH = re.compile(r"^(?:honestly,\s*)?I(?:'m| am)\b[^.;!?]{3,60}\bthrough and through\b", re.IGNORECASE)
# a clause that leans on the one after it: "Since I've been going three times a week, I want to ..."
SUBORDINATE = re.compile(r"^(?:since|because|as|when|whenever|if|while|although|though|after|before|once|until|"
                          r"given|now that|so that)\b", re.IGNORECASE)
SPEAKER = re.compile(r"\b(?:I|I'm|I've|my|we|we're|we've|our|us|me)\b", re.IGNORECASE)
# the speaker's own words: first person singular or plural (a family's rule is the user's too)
FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|we|we're|we've|our|us)\b", re.IGNORECASE)
# addressed to the assistant: not a view of the speaker's own
YOU = re.compile(r"\b(?:you|your|you're|you'll|you've)\b", re.IGNORECASE)
MOMENT = re.compile(r"\b(?:(?:to|mon|tues|wednes|thurs|fri|satur|sun)day's|tonight's|tomorrow's|today|tonight|tomorrow|"
                     r"this (?:week|weekend|morning|evening|afternoon|month|year|time|"
                     r"trip|summer|winter|spring|fall|autumn|season)|next|right now|asap|soon|by \w+day|on \w+day|"
                     r"for (?:the|my|our|this) (?:trip|stay|visit|"
                     r"meeting|event|party|wedding|honeymoon|anniversary|birthday))\b", re.IGNORECASE)
# what "for this ..." names when it names no occasion: a kind, a project's standing terms, a reason
STANDING_THIS = (r"(?:kind|type|sort|project|repo|repository|service|codebase|team|reason|purpose|household|family|"
                 r"company|account|app|blog|site|channel)")
# a preference of one occasion, not for good: said for a moment ("Today I'd rather stay home", "For this trip, don't
# worry about the budget", "Just this once, ...") or under a condition on one event or a counterfactual ("If this
# flight gets cancelled, I'd rather take the train", "If the budget allowed, I'd go for the bigger TV"); a condition
# of every time stays ("If I have the choice, I'd rather take the train", "If it's over 30 degrees, I stay in")
OCCASION = re.compile(r"^(?:(?:just|only|but|and)\s+)?(?:today|tonight|tomorrow|right now|for now|just this once|"
                       r"this (?:time|once|week|weekend|morning|evening|afternoon|trip)\b|"
                       r"for (?:this (?!" + STANDING_THIS + r"\b)|tonight's |today's |tomorrow's |the next )\w+)\b|"
                       r"^if\b[^,]{0,80}?(?:\b(?:this|that|these|those)\b|\b(?:allowed|were|had|could|did|was)\b)"
                       r"[^,]{0,80},\s*(?:I'd|I would|we'd|we would)\b", re.IGNORECASE)
# a day of every week: "on Fridays", "at weekends", "on weekday mornings"
EVERY_WEEK = re.compile(r"\b(?:on|at|over|during)\s+(?:(?:mon|tues|wednes|thurs|fri|satur|sun)days|weekends|weekdays|"
                        r"weekday \w+s|weekend \w+s)\b", re.IGNORECASE)
# a wish said for the moment anywhere in the sentence ("I'm running low on energy this afternoon, so I'd prefer a quick
# answer this time", "If it rains tomorrow, I'd rather we move the picnic indoors", "I'd like to avoid the motorway on
# today's drive"): OCCASION reads the moment only where it leads; a wish ("I'd prefer") beside a moment is that
# moment's (not "I'd rather not fly on Fridays": a weekday is every week's)
WOULD = re.compile(r"\bI(?:'d| would)\s+(?:(?:much|really|actually|just|probably|strongly|very much)\s+)?"
                   r"(?:prefer|rather|like|love)\b", re.IGNORECASE)
NOW_ONLY = re.compile(r"\b(?:(?:to|mon|tues|wednes|thurs|fri|satur|sun)day's|tonight's|tomorrow's|today|tonight|tomorrow|"
                      r"for now|at the moment|right now|this (?:time|once|week|weekend|morning|evening|afternoon|"
                      r"particular))\b", re.IGNORECASE)
# one occasion named as this one: "I prefer the second logo option for this launch", "... by card for this order"
# (not "for this project": a project's standing terms, nor "for this reason")
FOR_THIS = re.compile(r"\bfor this (?!" + STANDING_THIS + r"\b)[\w-]+\b", re.IGNORECASE)
REASON = re.compile(r"\b(?:because|since|as|so)\b", re.IGNORECASE)
# what the user will take this time ("I'll go for the home game ticket package", "I'll book option 4", "The hotel in
# Chiado is the one I'd go for"): one occasion's pick, which the choice rule (picks.py) reads with the offer; not
# "I'd take a window seat over an aisle any day" or "I'll always book aisle seats" (LASTING)
PICKED = re.compile(r"^(?:(?:ok(?:ay)?|yes|yeah|sure|great|perfect|then|so|alright|right|hmm|cool)[,.!]?\s+)?"
                     r"I(?:'ll| will|'d| would)\s+(?:(?:just|probably|definitely|happily|gladly|def|prob)\s+)?"
                     r"(?:go (?:for|with)|opt for|take|book|pick|choose|follow|try|get|stick (?:to|with)|order|grab|"
                     r"keep)\b|\bis the one I(?:'d| would|'ll| will)\s+(?:go for|pick|choose|take|get|book)\b",
                     re.IGNORECASE)
# what is under way for good, not for now: "I'm doing low-carb long term", "I'm eating plant-based for the foreseeable
# future" (a progressive otherwise reads as a plan of the moment, PLAN)
FOR_GOOD = re.compile(r"\b(?:long[- ]term|for the (?:foreseeable future|long haul|rest of my life)|for good|for life|"
                       r"permanently|indefinitely|(?:probably |likely |pretty much )?forever)\b", re.IGNORECASE)
UNDER_WAY = re.compile(r"^(?:\w+,\s*)?I(?:'m| am|'ve been| have been)\b", re.IGNORECASE)
LASTING = re.compile(r"\b(?:always|never|any day|every time|whenever|usually|only|over|rather|instead|anymore|"
                      r"from now on|for good|again)\b", re.IGNORECASE)
# where a reason given for a standing item ends or starts (main_clause): a leading one ("Because …, "), one before
# ", so" / "so I …" ("so that", "so much" end no reason), one after "because"/"since" or ", as I"
LEADING_REASON = re.compile(LEAD_REASON + r"\s*", re.IGNORECASE)
# a past cause before the clause that says what holds now: "After a bad car accident a few years ago, I stopped
# driving altogether" (the main clause decides: "After the concert, I went home" is still an occasion)
AFTER_CAUSE = re.compile(r"^(?:ever since|since|after)\b[^,;]{3,120},\s*(?=I\b)", re.IGNORECASE)
SO_AFTER_REASON = re.compile(r"(?:,\s*so|\s+so(?=\s+(?:I|I'\w+|my|any|every|all|for)\b))\s+(?!(?:that|much|many|long|"
                              r"far|well|good|bad|often)\b)", re.IGNORECASE)
# what still holds, or holds now, after a past occasion said before it: "I was bitten by a dog as a child, and I'm
# still terrified of large breeds", "I retired last year and now prefer slow-paced travel"
AND_SINCE = re.compile(r",?\s+and\s+(?=(?:I(?:'m|\s+am)?\s+)?(?:still|now)\b|now\s+I\b)", re.IGNORECASE)
# what a past occasion taught the speaker: "I learned the hard way that I can't handle spicy food"
LEARNED = re.compile(r"\bI (?:learned|realized|discovered|found out)(?: the hard way| over the years| early on)?,?"
                     r"(?: that)?\s+(?=I\b)", re.IGNORECASE)
REASON_AFTER = re.compile(r",?\s+(?:because|since)\s+|,\s*as\s+(?=I\b)", re.IGNORECASE)
# every such thing must be so: "any transport I use has to be fully step-free"
REQUIRED = re.compile(r"(?:^|,\s*(?:so\s+)?)(?:any|every|all|each)\s+[^,;:?]{2,50}?\b(?:has to|have to|must|needs? to)"
                       r"\s+be\b|"
                       # "any vehicle I buy needs serious towing capacity", "anything I buy for the house needs to
                       # survive fur and claws", "any pet I have must cope without me"
                       r"(?:^|,\s*(?:so\s+)?)(?:any|every|all|each|anything|everything)\s+(?:[\w-]+\s+){0,3}?"
                       r"(?:I|we)\s+(?:\w+\s+)?(?:buy|have|get|own|use|book|rent|choose|pick|consider|eat|wear|adopt|"
                       r"take|drive|bring|make)\b[^,;:?]{0,40}?\b(?:must|needs?|has to|have to|comes? down to|"
                       # "every vehicle decision I make comes down to whether three car seats fit across the back row"
                       r"depends? on|hinges? on)\b", re.IGNORECASE)
# what every one of a kind must do, read when no other form reads the sentence: "All commit messages in my projects
# must follow the Conventional Commits format", "any plans involving the children must work around alternate weekends"
MUST_DO = re.compile(r"(?:^|,\s*(?:so\s+)?)(?:any|every|all|each)\s+[^,;:?]{2,50}?\b(?:has to|have to|must|needs? to)"
                     r"\s+(?:always\s+)?(?:follow|use|include|fit|work around|work with|avoid|allow|come with|stay|"
                     r"go through|suit)\b", re.IGNORECASE)
INTENT = re.compile(r"\b(?:going to|gonna|try to|trying to|plan to|planning to|hope to|want to|will|'ll)\b", re.IGNORECASE)
# what a sentence under a stated scope asks of every such errand
SCOPED_ITEM = re.compile(r"\bI (?:always |only |usually )?(?:want|need|prefer|like)\b|\b(?:no|nothing|never|always|"
                          r"only|avoid|without|don't|do not)\b", re.IGNORECASE)
HABITUAL = re.compile(r"\b(?:when(?:ever)? I|always|usually|generally|in general|ever)\b", re.IGNORECASE)
PROPOSAL = re.compile(r"\s+the\s+(?:idea|sound|thought|look|suggestion|concept)s?\b", re.IGNORECASE)
WANT_NOW = re.compile(r"\s+in\s+(?:the|this|these|those|that|a|an|some|any|it|them|trying|learning|exploring|finding|"
                       r"getting|buying|checking|using|applying|visiting|reading about|seeing)\b", re.IGNORECASE)
# a sentence ends at . ! ? ; (not after "a.m.", "p.m.", "e.g.", "i.e.", "vs.", "Dr.", "Mr.", "Ms.", "Mrs.", "St.")
# a refusal that answers the question just before it, and the questions it cannot answer (one thing at hand)
REFUSAL = re.compile(r"^(?:hard no|absolutely not|no thanks|no thank you|no way|nope|not for me|forget it|never again|"
                      r"not a chance|not happening|never|pass|count me out|I'll pass|"
                      # "Needles? Can't do them.", "Open-plan offices? Can't focus in them.", "Kibble full of corn?
                      # Not in my dog's bowl."
                      r"(?:I )?(?:can't|cannot|won't) (?:do|stand|handle|deal with|bear|stomach|(?:focus|sleep|work|"
                      r"relax) (?:in|with|around)) (?:it|them|that|those)|not in my (?:[\w']+ ){0,2}"
                      r"(?:house|home|kitchen|bowl|car|life|diet|plate|cart|closet|yard))\b[.!]*", re.IGNORECASE)
DEICTIC_Q = re.compile(r"^(?:\w+,\s*)?(?:can|could|would|will|should|do|does|did|is|are|was|were|have|has|what|"
                        r"why|how|who|where|when|which|you|it|that|this)\b", re.IGNORECASE)
SENT = re.compile(r"(?<=[.!?;])(?<![ap]\.m\.)(?<!e\.g\.)(?<!i\.e\.)(?<!\bvs\.)(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)"
                   r"(?<!Mrs\.)(?<!\bSt\.)\s+|\n+")
LIST_SPLIT = re.compile(r",\s*(?:and\s+|or\s+)?|\s+and\s+(?=(?:an?|the|no|only|\w+\s+\w+))", re.IGNORECASE)
LIST_CLOSE = re.compile(r"\b(?:and|or|nor)\b", re.IGNORECASE)
# what makes the parts after a verb examples or a reason, not a list of items ("chains—McDonald's, Olive Garden, ...")
# ("added sugar entirely: no sweets, no syrups" elaborates one item)
EXAMPLES = re.compile(r"\b(?:like|such as|including|e\.g\.|especially|particularly|because|as|since|so)\b|"
                       r"[\u2014\u2013]|\s-\s|\w:\s", re.IGNORECASE)
MONEY = re.compile(r"[$€£]\s?\d[\d,.]*|\b\d[\d,.]*\s?(?:dollars|euros|usd|eur|gbp)\b", re.IGNORECASE)
BUDGET_OBJECTS = ("hotel", "flight", "meal", "dinner", "lunch", "rent", "gift", "laptop", "phone", "car",
                   "trip", "ticket", "room", "night", "wine", "course", "book")
# What starts no item of a list that the preference verb before it governs ("I avoid X, Y and Z"): a relative
# or subordinate clause ("which means no pork", "whether real or faux"), a second verb ("and prefer comfortable,
# flat shoes", "and only consume non-fiction", "and need room for gear"), a prepositional phrase ("far from
# nightlife", "in a structured"), a pronoun's clause or a negation. Each item is read as "<the verb> <item>",
# so such a part would be stored garbled ("I only eat which means no pork").
NOT_ITEM = re.compile(
    r"(?:(?:only|also|just|really|strongly|exclusively|mostly|mainly|generally|usually|simply)\s+)*"
    r"(?:which|who|whom|whose|that|whether|where|when|while|whereas|not|but|even|rather|than|as|because|since|"
    r"although|though|so|if|unless|then|i|i'm|i'd|i'll|i've|we|you|they|he|she|it|it's|there|them|me|us|him|"
    r"in|on|at|with|without|from|by|near|far|away|close|next|over|about|of|into|"
    r"never|always|often|rarely|sometimes|"
    r"prefer|prefers|like|likes|dislike|dislikes|love|loves|hate|hates|enjoy|enjoys|avoid|avoids|detest|tend|"
    r"tends|need|needs|want|wants|listen|listens|consume|consumes|explore|find|finds|use|uses|follow|follows|"
    r"eat|eats|drink|drinks|wear|wears|buy|buys|go|goes|get|gets|make|makes|keep|keeps|try|tries|stay|stays|"
    r"choose|chooses|rely|relies|believe|believes|think|feel|feels|refuse|refuses|stick|opt|opts|seek|seeks|"
    r"value|values|appreciate|steer|am|is|are|was|were|be|have|has|had|do|does|did|don't|doesn't|can|can't|"
    r"cannot|could|will|won't|would|should|must)(?=[\s,.;:!?]|$)", re.IGNORECASE)
# the verb is inside a reason clause ("..., as I prefer open-source and ..."; not "As a vegetarian, I avoid ...")
REASON_BEFORE = re.compile(r"\b(?:as|because|since)\s+(?:I|i)\b")
RELATIVE = re.compile(r"\b(?:that|which|who|whom|where)\b", re.IGNORECASE)
RATHER = re.compile(r"\brather than\b|\binstead of\b", re.IGNORECASE)
STOP_HEAD = {"a", "an", "the", "my", "any", "some", "all", "only", "no", "more", "less", "very", "really",
              "always", "never", "i", "me", "to", "of", "for", "with", "and", "or", "that", "this", "it"}
