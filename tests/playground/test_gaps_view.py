"""The content-gaps view (/gaps) in headless Chromium against a real ``kr serve``: the admin
token shows every tenant's groups, a tenant's key its own only, no credential an error; the
groups sort, each has a bar per count, question text is text (never markup), and a question
opens the playground with its request."""

from __future__ import annotations

import json
import urllib.request
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Page, expect

from tests.common import ALFA, BETA
from tests.playground.conftest import Server

MARKUP = "<img src=x onerror=alert(1)> onde fica o vestiário feminino?"
TOPICS = {
    ALFA: ["Onde fica o vestiário feminino?"] * 3 + [MARKUP],
    BETA: ["Qual o cardápio do churrasco de sexta?"] * 2,
}


def _ask(server: Server, tenant: str, question: str) -> None:
    body = json.dumps({"query": question}).encode()
    request = urllib.request.Request(
        f"{server.url}/v1/query",
        data=body,
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {server.keys[tenant]}",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        assert reply.status == 200


def _show(page: Page, server: Server, credential: str) -> None:
    page.goto(f"{server.url}/gaps")
    page.fill("#token", credential)
    page.click("#load")


def test_gaps_page_scopes_sorts_and_links_into_the_playground(server: Server, page: Page) -> None:
    for tenant, questions in TOPICS.items():
        for question in questions:
            _ask(server, tenant, question)

    page.goto(f"{server.url}/gaps")
    page.click("#load")  # no credential
    expect(page.locator("#error")).to_contain_text("401")
    expect(page.locator("#groups-panel")).to_be_hidden()

    _show(page, server, server.admin)
    expect(page.locator("#groups-panel")).to_be_visible()
    expect(page.locator("#status")).to_contain_text("every tenant")
    vestiario = page.locator("li.gap", has_text="vestiário").first
    expect(vestiario).to_be_visible()
    expect(vestiario).to_have_attribute("data-count", "4")
    expect(page.locator("li.gap", has_text="churrasco")).to_have_count(1)
    bar = vestiario.locator(".bar")
    assert float(bar.evaluate("b => parseFloat(b.style.width)")) > 0
    # markup in a question is text: no <img> was created, the text shows as typed
    assert page.locator("#groups img").count() == 0
    vestiario.locator("details summary").click()
    expect(vestiario.locator("a.question", has_text="<img src=x")).to_have_count(1)

    counts = [
        int(c) for c in page.locator("li.gap").evaluate_all("ls => ls.map(l => l.dataset.count)")
    ]
    assert counts == sorted(counts, reverse=True)
    page.select_option("#sort", "first_seen")
    expect(page.locator("li.gap").first).to_be_visible()

    link = vestiario.locator("a.example")
    query = parse_qs(urlparse(link.get_attribute("href") or "").query)
    assert query["tenant"] == [ALFA] and "vestiário" in query["q"][0]

    _show(page, server, server.keys[BETA])  # a tenant sees its own questions only
    expect(page.locator("#status")).to_contain_text(f"tenant {BETA}")
    expect(page.locator("li.gap", has_text="churrasco")).to_have_count(1)
    expect(page.locator("li.gap", has_text="vestiário")).to_have_count(0)

    _show(page, server, server.keys[ALFA])
    page.locator("li.gap", has_text="vestiário").first.locator("a.example").click()
    expect(page).to_have_url(
        f"{server.url}/?q=Onde+fica+o+vesti%C3%A1rio+feminino%3F&tenant={ALFA}"
    )
