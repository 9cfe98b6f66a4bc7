"""Whether a prompt asks for a choice (layers/requests.py), and how calibration reads it with the margin."""

from memtier_plugin.layers.requests import MAX_CHARS, asks_for_choice
from memtier_plugin.layers.standing import StandingScorer
from memtier_plugin.layers.topics import topic_tree
from memtier_plugin.config import load_config
from memtier_plugin.recall import calibration as cal


def test_requests_for_advice_or_an_errand_ask_for_a_choice():
    for prompt in ("What shows would you recommend for this weekend?",
                   "Can you suggest a jacket for the winter?",
                   "Any tips for a first marathon?",
                   "Which laptop should I take for travel?",
                   "Are there any indie games that I should try?",
                   "Book me a flight to Berlin on Friday.",
                   "Plan our trip to Lisbon in May.",
                   "Order dinner for the team tonight.",
                   # an act in the world, told in the imperative where a request starts
                   "Fly out from SFO on November 9, come back November 14.",
                   "Last piece: fly me home from Porto on the 16th.",
                   "Thanks. Can you push 1.4.2 to production now?",
                   "Please renew my gym membership.",
                   "Book two tickets for Saturday.",
                   "Can you suggest a birthday gift for Sarah?",  # a choice made for the user, about someone
                   "What would Anna recommend? Actually, which one should I pick?",  # not one question about Anna
                   # a pick among the options the agent laid out: the user's choice
                   "Infante Sagres this time, I deserve it. And the 11:09 train.",
                   "Take the United one, miles matter.",
                   "Let's go with the second.",
                   # what would fit the user, asked without "recommend" or "should I"
                   "I'm thinking about a rabbit or a guinea pig. Which one would be easier to care for?",
                   "I'd like an animal companion. What would suit me?",
                   "What supplements would help my memory as I get older?",
                   "What's a comforting dinner I can make on a rainy night?",
                   "What are the must-try restaurants in Austin?",
                   "My grandson loves hockey. What's a fun way for us to enjoy a game together?",
                   "Can you give me an easy recipe for a hearty winter soup?",
                   # what the thing should be, asked with a word of worth; a kind of thing asked for; something made
                   # for the user
                   "I'm visiting New York for a week in July. What's a great baseball outing?",
                   "What's a quick, healthy lunch I can bring to work?",
                   "I'm replacing my family car. What's a comfortable, efficient choice?",
                   "What would be a romantic place to stay on Santorini?",
                   "What dog breed would make a great trail companion?",
                   "What are the must-eat foods on a trip to Naples, Italy?",
                   "I want to make a big batch of salsa for game day. Any recipes?",
                   "Can you create a playlist of songs for my next road trip?",
                   "Can you provide some effective dance fitness routines I can follow at home?",
                   "What sports events are worth seeing in Spain?",  # what is worth doing, asked
                   "How should I explore Tuscany's hill towns for a few days?",  # a place's, asked by the user
                   "how should we see Rome's old town in a day?",
                   # an errand continued by a noun phrase alone, the next prompt of a request
                   "And a hotel near the venue for Dec 1 to Dec 4.",
                   "Also two tickets for the Sunday show.",
                   # asked the way people ask each other: what would help or fit, what there is to do, where to
                   # start or go, what the agent would do, thoughts, what should be; a thing needed, said
                   "I keep nodding off in afternoon meetings. What can help?",
                   "What kind of dog fits a busy family?", "Which streaming service is right for me?",
                   "I'm in Lisbon for three days. What's worth doing?", "What's there to do in Denver in winter?",
                   "What do people usually do in Kyoto in autumn?", "I want to learn Spanish. Where do I start?",
                   "I'm in Rome for one night. Where to eat?", "Got a free evening in Seattle, what would you do?",
                   "Is there a laptop you'd point me to for video editing?", "Thinking about a new phone. Thoughts?",
                   "I'm hosting eight people on Friday. What should be on the menu?",
                   "I need a gift for my sister's birthday.", "I need a new winter coat.",
                   "I need a good app for tracking my runs.", "I need new windows for the cabin.",
                   "I'm looking to get in shape before summer.", "I'm stuck on what to get her for her birthday.",
                   "My son wants an instrument. Which one is easiest to begin with?",
                   "How do I spend a layover in Istanbul?", "How do I make my small apartment feel bigger?",
                   "I'm trying to cut back on screen time. Any strategies?", "What are your go-to weeknight dinners?",
                   # the kind named before its worth, a way for someone to, what could help or would work
                   "We're ready to adopt our first dog. Which breeds are great with kids?",
                   "What natural remedies can help with my joint pain?",
                   "What's a stylish coffee table for a modern living room?",
                   "What's the smartest way for a visitor to get around London using public transport?",
                   "Which rug would work in my living room?",
                   "What pet would be easy to care for in a small apartment?",
                   "What's something I can do to calm down before bed?"):
        assert asks_for_choice(prompt) == 1.0, prompt


