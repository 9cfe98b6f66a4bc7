"""`memtier ui` in a real browser: Debian's Chromium driven by Playwright (the `ui-test` extra).

Skipped, with the reason, when Playwright or Chromium is missing; `.ci/run` installs both and sets
MEMTIER_REQUIRE_BROWSER=1, which turns such a skip into a failure (tests/conftest.py). With
MEMTIER_UI_SCREENSHOTS=<folder> each view's screenshot is also written there (docs/ holds the ones
the documentation shows).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from test_ui import HOSTILE_IMG, HOSTILE_SCRIPT, Page, filled, filled_workspace  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("MEMTIER_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = os.environ.get("MEMTIER_UI_SCREENSHOTS")  # read now: the autouse fixture clears MEMTIER_*
VIEWS = ("episodes", "facts", "global", "workspace", "search", "traces")


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install -e '.[ui-test]')"
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set MEMTIER_CHROMIUM)"
    return None


@pytest.fixture(scope="module")
def browser():
    why = _missing()
    if why:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def tab(browser, filled_workspace):
    """A page of a fresh browser context on a running `memtier ui`; every dialog it opens is recorded."""
    ui = Page(filled_workspace)
    ctx = browser.new_context(viewport={"width": 960, "height": 600})
    page = ctx.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.goto(ui.url)
    page.wait_for_selector("main[data-view=episodes] .item")
    page.ui = ui
    yield page
    ctx.close()
    ui.close()


def show(page, view: str) -> None:
    page.click(f"#tab-{view}")
    page.wait_for_selector(f"main[data-view={view}]")


def status_says(page, pattern: str) -> None:
    """Wait until the status line matches (the page's CSP forbids eval, so no wait_for_function)."""
    from playwright.sync_api import expect

    expect(page.locator("#status")).to_have_text(re.compile(pattern))


def search(page, query: str) -> None:
    if page.locator("main[data-view=search]").count() == 0:
        show(page, "search")
    page.fill("#q", query)
    page.fill("#agent", "assistant")
    page.click("#search-go")
    page.wait_for_selector("#results .hit, #no-hits")


def test_every_view_renders_and_is_photographed(tab, tmp_path):
    out = Path(SCREENSHOTS or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    expect = {"episodes": "agent assistant", "facts": "revision chains", "global": "topic tree",
              "workspace": "skill(s)", "search": "Search", "traces": "Traced prompts"}
    for view in VIEWS:
        show(tab, view)
        if view == "search":
            search(tab, "Zanzibar ferry")
            tab.locator("#results .hit details.why summary").first.click()  # the explain, open
        else:
            tab.wait_for_selector("main .item")
        assert expect[view] in tab.inner_text("main")
        shot = out / f"ui-{view}.png"
        tab.screenshot(path=str(shot))
        assert shot.stat().st_size > 5000
    assert tab.dialogs == [] and tab.console_errors == []


def test_hostile_stored_text_renders_as_text(tab):
    """A ledger line holding <script> and an <img onerror> is shown as the characters it holds, in every
    view that shows it: episodes, search hits, and a traced prompt that delivered it (its query hostile too)."""
    from memtier_plugin.events import HookContext, PromptEvent

    prompt = "<script>alert(2)</script> Zanzibar ferry"
    tab.ui.mem.on_prompt(PromptEvent(prompt=prompt), HookContext(agent_id="assistant", session_id="hostile",
                                                                 run_id="r-hostile", project="travel"))
    for view, where in (("episodes", "main p.content"), ("search", "#results p.content"),
                        ("traces", "main td.content")):
        if view == "search":
            search(tab, "Zanzibar ferry")
        else:
            show(tab, view)
            tab.wait_for_selector("main .item")
        shown = tab.locator(where).all_text_contents()
        for text in (HOSTILE_SCRIPT, HOSTILE_IMG):
            assert text in shown, (view, text)
        assert tab.locator("main img").count() == 0
        assert tab.locator("main script").count() == 0
        if view == "traces":
            assert prompt in tab.locator("main details.trace q").all_text_contents()
    tab.wait_for_timeout(300)  # an onerror of an injected <img> would have fired by now
    assert tab.dialogs == []
    assert tab.evaluate("document.querySelectorAll('script').length") == 1  # the page's own, nothing injected


def test_search_shows_the_explain_of_every_signal(tab):
    search(tab, "Zanzibar ferry")
    status, api = tab.ui.api("search?q=Zanzibar%20ferry&agent=assistant")
    hits = tab.locator("#results .hit")
    assert hits.count() == len(api["hits"]) > 0
    first = hits.nth(0)
    assert first.get_attribute("data-id") == api["hits"][0]["id"]
    first.locator("details.why summary").click()
    rows = first.locator("table.explain tr")
    table = {rows.nth(i).locator("td").nth(0).text_content(): [rows.nth(i).locator("td").nth(j).text_content()
                                                              for j in (1, 2, 3)]
             for i in range(1, rows.count())}
    for name, s in api["hits"][0]["signals"].items():
        assert table[name] == [f"{s['value']:.3f}", f"{s['weight']:.3f}", f"{s['contribution']:.3f}"]
    assert first.locator("table.explain").is_visible()


def test_forget_from_the_page_and_a_fresh_search_no_longer_finds_it(tab):
    pytest.importorskip("memtier_plugin.forgetting", reason="forget (issue 28, item 1) is not in this build")
    search(tab, "Zanzibar ferry")
    target = tab.locator("#results .hit").nth(0).get_attribute("data-id")
    hit = tab.locator(f"#results .hit[data-id='{target}']")
    hit.locator("button.forget").click()
    hit.locator("button.confirm-forget").click()
    status_says(tab, r"^forgot ")
    assert target in tab.inner_text("#status")
    search(tab, "Zanzibar ferry")  # a fresh search, from the form
    ids = [tab.locator("#results .hit").nth(i).get_attribute("data-id")
           for i in range(tab.locator("#results .hit").count())]
    assert target not in ids
    assert target not in {h["id"] for h in tab.ui.api("search?q=Zanzibar%20ferry&agent=assistant")[1]["hits"]}
    show(tab, "episodes")
    assert tab.locator(f"main .item[data-id='{target}']").count() == 0
    assert tab.dialogs == []


def test_correct_a_fact_from_the_page(tab):
    pytest.importorskip("memtier_plugin.forgetting", reason="correct (issue 28, item 3) is not in this build")
    show(tab, "facts")
    tab.wait_for_selector("main .chain .item button.correct")
    item = tab.locator("main .chain .item", has=tab.locator("button.correct")).nth(0)
    old = item.get_attribute("data-id")
    item.locator("button.correct").click()
    item.locator("input.correct-text").fill("The user now prefers window seats")
    item.locator("button.save-correct").click()
    status_says(tab, r"^corrected ")
    tab.wait_for_selector("main .item >> text=The user now prefers window seats")
    chain = tab.locator("main .chain", has=tab.locator(f".item[data-id='{old}']"))
    assert chain.count() == 1
    items = chain.locator(".item")
    assert items.last.locator("p.content").text_content() == "The user now prefers window seats"
    assert "retired" in (chain.locator(f".item[data-id='{old}']").get_attribute("class") or "")
    assert tab.dialogs == []
