"""The console in a real headless Chromium: login exchanges the token for an HttpOnly cookie,
a wrong or missing token is refused, the jobs view shows the tree, HOLDER, overlaps on both
rows, marks, releases and monitors, and it updates live."""

from __future__ import annotations

import os
import shutil
import struct

import pytest

from proctor import api
from tests.test_server import Server, cli, served, wait_for  # noqa: F401  (the fixture)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), "the console test needs Debian's chromium (.ci/run installs it)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


def _png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_console(served, browser, tmp_path):  # noqa: F811
    root = served.root
    api.fork({"id": "card/child", "parent": "card", "write_paths": ["src/a.py"], "check": "test"}, cwd=root,
              environ={"BAGGAGE": "proctor.lease=card"})
    api.fork({"id": "rival", "write_paths": ["src/**", "docs/r.md"], "check": "test"}, cwd=root)
    api.fork({"id": "rival", "write_paths": ["src/**"], "check": "test"}, cwd=root)  # releases docs/r.md
    served.add("card", "echo build green")
    wait_for(lambda: served.events("card"), timeout=10)

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    console = f"http://127.0.0.1:{served.port}/"
    page.goto(console)
    assert page.url.endswith("/login"), "no cookie: sent to the login page"
    page.fill("input[name=token]", "not-the-token")
    page.click("button")
    page.wait_for_url("**/login?failed=1")
    assert "not this server's" in page.content()
    page.fill("input[name=token]", served.token)
    page.click("button")
    page.wait_for_selector("body[data-loaded=yes]", timeout=20000)
    cookies = {c["name"]: c for c in context.cookies()}
    name = f"proctor_{served.port}"
    assert cookies[name]["httpOnly"] is True and cookies[name]["value"] != served.token

    rows = {row.get_attribute("data-job"): row for row in page.query_selector_all("tr.job")}
    assert {"card", "card/child", "rival", "other", "proctor-server", "proctor-server/monitors"} <= set(rows)
    assert rows["proctor-server"].query_selector_all("td")[2].inner_text() == "server"
    assert rows["card"].query_selector_all("td")[2].inner_text() == "session"
    for job in ("card/child", "rival"):
        assert "overlap" in rows[job].get_attribute("class"), f"overlap marked on {job}'s row"
        assert "overlaps" in rows[job].inner_text()
    assert rows["card"].query_selector_all("td")[3].inner_text().endswith("ago")
    columns = [c.get_attribute("data-column") for c in page.query_selector_all(".column")]
    assert columns == ["Declared", "Running", "Returned", "Done"]

    page.click("tr[data-job='rival']")
    page.wait_for_function("document.querySelector('#detail h2') && document.querySelector('#detail h2').innerText.startsWith('rival')")
    detail = page.inner_text("#detail")
    assert "docs/r.md" in detail and "absent" in detail, "released paths and their digests"
    page.click("tr[data-job='card']")
    page.wait_for_function("document.querySelector('#detail').innerText.includes('build green')", timeout=10000)
    # each run with its end and exit code, and the follow-up its events went out in
    page.wait_for_selector("#detail table.runs tr.run", timeout=10000)
    assert "exit 0" in page.inner_text("#detail table.runs")
    page.wait_for_selector("#detail table.followups tr.followup", timeout=30000)
    assert "pending" in page.inner_text("#detail table.followups"), "grouped, not handed to any agent yet"

    # live: a job declared elsewhere appears without a reload
    api.fork({"id": "late-arrival", "write_paths": ["src/z.py"], "check": "test"}, cwd=root)
    page.wait_for_selector("tr[data-job='late-arrival']", timeout=15000)

    shot = str(tmp_path / "console.png")
    page.screenshot(path=shot, full_page=True)
    width, height = _png_size(shot)
    assert width == 1280 and height >= 600 and os.path.getsize(shot) > 20000
    os.makedirs(os.path.join(os.path.dirname(__file__), "..", "bench", "out"), exist_ok=True)
    shutil.copy(shot, os.path.join(os.path.dirname(__file__), "..", "bench", "out", "console.png"))

    # without the cookie, the API refuses
    anonymous = browser.new_context().new_page()
    response = anonymous.goto(f"http://127.0.0.1:{served.port}/api/v1/jobs")
    assert response.status == 401
    context.close()