def test_an_opinion_on_an_option_an_intention_to_choose_and_where_people_stay_ask_for_a_choice():
    for prompt in ("What do you think of cruises for a first family vacation?",
                   "what do you think about the HP Envy x360 for college?",
                   "My lease ends in May. What do you think I should do?",
                   "I've been thinking about getting into photography.", "Thinking of trading in my car.",
                   "We're thinking of adopting a rescue dog this spring.", "I'm thinking about moving to Denver.",
                   "I'm hosting Thanksgiving this year for the first time.",
                   "Where do people usually stay in Paris?", "Where do locals eat in Lisbon?"):
        assert asks_for_choice(prompt) == 1.0, prompt


def test_the_listeners_thing_a_past_thought_and_someone_elses_intention_ask_for_no_choice():
    for prompt in ("What do you think of this?", "Here's my painting. What do you think about it?",
                   "What do you think of these?",
                   "I was thinking about getting a dog last year, but the timing was off.",
                   "She's thinking of adopting a cat.", "I'm thinking about my grandmother a lot lately.",
                   "I'm thinking of starting a blog about coding.",
                   "Where did people stay back then?"):
        assert asks_for_choice(prompt) == 0.0, prompt


def test_questions_and_tasks_that_ask_for_no_choice_do_not():
    for prompt in ("Why does this C++ loop overflow?",
                   "Rename the variable count in parser.py and rerun the lint job.",
                   "Translate this paragraph into German.",
                   "In order to compile, which flags does gcc need?",  # "order to" is no errand
                   "What did Melanie paint last summer?",
                   "How do I deploy a Flask app with gunicorn?",  # knowledge asked for, not an act
                   "My flight was delayed, so we will drive to the coast instead.",  # a story, not a request
                   # a question about what a named person did, said or likes asks for a fact about them
                   "When did Melanie read the book \"nothing is impossible\"?",
                   "Why did Caroline choose the adoption agency?",
                   "What book did Caroline recommend to Melanie?",
                   "Would Caroline pursue writing as a career option?",
                   "What are Caroline's plans for the summer?",
                   "What is one of Joanna's favorite movies?",
                   "Which of Caroline's books did she like best?",
                   "Was the trip worth it?",  # asked about what was, not what is worth doing
                   "What kind of flooring is Jon looking for in his dance studio?",
                   "I finished the book you lent me.",  # "book" the noun is no errand
                   "I read a great book about flights of fancy.",  # "book about": no errand ("a" is no word here)
                   "Is this the right one?",  # a question, not a pick
                   # told, not asked: a way for them to, a place not to miss; a recipe someone else shared
                   "They chase after it. It's a great way for them to get some exercise.",
                   "Barcelona is a must-visit city! You'll love the food.",
                   "What are the main ingredients of the ice cream recipe shared by Nate?",
                   # a question about the listener's life, a thing told; a fact asked for, with no word of worth
                   "Hey John! How's it going? Any new games you're into?",
                   "Wow, Mel! Any more paintings coming up?",
                   "I'm going to make it for my family this weekend - can't wait!",
                   "What's a closure in Python?", "What is a smart contract?", "Which planets are habitable?",
                   "What natural numbers can divide 12?",
                   "What is the capital of Peru?",
                   "It was a great game, what a finish!",
                   "And a car was waiting for us at the station.",  # told: a story goes on
                   "She ordered pasta and a salad.",  # "and a" inside a sentence, not a continued request
                   # wanting said about code, tools or text asks for knowledge; "how do I" asks for either (the
                   # request model reads it by the prompt's embedding: layers/asking.py)
                   "I need a new function that parses the dates in this CSV.",
                   "I'd like a summary of this paragraph.", "I'd like a list of every log file in max_items.yaml.",
                   "How do I cite a website in APA format?", "How do I meet people in a new city?",
                   "What a great thought.", "Where to put the config file is up to you.",
                   ""):
        assert asks_for_choice(prompt) == 0.0, prompt


