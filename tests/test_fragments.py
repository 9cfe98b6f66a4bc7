"""Issue 25: what people say for good in a phrase (layers/fragments.py): each form beside what shares its words and
holds for a moment, or is someone else's, or is a pleasantry."""

from __future__ import annotations

import pytest

from memtier_plugin.layers.extract import extract

TAKEN = {
    # a label, and what follows from it for good
    "Renting, so nothing that needs drilling into walls": "preference",
    "iPhone user, so Android-specific tips don't help me": "preference",
    "Liverpool fan since birth, so don't even mention United to me": "preference",
    "Not much of a sports guy tbh, so skip the game-day stuff in recs": "preference",
    "Two toddlers in the house, so anything breakable or toxic is a no": "preference",
    "Introvert to the core, big group tours are a no": "preference",
    "Wheelchair user here, step-free access isn't optional": "identity",
    "Atheist here, so skip the 'blessed' type language in anything you write for me": "identity",
    "Single dad of three, so 'quick weeknight dinner' means 20 minutes tops": "identity",
    "Trans woman, she/her.": "identity",
    "My pronouns are they/them": "identity",
    # after a clause of the speaker's lasting state
    "I'm in the UK, so prices in pounds and UK stores please": "rule",
    "I collect vinyl, so when I ask about music gear assume a turntable setup": "rule",
    "We live in a 400 sq ft studio, so big furniture is out": "rule",
    # instructions of every time
    "No spoilers, ever, even for old stuff.": "rule",
    "Stop ending every answer with a question, I'll ask if I need more": "rule",
    "When I ask for a recipe just give the recipe.": "rule",
    # one kind over another, what the speaker can't do without, values, practices, conditions
    "Give me a dive bar over a rooftop lounge every single time": "preference",
    "Honestly a train over a plane any day if it's under six hours": "preference",
    "Bullet points over paragraphs whenever you can, my brain works in lists": "preference",
    "tbh window seat or I'm miserable": "preference",
    "Citations matter to me, always link your sources": "preference",
    "I try to buy local whenever I can, if that helps narrow it down": "preference",
    "Shellfish allergy, so no shrimp": "preference",
    "Low-FODMAP for my IBS, that's just my life now": "preference",
    "Been vegetarian for twelve years, not changing now": "preference",
    "Python person through and through, JS makes my eyes hurt": "preference",
    "I'm really not a city person.": "preference",
    "Cruises are my idea of hell": "preference",
    "Tents on the ground, absolutely not.": "preference",
    "Strong fragrances trigger my migraines, so unscented everything": "preference",
    "Every reply, forever, just plain text.": "rule",
    "Low-maintenance only, forever.": "rule",
    "My apartment is tiny, so big furniture is out": "rule",
    # a lasting possession is no reason of the moment ("I've got", unlike "I got")
    "I've got two rescue greyhounds, so any rental has to allow big dogs": "preference",
}

NOT_TAKEN = [
    "Running late, so skip the intro.",  # a moment, not who the speaker is
    "Same here, so no worries.", "New here, so go easy on me.", "First-timer here!",
    "Winter, so everything is out of stock.", "Late winter, so everything is out of stock.",  # not an agent noun
    "The owner, so he has to approve it.", "My sister's a vegan, so skip the ham tonight.",  # someone else
    "Manager here, can you help me with this report?",  # a request of the moment
    "I'm tired, so skip the details please.",  # a state of the moment
    "No worries, ever so kind of you.", "No problem, ever.",  # pleasantries
    "When I ask you later, just give me the short version.",  # one later answer
    "Call me over the weekend, or nothing gets done.", "Hurry up or I'll be late.",
    "Pass it over any time you like.",
    "Your support means a lot to me.", "Your feedback is very important to us.", "That matters to me.",  # thanks
    "Peanut allergies are pretty common in kids.", "My allergy meds ran out.",  # a world fact, an errand
    "Been vegetarian for a week and it's hard.",  # a trial, not a way of life
    "Thanks, that's just my life now lol",
    "Bailey Baker (She/Her) 2:31 AM",  # a pasted profile's pronouns
    "I'm not a fan of this one.", "I'm not a huge fan of its flavor.",  # one thing at hand
    "That was my idea of fun.", "This place is my happy place.",
    "Thanks, but no.", "Tonight, absolutely not.",
    "Every time I ask, you just ignore me.", "Each answer just repeats itself.", "I had only ever seen it once.",
    "This perfume triggers my migraines.", "The smoke triggered my asthma last night.",
    "My girlfriend hates horror movies, so that's out for date night",  # someone else's, one night
    "I got a new puppy, so any rental has to allow dogs",  # a reason just done
]


@pytest.mark.parametrize("text", sorted(TAKEN))
def test_a_phrase_said_for_good_is_taken(text):
    assert [c.node_kind for c in extract(text, role="user")] == [TAKEN[text]]


@pytest.mark.parametrize("text", NOT_TAKEN)
def test_the_phrase_of_a_moment_or_of_someone_else_is_not(text):
    assert extract(text, role="user") == []


