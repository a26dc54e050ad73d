"""The golden-set view (/eval) in headless Chromium: the report's per-category bars, its failing
queries as links that open the playground with their request and trace, the admin token asked
for (and no tenant's key accepted) before any figure shows, and an honest message where the
server has no report (the Worker)."""

from __future__ import annotations

from urllib.parse import quote_plus

from playwright.sync_api import Page, expect

from tests.common import ALFA
from tests.playground.conftest import Server


def open_report(server: Server, page: Page) -> None:
    """``/eval`` asks for the admin token; entered, the report shows."""
    page.goto(f"{server.url}/eval")
    expect(page.locator("#admin")).to_be_visible()
    page.fill("#admin-token", server.admin)
    page.click("#admin-submit")
    expect(page.locator("#categories-panel")).to_be_visible()


def test_the_report_needs_the_admin_token_not_a_tenants_key(server: Server, page: Page) -> None:
    page.goto(f"{server.url}/")
    page.fill("#key", server.keys[ALFA])  # the playground's key stays the playground's
    page.fill("#query", "APR")
    page.click("#submit")
    expect(page.locator("#status")).to_contain_text("Answered in")
    page.goto(f"{server.url}/eval")
    expect(page.locator("#error")).to_contain_text("401")
    expect(page.locator("#error")).to_contain_text("admin token")
    expect(page.locator("#categories-panel")).to_be_hidden()
    page.fill("#admin-token", server.keys[ALFA])
    page.click("#admin-submit")
    expect(page.locator("#error")).to_contain_text("401")
    expect(page.locator("#categories-panel")).to_be_hidden()
    page.fill("#admin-token", server.admin)
    page.click("#admin-submit")
    expect(page.locator("#categories-panel")).to_be_visible()
    page.reload()  # remembered for this tab
    expect(page.locator("#categories-panel")).to_be_visible()


def test_category_bars_show_the_reports_figures(server: Server, page: Page) -> None:
    open_report(server, page)
    categories = server.report["per_category"]
    rows = page.locator("#categories li")
    expect(rows).to_have_count(len(categories))
    expect(page.locator("#info")).to_contain_text(server.report["info"]["knowledge_version"])
    expect(page.locator("#metric")).to_have_value("hit@1")
    for name, figures in categories.items():
        row = page.locator(f'#categories li[data-category="{name}"]')
        expect(row.locator(".detail")).to_contain_text(f"{figures['n']} queries")
        value = figures["hit@1"]
        if value is None:  # a category the metric does not judge (out of scope): no bar
            expect(row.locator(".bar")).to_have_count(0)
            expect(row.locator(".detail")).to_contain_text("not measured")
            continue
        track = row.locator(".track").bounding_box()
        bar = row.locator(".bar").bounding_box()
        assert track is not None and bar is not None
        assert abs(bar["width"] - value * track["width"]) <= 2.5, (name, value)
    page.select_option("#metric", "ndcg@10")
    first = next(iter(sorted(categories)))
    detail = page.locator(f'#categories li[data-category="{first}"] .detail')
    expect(detail).to_contain_text("ndcg@10")


def test_a_failing_query_opens_in_the_playground_with_its_trace(server: Server, page: Page) -> None:
    open_report(server, page)
    failures = page.locator("#failures li")
    expect(failures).to_have_count(len(server.report["failures"]))
    plain = server.report["failures"][0]
    page.click(f'#failures li[data-id="{plain["id"]}"] a')
    expect(page).to_have_url(f"{server.url}/?q=O+que+%C3%A9+APR%3F")
    expect(page.locator("#query")).to_have_value(plain["query"])
    expect(page.locator("#results .result").first).to_have_attribute("data-doc-id", "apr")
    expect(page.locator("#stages li.ran").first).to_be_visible()
    assert page.locator("#stages li").count() >= 10


def test_a_tenants_failing_query_opens_as_that_tenant(server: Server, page: Page) -> None:
    """The link carries the query's context; the key entered in the playground goes with it."""
    tenant_row = server.report["failures"][1]
    assert tenant_row["context"] == {"tenant": ALFA}
    page.goto(f"{server.url}/")
    page.fill("#query", "APR")
    page.fill("#key", server.keys[ALFA])
    page.click("#submit")
    expect(page.locator("#status")).to_contain_text("Answered in")
    open_report(server, page)
    link = page.locator(f'#failures li[data-id="{tenant_row["id"]}"] a')
    expect(link).to_have_attribute("href", f"/?q={quote_plus(tenant_row['query'])}&tenant={ALFA}")
    link.click()
    expect(page.locator("#tenant")).to_have_value(ALFA)
    expect(page.locator("#visibility")).to_contain_text(f"tenant {ALFA}")
    expect(page.locator("#results .result").first).to_have_attribute("data-tenant", ALFA)


def test_a_server_without_a_report_says_so(server: Server, page: Page) -> None:
    """What the Worker answers (its app has no report route): the view explains, no figures."""
    page.route(
        "**/eval/report.json",
        lambda route: route.fulfill(
            status=404,
            content_type="application/json",
            body='{"error": {"code": "not_found", "message": "Not Found"}}',
        ),
    )
    page.goto(f"{server.url}/eval")
    expect(page.locator("#error")).to_contain_text("No evaluation report")
    expect(page.locator("#error")).to_contain_text("the Worker does not publish one")
    expect(page.locator("#categories-panel")).to_be_hidden()