def test_plan_and_schedule_are_errands_as_verbs_and_a_pasted_quiz_asks_for_no_choice():
    """The inter chats' pasted coursework was read as asking by "plan" and "schedule" anywhere (11 of 316 user turns,
    each a prompt the user's work preferences were handed): "plan" and "schedule" are errands as verbs with
    something to plan, not as nouns, nor "plan" said of a "you" in a quiz; a quiz or coursework pasted to be
    answered asks for the answer, not for the user's choice. "plants" was read as "plan" before."""
    for prompt in ("Can you help me plan our anniversary weekend?", "Could you plan a day in Kyoto for me?",
                   "I'm planning a trip to Lisbon in May.", "I need help planning meals for the week.",
                   "How would you plan getting around the Highlands?", "What's a good plan for my Saturday?",
                   "Schedule a call with the landlord for Tuesday.", "Please schedule time for a haircut.",
                   "Change of plans: after Lisbon I'm going to Porto for two nights.",  # an errand revised
                   "What kind of plants would do well in a dark apartment?"):
        assert asks_for_choice(prompt) == 1.0, prompt
    for prompt in ("3.Question 3As a project manager, you plan the release dates for your new project. What release "
                   "date(s) should never be moved?1 pointOnly the lastOnly the first",
                   "If the project were to stay on this schedule estimate the Actual Cost [AC] of work?",
                   "Which of the following is a key deliverable of Sprint Planning?",
                   "Select all that apply. Which user story fits the planned Sprint?",
                   "The project plan was created by the previous manager.",
                   "My plants are doing great this year."):
        assert asks_for_choice(prompt) == 0.0, prompt


def test_a_pasted_document_is_read_at_its_start_and_end_only():
    middle = "x " * MAX_CHARS + "recommend " + "y " * MAX_CHARS
    assert asks_for_choice(middle) == 0.0
    assert asks_for_choice(middle + " Which one should I pick?") == 1.0


class _Embedder:
    """Fixed vectors by text: the agent's model stands in for nothing here; only cosines are needed."""

    def __init__(self, vectors):
        self.vectors = vectors

    def embed(self, texts):
        import numpy as np
        return [np.asarray(self.vectors.get(t, (0.0, 0.0, 1.0)), dtype=np.float32) for t in texts]


def test_standing_signals_carry_the_request_and_each_items_margin_under_the_nearest(tmp_path):
    from memtier_plugin.layers.standing import Item

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    tree = topic_tree()
    a = Item(id="a", content="I never eat meat.", label="preference", tier="global", timestamp="")
    b = Item(id="b", content="I want an aisle seat.", label="preference", tier="global", timestamp="")
    c = Item(id="c", content="No dairy for me.", label="preference", tier="global", timestamp="")
    prompt = "What should I cook for dinner?"
    emb = _Embedder({prompt: (1.0, 0.0, 0.0), a.content: (0.8, 0.6, 0.0), b.content: (0.5, 0.0, 0.866),
                     c.content: (0.78, 0.6258, 0.0)})
    scored = {it.id: sig for it, _, sig in StandingScorer(cfg, tree, emb).score(prompt, [a, b, c])}
    assert scored["a"]["asks"] == scored["b"]["asks"] == 1.0
    assert scored["a"]["margin"] == 0.0
    assert abs(scored["b"]["margin"] - (0.5 - 0.8)) < 1e-5
    # within 0.04 of the nearest cosine is among the nearest: two rules may both apply
    assert scored["a"]["nearest"] == scored["c"]["nearest"] == 1.0 and scored["b"]["nearest"] == 0.0
    none = StandingScorer(cfg, tree, None).score(prompt, [a, b])
    assert all(sig["margin"] == 0.0 and sig["nearest"] == 0.0 for _, _, sig in none)  # no cosine, neither