@pytest.mark.parametrize("text, taken", [
    ("I'm vegan.", True), ("I'm sober.", True), ("I'm a nurse.", True),
    ("Me too.", False), ("I'm in.", False), ("I'm tired.", False), ("I love it.", False), ("I'm fine.", False),
])
def test_a_short_sentence_is_read_too(text, taken):
    """A sentence of 8 characters or more is read (extract.MIN_SENTENCE; it was 12): "I'm vegan." says what holds
    for good in 10, and what short sentences say for a moment or of the chat stays out (LoCoMo's turns, the inter
    chats and LongMemEval's haystacks give not one new item)."""
    assert bool(extract(text, role="user")) is taken


@pytest.mark.parametrize("text, taken", [
    ("I collect vinyl so when I ask about music gear assume a turntable setup", True),
    ("We live in a tiny studio so big furniture is out", True),
    ("I'm in Australia so prices in AUD and dates day/month please", True),
    ("I'm tired so skip the details please", False),
    ("My girlfriend hates horror movies so that's out for date night", False),
    ("It's late so book me a taxi", False),
])
def test_what_follows_a_lasting_state_is_taken_without_a_comma_before_so(text, taken):
    """People type "... so ..." with no comma (colloquial_e: 0.593 -> 0.613 of its standing sentences, no split's
    precision lower, not one new item from LoCoMo's turns, the inter chats or LongMemEval's haystacks); a state of the
    moment or someone else's before it still gives nothing."""
    assert bool(extract(text, role="user")) is taken


@pytest.mark.parametrize("text, taken", [
    ("I'm celiac.", True), ("I'm Muslim and pray five times a day.", True), ("I'm deaf in my left ear.", True),
    ("I'm in a wheelchair.", True), ("I'm on warfarin.", True), ("I'm retired and on a fixed income.", True),
    ("I was blind to it.", False), ("Are you Jewish?", False), ("My husband is deaf.", False),
])
def test_a_condition_or_a_faith_the_speaker_lives_with_is_taken(text, taken):
    """"I'm <condition or faith>" holds for good like "I'm vegan" (colloquial_e: 0.613 -> 0.640, no split's precision
    lower, not one new item from LoCoMo's turns, the inter chats or LongMemEval's haystacks)."""
    assert bool(extract(text, role="user")) is taken


@pytest.mark.parametrize("text, taken", [
    ("Pescatarian fyi", True), ("Vegan btw.", True), ("Atheist for the record.", True),
    ("Same btw", False), ("New here btw", False), ("Running late btw", False),
])
def test_a_label_tagged_as_an_aside_is_taken(text, taken):
    """"Pescatarian fyi" is "Pescatarian here" said as an aside; a label of the moment is not one."""
    assert bool(extract(text, role="user")) is taken


@pytest.mark.parametrize("text, taken", [
    ("I use a CPAP so any campsite has to have power", True),
    ("I drive an EV, so long drives need charging stops planned in", True),
    ("I'm a widower, so skip the couples packages", True),
    ("We only have a tiny patio, so container plants only", True),
    ("I play bass, so gear suggestions should be bass focused", True),
    ("I'm a nurse on nights, so please check opening hours for late evenings", True),
    ("My ankle's sprained so no hiking for a couple weeks", False),
    ("I'm a bit hungover, so nothing heavy for lunch.", False),
    ("I haven't collected sales tax yet, so I need to calculate it.", False),
    ("I already have a few shelves in my bookcase, so it should work out well.", False),
    ("I have an app to find EV chargers so don't need to include that.", False),
    ("I usually get home at six, so these recipes should fit my schedule.", False),
    ("I drive a lot for work, so I guess the car should be comfortable.", False),
])
def test_what_a_lasting_state_means_for_anything_suggested_is_taken(text, taken):
    """After "so", what a lasting state means for what the assistant suggests: a kind that needs or has to have
    something, an instruction, a kind only (colloquial_e: 0.647 -> 0.747 with the forms below, colloquial_heldout
    0.867 -> 0.873, no split's precision lower); the speaker's own errand ("so I need to ...", "so it should work
    out"), a thought, or a consequence for a while is not."""
    assert bool(extract(text, role="user")) is taken


@pytest.mark.parametrize("text, taken", [
    ("allergic to shellfish, just so you know", True), ("lactose intolerant since I was a kid", True),
    ("genuinely terrified of deep water", True), ("not a wine person at all, beer all day", True),
    ("huge Celtics fan, so nothing Lakers related", True), ("can't eat gluten, ever", True),
    ("type 2 diabetic btw", True), ("T1 diabetic here", True), ("I'm type 2 diabetic.", True),
    ("im a night owl, nothing before 10am please", True), ("ive been vegan for six years", True),
    ("Don't use the words 'sales pitch' in the email.", False), ("never mind, found it", False),
    ("can't wait for the weekend!", False), ("terrified of what the exam will look like tomorrow", False),
])
def test_a_state_typed_without_i_am_is_read_as_if_it_had_it(text, taken):
    """"allergic to shellfish", "can't do gluten": typed without "I'm" or "I", read as the sentence with it (not an
    instruction beginning "Don't", which has no subject left out); "im" and "ive" typed for "I'm" and "I've"."""
    assert bool(extract(text, role="user")) is taken