def test_a_preferences_margin_is_measured_among_preferences_not_against_a_skill(tmp_path):
    """A skill's text holds the prompt that made it, so it is nearer a like prompt than any preference; the
    preferences' margin and nearest are read among the Global items (the demo's "fly me home" lost its
    flight rule to the flight skill this way), and a skill's among the skills."""
    from memtier_plugin.layers.standing import Item

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    rule = Item(id="r", content="Never book flights before 8am.", label="rule", tier="global", timestamp="")
    seat = Item(id="s", content="I want an aisle seat.", label="preference", tier="global", timestamp="")
    skill = Item(id="k", content="skill (worked before for: fly me home from Porto): search_flights, book_flight",
                 label="skill", tier="procedural", timestamp="")
    other = Item(id="o", content="skill (worked before for: a hotel in Lisbon): book_hotel",
                 label="skill", tier="procedural", timestamp="")
    prompt = "Fly me home from Porto on the 16th."
    emb = _Embedder({prompt: (1.0, 0.0, 0.0), rule.content: (0.55, 0.835, 0.0), seat.content: (0.45, 0.0, 0.893),
                     skill.content: (0.8, 0.6, 0.0), other.content: (0.6, 0.8, 0.0)})
    tree = topic_tree()
    scored = {it.id: sig for it, _, sig in StandingScorer(cfg, tree, emb).score(prompt, [rule, seat, skill, other])}
    assert scored["r"]["margin"] == 0.0 and scored["r"]["nearest"] == 1.0  # nearest of its kind, 0.25 under the skill
    assert abs(scored["s"]["margin"] - (0.45 - 0.55)) < 1e-5 and scored["s"]["nearest"] == 0.0
    assert scored["k"]["margin"] == 0.0 and abs(scored["o"]["margin"] - (0.6 - 0.8)) < 1e-5
    alone = {it.id: sig for it, _, sig in StandingScorer(cfg, tree, emb).score(prompt, [rule, seat])}
    assert alone["r"]["margin"] == scored["r"]["margin"] and alone["s"]["margin"] == scored["s"]["margin"]


def test_the_shipped_calibration_weighs_the_request_and_the_margin():
    c = cal.load(cal.shipped_path("paper"))
    w = c.models["global"].weights
    assert w["asks"] > 0  # a prompt that asks for a choice makes a preference likelier
    assert w["margin"] > 0 and w["nearest"] > 0  # an item far under the prompt's nearest is less likely to apply


def test_a_prompt_that_asks_for_a_choice_reaches_its_nearest_preference_without_a_shared_topic(tmp_path):
    """No topic or word joins "a trip to Las Vegas" and "I dislike gambling": a prompt that asks for a choice
    still reaches the Global item nearest it by embedding (calibration then decides); one that asks for none,
    or an item far under the nearest, is not reached that way, and a skill never is."""
    from memtier_plugin.layers.standing import Item

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    tree = topic_tree()
    gamble = Item(id="g", content="I dislike gambling.", label="preference", tier="global", timestamp="")
    far = Item(id="f", content="I like quiet mornings.", label="preference", tier="global", timestamp="")
    asks, story = "What should we do in Las Vegas?", "We landed in Las Vegas at noon."
    vectors = {asks: (1.0, 0.0, 0.0), story: (1.0, 0.0, 0.0), gamble.content: (0.45, 0.893, 0.0),
               far.content: (0.30, 0.0, 0.954)}
    scorer = StandingScorer(cfg, tree, _Embedder(vectors))
    scored = {it.id: sig for it, _, sig in scorer.score(asks, [gamble, far])}
    assert scored["g"]["topic"] < 0.3 and scored["g"]["lexical"] < 0.1 and scored["g"]["route"] < 0.3
    assert [h.id for h in scorer.hits(asks, [gamble, far])] == ["g"]
    assert scorer.hits(story, [gamble, far]) == []
    skill = Item(id="k", content="I dislike gambling.", label="skill", tier="procedural", timestamp="")
    from memtier_plugin.layers.standing import reached_by_choice
    assert not reached_by_choice(skill, {**scored["g"]}) and reached_by_choice(gamble, scored["g"])
