"""The console in a real headless Chromium (Debian's, at /usr/bin/chromium), at a desktop size
(1400x900) and a phone's (390x844, touch): login by the one-time link `proctor server status`
prints or by the token (an HttpOnly cookie that is not the token), the board and the tree
(HOLDER, columns, overlaps on both rows but never between a parent and its child, no `stale`
on the server's own jobs), a job's page by deep link (terms, monitors, follow-ups, trail,
releases, attempts), every action behind its confirmation, drag and drop, live updates
within a second, a bounded number of requests, ages that tick without a request, no sideways
scroll on a phone, filters and collapse, keyboard reach and text contrast. Each step leaves a
screenshot in bench/out/console-<step>-<desktop|phone>.png."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import time

import pytest

from proctor import api
from tests.server.test_server import Server, cli, served, wait_for  # noqa: F401  (the fixture)
from tests.support import REPO_ROOT

pytestmark = pytest.mark.slow  # every test here drives Chromium

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = REPO_ROOT
OUT = os.path.join(REPO, "bench", "out")
SIZES = {
    "desktop": {"viewport": {"width": 1400, "height": 900}},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "has_touch": True,
        "is_mobile": True,
        "device_scale_factor": 2,
    },
}
LONG = 20000  # ms: the machine has two cores and a server to share them with


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), f"the console test needs Debian's chromium at {CHROMIUM} (.ci/run installs it)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


# -- helpers ------------------------------------------------------------------------------------


def _png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def shot(page, step: str, kind: str) -> str:
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"console-{step}-{kind}.png")
    page.screenshot(path=path, full_page=True)
    return path


def context_for(browser, kind: str):
    context = browser.new_context(**SIZES[kind])
    context.set_default_timeout(LONG)
    return context


def login_link(served) -> str:
    """The one-time link as `proctor server status` prints it."""
    text = cli(served.root, "server", "status").stdout
    found = re.search(
        r"^login:\s+(http://127\.0\.0\.1:\d+/login\?code=\S+)\s+\(opens the console once, within 5 min\)", text, re.M
    )
    assert found, text
    return found.group(1)


def logged_in(browser, served, kind: str, path: str = "/"):
    """A context logged in by a fresh link (asked of the API, as status does), on `path`."""
    status, link = served.call("POST", "/api/v1/login-link", {})
    assert status == 200 and link["expires_in"] == 300, link
    context = context_for(browser, kind)
    page = context.new_page()
    page.goto(link["url"])
    page.wait_for_selector("body[data-loaded=yes]")
    if path != "/":
        page.goto(f"http://127.0.0.1:{served.port}{path}")
        page.wait_for_selector("body[data-loaded=yes]")
    return context, page


def url(served, path: str = "/") -> str:
    return f"http://127.0.0.1:{served.port}{path}"


def rows_of(page) -> dict:
    return {row.get_attribute("data-job"): row for row in page.query_selector_all("tr.job")}


def cell(page, job: str, index: int) -> str:
    return page.inner_text(f"tr.job[data-job='{job}'] > td:nth-child({index + 1})")


def listed(root) -> dict:
    return {row["id"]: row for row in api.ls_jobs(cwd=root)["jobs"]}


def page_json(served, job: str) -> dict:
    status, body = served.call("GET", f"/api/v1/jobs/{job}")
    assert status == 200, body
    return body


def open_job(page, served, job: str) -> None:
    page.goto(url(served, f"/jobs/{job}"))
    page.wait_for_selector(f"body[data-page='{job}']")
    page.wait_for_selector("#page-title")


def fork_rivals(root) -> None:
    api.fork(
        {"id": "card/child", "parent": "card", "write_paths": ["src/a.py"], "check": "test"},
        cwd=root,
        environ={"BAGGAGE": "proctor.lease=card"},
    )
    api.fork({"id": "rival", "write_paths": ["src/**", "docs/r.md"], "check": "test"}, cwd=root)
    api.fork({"id": "rival", "write_paths": ["src/**"], "check": "test"}, cwd=root)  # releases docs/r.md


def rivals_and_a_monitor(served) -> None:
    """fork_rivals, and a monitor of card that has printed `build green`."""
    fork_rivals(served.root)
    served.add("card", "echo build green")
    wait_for(lambda: served.events("card"), timeout=15)


def confirm_dialog(page, answer: str) -> str:
    """Answer the open confirmation ("cancel" or "ok") by clicking; return its text."""
    page.wait_for_selector("#confirm[open]")
    text = page.inner_text("#confirm-text")
    page.click("#confirm-cancel" if answer == "cancel" else "#confirm-ok")
    page.wait_for_selector("#confirm", state="hidden")
    return text


# -- 1. login -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_login(served, browser, kind):  # noqa: F811
    link = login_link(served)
    name = f"proctor_{served.port}"

    context = context_for(browser, kind)
    page = context.new_page()
    page.goto(link)
    page.wait_for_selector("body[data-loaded=yes]")
    assert page.url == url(served, "/"), "the link opens the board"
    cookies = {c["name"]: c for c in context.cookies()}
    assert cookies[name]["httpOnly"] is True
    assert cookies[name]["value"] != served.token and cookies[name]["value"] not in link
    shot(page, "login-link", kind)

    again = context_for(browser, kind)
    second = again.new_page()
    response = second.goto(link)
    assert response.status == 403, "a link opens the console once"
    assert "used already" in second.content()
    assert name not in {c["name"] for c in again.cookies()}
    assert second.goto(url(served, "/")).url.endswith("/login")
    shot(second, "login-link-reused", kind)
    again.close()

    # without the cookie, the API refuses
    anonymous = context_for(browser, kind).new_page()
    assert anonymous.goto(url(served, "/api/v1/jobs")).status == 401
    anonymous.context.close()
    deep = context_for(browser, kind)
    page = deep.new_page()
    page.goto(url(served, "/jobs/card"))
    assert "/login?next=/jobs/card" in page.url, "a deep link without a session: to the login page"
    assert page.get_attribute("input[name=next]", "value") == "/jobs/card"

    # the token form: a wrong token is refused, the right one opens a session
    form = context_for(browser, kind)
    page = form.new_page()
    page.goto(url(served, "/"))
    assert page.url.endswith("/login"), "no cookie: sent to the login page"
    assert page.query_selector("meta[name=viewport]") is not None
    page.fill("input[name=token]", "not-the-token")
    with page.expect_navigation():
        page.click("button")
    assert page.url.endswith("/login?failed=1"), f"the token form's post was answered with {page.inner_text('body')!r}"
    assert "not this server's" in page.content()
    assert name not in {c["name"] for c in form.cookies()}
    shot(page, "login-refused", kind)
    page.fill("input[name=token]", served.token)
    page.click("button")
    page.wait_for_selector("body[data-loaded=yes]")
    cookies = {c["name"]: c for c in form.cookies()}
    assert cookies[name]["httpOnly"] is True and cookies[name]["value"] != served.token
    form.close()

    # back to the job once logged in
    page = deep.pages[0]
    page.fill("input[name=token]", served.token)
    page.click("button")
    page.wait_for_selector("body[data-page=card]")
    assert page.url == url(served, "/jobs/card")
    assert page.inner_text("#page-title").startswith("card")
    deep.close()

    context.close()


# -- 2. the board and the tree ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_board_and_tree(served, browser, kind):  # noqa: F811
    root = served.root
    rivals_and_a_monitor(served)
    context, page = logged_in(browser, served, kind)
    page.wait_for_selector("tr.job[data-job='proctor-server/monitors']")
    page.wait_for_selector("tr.job[data-job='rival']")

    rows = rows_of(page)
    assert {"card", "card/child", "rival", "other", "proctor-server", "proctor-server/monitors"} <= set(rows)
    assert [th.inner_text() for th in page.query_selector_all("#jobs thead th")][:4] == [
        "JOB",
        "STATE",
        "HOLDER",
        "TOUCHED",
    ]
    assert cell(page, "proctor-server", 2) == "server"
    assert cell(page, "proctor-server/monitors", 2) == "server"
    assert cell(page, "card", 2) == "session"
    assert cell(page, "card", 3).endswith("ago")
    columns = [c.get_attribute("data-column") for c in page.query_selector_all(".column")]
    assert columns == ["Declared", "Running", "Returned", "Done"]
    tags = {c.get_attribute("data-column"): c.inner_text() for c in page.query_selector_all(".column")}
    assert "passive" in tags["Declared"] and "active" in tags["Running"] and "active" in tags["Returned"]
    assert "passive" in tags["Done"]
    assert page.query_selector(".column[data-column='Running'] .card[data-job='card']") is not None
    assert page.query_selector(".column[data-column='Declared'] .card[data-job='other']") is not None

    # the tree: the child right under its parent, indented
    order = list(rows)
    assert order.index("card/child") == order.index("card") + 1
    pad = page.evaluate(
        "id => parseFloat(getComputedStyle(document.querySelector(`tr.job[data-job='${id}'] td`)).paddingLeft)",
        "card/child",
    )
    assert pad > page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector(\"tr.job[data-job='card'] td\")).paddingLeft)"
    )
    assert page.query_selector("tr.job[data-job='card'] button.toggle[aria-expanded=true]") is not None

    # overlaps on both rows, never between a parent and the child forked inside its paths
    for job in ("card", "card/child", "rival"):
        assert "overlap" in rows[job].get_attribute("class"), f"overlap marked on {job}'s row"
        assert "overlaps rival" in cell(page, job, 5) or job == "rival"
        assert "overlap" in page.get_attribute(f".card[data-job='{job}']", "class")
    marks_rival = cell(page, "rival", 5)
    assert "overlaps card" in marks_rival and "overlaps card/child" in marks_rival
    assert "overlaps card/child" not in cell(page, "card", 5), "a parent does not overlap its own child"
    assert "overlaps card" not in cell(page, "card/child", 5).replace("overlaps card/", ""), (
        "a child does not overlap its parent"
    )
    pairs = api.ls_jobs(cwd=root)["overlaps"]
    assert not any({"card", "card/child"} == set(p if isinstance(p, list) else p.get("jobs", [])) for p in pairs), pairs
    assert "overlaps rival" in cell(page, "other", 5), "src/b.py is under rival's src/**"
    shot(page, "board", kind)

    # the server's own jobs are never stale, however small stale_after is
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write('\n[jobs]\nstale_after = "1s"\n')
    page.wait_for_function(
        "() => document.querySelector(\"tr.job[data-job='card']\").innerText.includes('stale')", timeout=40000
    )
    for job in ("proctor-server", "proctor-server/monitors"):
        assert "stale" not in cell(page, job, 5), f"{job} marked stale"
        assert (
            "stale" not in page.inner_text(f".card[data-job='{job}']")
            if page.query_selector(f".card[data-job='{job}']")
            else True
        )
    server_rows = {r["id"]: r for r in served.call("GET", "/api/v1/jobs")[1]["jobs"]}
    assert server_rows["card"]["stale"] is True
    assert server_rows["proctor-server"]["stale"] is False and server_rows["proctor-server/monitors"]["stale"] is False
    shot(page, "board-stale", kind)

    full = shot(page, "board-full", kind)
    width, height = _png_size(full)
    scale = 2 if kind == "phone" else 1
    assert width == SIZES[kind]["viewport"]["width"] * scale and height >= 600 and os.path.getsize(full) > 20000
    context.close()


# -- 3. a job's page ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_job_page(served, browser, kind):  # noqa: F811
    root = served.root
    rivals_and_a_monitor(served)
    context, page = logged_in(browser, served, kind)
    page.goto(url(served, "/jobs/card"))  # a deep link
    page.wait_for_selector("body[data-page=card]")
    assert page.inner_text("#page-title").startswith("card")
    assert page.is_hidden("#boardview") and page.is_visible("#pageview")
    assert page.title() == "card · proctor"

    terms = cli(root, "describe", "job", "card").stdout
    assert page.inner_text("pre.terms").strip() == terms.strip(), "the terms as `proctor describe job` prints them"

    page.wait_for_function(
        "() => document.querySelector('pre.events') && document.querySelector('pre.events').innerText.includes('build green')"
    )
    page.wait_for_selector("li.monitor .muted:has-text('last run')")
    monitor = page.inner_text("li.monitor")
    assert "echo build green" in monitor and "every 10s" in monitor
    assert re.search(r"last run \S+: exit 0", monitor) and " · next " in monitor, monitor
    page.wait_for_selector("ul.runs li.run")
    assert "exit 0" in page.inner_text("ul.runs")
    page.wait_for_selector("ul.followups li.followup", timeout=40000)
    assert "pending" in page.inner_text("ul.followups"), "grouped, not handed to any agent yet"
    trail = page.inner_text("ul.trail")
    assert page.query_selector_all("ul.trail li.event") and "by " in trail
    headings = [h.inner_text() for h in page.query_selector_all("#pageview h3")]
    for heading in (
        "Terms",
        "Result",
        "Verdict",
        "Footprint",
        "Entries",
        "Released paths",
        "Attempts",
        "Monitors",
        "Output (newest first)",
        "Runs (newest first)",
        "Follow-ups",
        "Trail (newest first)",
    ):
        assert heading in headings, f"{heading} section"
    attempts = page.evaluate(
        "[...document.querySelectorAll('#pageview h3')].find(h => h.innerText === 'Attempts').parentElement.innerText"
    )
    assert attempts.startswith("Attempts") and ("none" in attempts or "#" in attempts)
    shot(page, "job-card", kind)

    # the releases, with their digests, on the rival that narrowed its claim
    page.goto(url(served, "/jobs/rival"))
    page.wait_for_selector("body[data-page=rival]")
    releases = page.inner_text("ul.releases")
    data = page_json(served, "rival")["releases"]
    assert data and all(r["path"] in releases and str(r["digest"]) in releases for r in data)
    assert "docs/r.md" in releases and "absent" in releases, "released paths and their digests"
    shot(page, "job-rival", kind)

    # an unknown job's page says so
    page.goto(url(served, "/jobs/no-such-job"))
    page.wait_for_selector("body[data-page='no-such-job']")
    assert "no job no-such-job" in page.inner_text("#pageview")
    context.close()


# -- 4. actions -----------------------------------------------------------------------------------


def _act(page, button: str, answer: str) -> str:
    page.click(button)
    return confirm_dialog(page, answer)


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_actions(served, browser, kind):  # noqa: F811
    root = served.root
    for job in ("to-end", "to-archive", "to-trash", "to-delete"):
        api.fork({"id": job, "write_paths": [f"src/{job}.py"], "check": "test"}, cwd=root)
    first = served.add("card", "echo one", "1h")[1]
    second = served.add("card", "echo two", "1h")[1]
    context, page = logged_in(browser, served, kind)

    # end without a result
    open_job(page, served, "to-end")
    text = _act(page, "#do-end", "cancel")
    assert "End to-end without a result" in text
    page.wait_for_selector("#notice:has-text('cancelled')")
    assert listed(root)["to-end"]["state"] == "declared"
    _act(page, "#do-end", "ok")
    page.wait_for_selector("#notice:has-text('ended to-end')")
    wait_for(lambda: listed(root)["to-end"]["state"] == "no_return", timeout=10)
    page.wait_for_selector("#page-title:has-text('no_return')")
    assert page.query_selector("#do-end") is None, "an ended job cannot be ended again"
    shot(page, "action-end", kind)

    # archive and trash: off the board
    for job, action, done in (("to-archive", "archive", "archived"), ("to-trash", "trash", "trashed")):
        open_job(page, served, job)
        assert f"{action.capitalize()} {job}?" in _act(page, f"#do-{action}", "cancel")
        page.wait_for_selector("#notice:has-text('cancelled')")
        assert not page_json(served, job)["job"].get(done)
        _act(page, f"#do-{action}", "ok")
        page.wait_for_selector(f"#notice:has-text('{action}d {job}')")
        assert page_json(served, job)["job"].get(done), f"{job} {done}"
        assert (listed(root).get(job) or {}).get("column") is None, f"{done}: off the board"
        page.wait_for_selector(f"#page-title:has-text('{done}')")
        assert page.query_selector(f"#do-{action}") is None
        shot(page, f"action-{action}", kind)

    # delete: the row is gone, and the page goes back to the board
    open_job(page, served, "to-delete")
    assert "Delete to-delete's row for good?" in _act(page, "#do-delete", "cancel")
    assert "to-delete" in listed(root)
    _act(page, "#do-delete", "ok")
    page.wait_for_url(url(served, "/"))
    wait_for(lambda: "to-delete" not in listed(root), timeout=10)
    assert served.call("GET", "/api/v1/jobs/to-delete")[0] != 200
    page.wait_for_selector("tr.job[data-job='to-delete']", state="detached")
    shot(page, "action-delete", kind)

    # remove a monitor
    open_job(page, served, "card")
    page.wait_for_selector(f"li.monitor[data-monitor='{first['id']}']")
    page.wait_for_selector(f"li.monitor[data-monitor='{second['id']}']")
    assert f"Remove monitor #{first['id']} of card?" in _act(page, f"button[data-remove='{first['id']}']", "cancel")
    assert len(served.call("GET", "/api/v1/monitors?job=card")[1]["monitors"]) == 2
    _act(page, f"button[data-remove='{first['id']}']", "ok")
    page.wait_for_selector(f"#notice:has-text('removed monitor #{first['id']}')")
    assert [m["id"] for m in served.call("GET", "/api/v1/monitors?job=card")[1]["monitors"]] == [second["id"]]
    page.wait_for_selector(f"li.monitor[data-monitor='{first['id']}']", state="detached")
    shot(page, "action-remove-monitor", kind)

    # move to a passive column: the job's monitors are deleted
    page.select_option("#move-to", "Done")
    text = _act(page, "#do-move", "cancel")
    assert "Move card to Done?" in text and "passive" in text
    assert listed(root)["card"]["column"] == "Running"
    page.select_option("#move-to", "Done")
    _act(page, "#do-move", "ok")
    page.wait_for_selector("#notice:has-text('moved card to Done')")
    assert f"#{second['id']}" in page.inner_text("#notice"), "says which monitors went"
    assert listed(root)["card"]["column"] == "Done"
    assert served.call("GET", "/api/v1/monitors?job=card")[1]["monitors"] == []
    page.wait_for_selector("li.monitor", state="detached")
    shot(page, "action-move", kind)
    context.close()


def test_drag_a_card(served, browser):  # noqa: F811
    root = served.root
    context, page = logged_in(browser, served, "desktop")
    source = page.locator(".column[data-column='Declared'] .card[data-job='other']")
    target = page.locator(".column[data-column='Returned']")
    source.drag_to(target)
    text = confirm_dialog(page, "cancel")
    assert text == "Move other to Returned?"
    assert listed(root)["other"]["column"] == "Declared"
    page.locator(".column[data-column='Declared'] .card[data-job='other']").drag_to(target)
    confirm_dialog(page, "ok")
    page.wait_for_selector("#notice:has-text('moved other to Returned')")
    assert listed(root)["other"]["column"] == "Returned"
    page.wait_for_selector(".column[data-column='Returned'] .card[data-job='other']")
    assert page.query_selector(".column[data-column='Declared'] .card[data-job='other']") is None
    shot(page, "drag", "desktop")
    context.close()


# -- 5. live --------------------------------------------------------------------------------------

WATCH_ROW = """id => new Promise(resolve => {
  const seen = () => document.querySelector(`tr.job[data-job='${id}']`);
  if (seen()) return resolve(Date.now());
  setTimeout(() => resolve(null), 15000);
  new MutationObserver((_, observer) => { if (seen()) { observer.disconnect(); resolve(Date.now()); } })
    .observe(document.querySelector('#jobs tbody'), { childList: true, subtree: true });
})"""


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_live(served, browser, kind):  # noqa: F811
    root = served.root
    context, page = logged_in(browser, served, kind)
    page.wait_for_timeout(1500)  # the stream is open and quiet
    measured = []
    for n, how in enumerate(("api", "cli")):
        job = f"late-{n}"
        page.evaluate(f"id => {{ window.__appeared = ({WATCH_ROW})(id); }}", job)  # not awaited here
        if how == "api":
            api.fork({"id": job, "write_paths": [f"src/z{n}.py"], "check": "test"}, cwd=root)
        else:
            cli(root, "job", "fork", job, "--write-paths", f"src/z{n}.py", "--check", "test")
        returned = time.time()
        appeared = page.evaluate("window.__appeared")
        assert appeared is not None, f"{job} did not appear within 15 s"
        appeared /= 1000
        measured.append(appeared - returned)
        print(f"{kind}: {job} forked by {how} appeared {appeared - returned:.3f} s after the fork returned")
    page.wait_for_selector(".column[data-column='Declared'] .card[data-job='late-1']")
    shot(page, "live", kind)
    assert max(measured) <= 1.5, measured
    context.close()


# -- 6. requests, and the job page's output ------------------------------------------------------

CHATTY = "i=0; while true; do i=$((i+1)); echo {name} $i a; echo {name} $i b; sleep 1; done"


def test_request_count_and_output(served, browser):  # noqa: F811
    for name in ("tick", "tock"):
        status, _ = served.add("card", CHATTY.format(name=name), "60s")  # a run lasts the interval
        assert status == 201
    wait_for(lambda: len(served.events("card")) >= 4, timeout=15)
    context, board = logged_in(browser, served, "desktop")
    job = context.new_page()
    job.goto(url(served, "/jobs/card"))
    job.wait_for_selector("body[data-page=card]")
    job.wait_for_selector("pre.events")
    counts = {"board": [], "job": []}
    board.on("request", lambda r: counts["board"].append(r.url))
    job.on("request", lambda r: counts["job"].append(r.url))
    started = time.monotonic()

    def lines():
        return job.inner_text("pre.events").splitlines()

    before = lines()
    # enough lines to scroll: scroll the output down a little, and it stays there as lines come
    job.wait_for_function(
        "() => { const p = document.querySelector('pre.events'); return p && p.scrollHeight > p.clientHeight + 80; }",
        timeout=30000,
    )
    job.evaluate("document.querySelector('pre.events').scrollTop = 60")
    top_line = job.evaluate("document.querySelector('pre.events').innerText.split('\\n').length")
    scrolled = job.evaluate("document.querySelector('pre.events').scrollTop")
    assert scrolled >= 50
    first = lines()[0]
    job.wait_for_function(
        f"() => document.querySelector('pre.events').innerText.split('\\n')[0] !== {json.dumps(first)}", timeout=15000
    )
    after = lines()
    assert after != before and len(after) >= top_line, "new lines appear"
    scroll = job.evaluate("document.querySelector('pre.events').scrollTop")
    assert scroll >= scrolled, f"the output box kept its scroll position ({scrolled} -> {scroll})"
    # newest first: times never increase down the list, each monitor's count goes down
    parsed = [re.match(r"(\S+) #(\d+) (tick|tock) (\d+) ([ab])$", line) for line in after]
    assert all(parsed), after[:5]
    times = [m.group(1) for m in parsed]
    assert times == sorted(times, reverse=True), "newest first"
    for name in ("tick", "tock"):
        numbers = [int(m.group(4)) for m in parsed if m.group(3) == name]
        assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) > 1
    shot(job, "output", "desktop")

    remaining = 10 - (time.monotonic() - started)
    if remaining > 0:
        job.wait_for_timeout(remaining * 1000)
    print(f"requests in 10 s: board {len(counts['board'])}, job page {len(counts['job'])}")
    assert len(counts["board"]) <= 20, counts["board"]
    assert len(counts["job"]) <= 20, counts["job"]
    assert job.evaluate("document.querySelector('pre.events').scrollTop") > 0, "still scrolled where it was left"
    context.close()


# -- 7. ages tick ---------------------------------------------------------------------------------


def test_ages_tick_without_requests(served, browser):  # noqa: F811
    context, page = logged_in(browser, served, "desktop")
    page.wait_for_function(
        "() => /^\\d+s ago$/.test(document.querySelector(\"tr.job[data-job='card'] td.age\").innerText)"
    )
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    before = cell(page, "card", 3)
    page.wait_for_function(
        f"() => document.querySelector(\"tr.job[data-job='card'] td.age\").innerText !== {json.dumps(before)}",
        timeout=2500,
    )
    after = cell(page, "card", 3)
    assert re.fullmatch(r"\d+s ago", after) and int(after.split("s")[0]) > int(before.split("s")[0])
    assert requests == [], requests
    context.close()


# -- 8. a phone ----------------------------------------------------------------------------------


def test_phone_has_no_sideways_scroll(served, browser):  # noqa: F811
    root = served.root
    fork_rivals(root)
    api.fork(
        {
            "id": "card/a-rather-long-child-job-name-that-might-push-the-table-wider-than-a-phone",
            "parent": "card",
            "write_paths": ["src/a.py"],
            "check": "test",
        },
        cwd=root,
        environ={"BAGGAGE": "proctor.lease=card"},
    )
    served.add("card", "echo " + "unbroken" * 40 + "; echo short")
    wait_for(lambda: served.events("card"), timeout=15)
    context, page = logged_in(browser, served, "phone")
    assert page.evaluate("document.querySelector('meta[name=viewport]').content").startswith("width=device-width")
    assert page.evaluate("document.documentElement.clientWidth") == 390
    page.wait_for_selector("tr.job[data-job='rival']")
    width = page.evaluate("document.documentElement.scrollWidth")
    shot(page, "phone-board", "phone")
    assert width <= 390, f"the board scrolls sideways on a phone: {width} px"
    open_job(page, served, "card")
    page.wait_for_function(
        "() => document.querySelector('pre.events') && document.querySelector('pre.events').innerText.includes('unbroken')"
    )
    width = page.evaluate("document.documentElement.scrollWidth")
    shot(page, "phone-job", "phone")
    assert width <= 390, f"the job page scrolls sideways on a phone: {width} px"
    context.close()


# -- 9. filters and collapse ----------------------------------------------------------------------


def visible_rows(page) -> list[str]:
    return page.evaluate("[...document.querySelectorAll('tr.job')].filter(t => !t.hidden).map(t => t.dataset.job)")


def board_cards(page) -> list[str]:
    return page.evaluate("[...document.querySelectorAll('.board .card')].map(c => c.dataset.job)")


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_filters_and_collapse(served, browser, kind):  # noqa: F811
    root = served.root
    fork_rivals(root)
    api.fork({"id": "rival/kid", "parent": "rival", "write_paths": ["src/r.py"], "check": "test"}, cwd=root)
    api.fork({"id": "rival/kid/grand", "parent": "rival/kid", "write_paths": ["src/r.py"], "check": "test"}, cwd=root)
    context, page = logged_in(browser, served, kind)
    page.wait_for_selector("tr.job[data-job='rival/kid/grand']")
    everything = visible_rows(page)
    assert {"card", "card/child", "rival", "rival/kid", "rival/kid/grand", "other", "proctor-server"} <= set(everything)

    page.fill("#f-id", "rival")
    assert visible_rows(page) == ["rival", "rival/kid", "rival/kid/grand"]
    assert sorted(board_cards(page)) == ["rival", "rival/kid", "rival/kid/grand"]
    page.fill("#f-id", "GRAND")
    assert visible_rows(page) == ["rival/kid/grand"] and board_cards(page) == ["rival/kid/grand"]
    assert page.inner_text("#count") == f"1 of {len(everything)} shown"
    page.fill("#f-id", "")
    page.select_option("#f-state", "running")
    running = visible_rows(page)
    assert "card" in running and "other" not in running and "rival" not in running
    assert all(r["state"] == "running" for r in listed(root).values() if r["id"] in running)
    page.select_option("#f-state", "declared")
    assert {"other", "rival", "card/child"} <= set(visible_rows(page)) and "card" not in visible_rows(page)
    page.select_option("#f-state", "")
    page.select_option("#f-holder", "server")
    shown = visible_rows(page)
    assert shown and all(r.startswith("proctor-server") for r in shown)
    assert all(c.startswith("proctor-server") for c in board_cards(page))
    page.select_option("#f-holder", "session")
    assert "card" in visible_rows(page) and "proctor-server" not in visible_rows(page)
    shot(page, "filter", kind)
    page.select_option("#f-holder", "")
    assert visible_rows(page) == everything

    page.click("tr.job[data-job='card'] button.toggle")
    assert "card/child" not in visible_rows(page) and "card" in visible_rows(page)
    assert page.get_attribute("tr.job[data-job='card'] button.toggle", "aria-expanded") == "false"
    page.click("tr.job[data-job='rival'] button.toggle")
    assert "rival/kid" not in visible_rows(page) and "rival/kid/grand" not in visible_rows(page), "the whole subtree"
    shot(page, "collapsed", kind)
    page.click("tr.job[data-job='rival'] button.toggle")
    assert {"rival/kid", "rival/kid/grand"} <= set(visible_rows(page)) and "card/child" not in visible_rows(page)
    page.click("tr.job[data-job='rival/kid'] button.toggle")
    assert "rival/kid" in visible_rows(page) and "rival/kid/grand" not in visible_rows(page)
    page.click("tr.job[data-job='card'] button.toggle")
    assert "card/child" in visible_rows(page)
    page.click("#collapse-all")
    assert "card/child" not in visible_rows(page)
    page.click("#expand-all")
    assert visible_rows(page) == everything
    context.close()


# -- 10. keyboard and contrast -------------------------------------------------------------------


def tab_through(page, limit: int = 250) -> list[str]:
    """The data-k of each element Tab reaches, in order, until focus comes round again."""
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.evaluate("window.scrollTo(0, 0)")
    seen = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        k = page.evaluate(
            "document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.k || '' : ''"
        )
        if k and seen and k == seen[0]:
            break
        seen.append(k)
    return seen


def label_targets(page, selector: str) -> dict:
    return page.evaluate(
        """sel => { const out = {}; let n = 0;
        for (const node of document.querySelectorAll(sel)) { if (!node.getClientRects().length) continue;
          node.dataset.k = 'k' + (n++); out[node.dataset.k] = (node.id || node.getAttribute('href') || '') + ' ' + node.innerText; }
        return out; }""",
        selector,
    )


CONTRAST = """scope => {
  const parse = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const lum = ([r, g, b]) => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const background = node => { for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
      const c = parse(getComputedStyle(n).backgroundColor); if (c && c[3] > 0) return c; } return [255, 255, 255, 1]; };
  const results = [];
  for (const node of document.querySelectorAll(scope + ' *')) {
    if (!node.getClientRects().length) continue;
    const style = getComputedStyle(node);
    if (style.visibility === 'hidden' || style.display === 'none' || Number(style.opacity) === 0) continue;
    if (![...node.childNodes].some(c => c.nodeType === 3 && c.textContent.trim())) continue;
    const bg = background(node), fg = parse(style.color);
    const mixed = [0, 1, 2].map(i => fg[i] * fg[3] + bg[i] * (1 - fg[3]));
    const [a, b] = [lum(mixed), lum(bg)].sort((x, y) => y - x);
    results.push({ ratio: (a + 0.05) / (b + 0.05), tag: node.tagName.toLowerCase(), cls: node.className,
                   text: [...node.childNodes].filter(c => c.nodeType === 3).map(c => c.textContent).join('').trim().slice(0, 60),
                   color: style.color, background: 'rgb(' + bg.slice(0, 3).join(', ') + ')' });
  }
  results.sort((x, y) => x.ratio - y.ratio);
  return results;
}"""


def check_contrast(page, where: str, scope: str = "body") -> dict:
    results = page.evaluate(CONTRAST, scope)
    assert results, "text found"
    worst = results[0]
    print(f"contrast on {where}: {len(results)} elements, worst {worst['ratio']:.2f}:1 {worst}")
    assert worst["ratio"] >= 4.5, f"text contrast below 4.5:1 on {where}: {worst}"
    return worst


def test_keyboard_and_contrast(served, browser):  # noqa: F811
    root = served.root
    fork_rivals(root)
    api.fork({"id": "keyed", "write_paths": ["src/k.py"], "check": "test"}, cwd=root)
    monitor = served.add("card", "echo keyboard", "1h")[1]
    wait_for(lambda: served.events("card"), timeout=15)
    context, page = logged_in(browser, served, "desktop")
    page.wait_for_selector("tr.job[data-job='rival']")

    # the board: every job link (the tree's and the cards') and every button is reached by Tab
    targets = label_targets(page, "tr.job a, .board a.card, #boardview button, #boardview input, #boardview select")
    reached = tab_through(page)
    missing = {k: v for k, v in targets.items() if k not in reached}
    assert not missing, f"not reachable by Tab on the board: {missing}"
    worst_board = check_contrast(page, "the board")
    page.hover("tr.job[data-job='card']")
    check_contrast(page, "the board, a row hovered")
    shot(page, "keyboard-board", "desktop")

    # a link followed by the keyboard opens the job's page
    page.focus("tr.job[data-job='keyed'] a")
    page.keyboard.press("Enter")
    page.wait_for_selector("body[data-page=keyed]")
    page.wait_for_selector("#do-archive")

    # a job's page: every action and the monitor's Remove
    open_job(page, served, "card")
    page.wait_for_selector(f"button[data-remove='{monitor['id']}']")
    page.wait_for_selector("ul.followups li.followup", timeout=40000)  # what changes soon has changed
    targets = label_targets(page, "#pageview button, #pageview select, #pageview a")
    assert {"#do-move", "#do-end", "#do-archive", "#do-trash", "#do-delete"} <= {
        "#" + v.split(" ")[0] for v in targets.values()
    }
    reached = tab_through(page)
    missing = {k: v for k, v in targets.items() if k not in reached}
    assert not missing, f"not reachable by Tab on card's page: {missing}"
    worst_page = check_contrast(page, "card's page")
    shot(page, "keyboard-job", "desktop")

    # the confirmation by keyboard: Escape cancels, Tab to Confirm and Enter confirms
    open_job(page, served, "keyed")
    page.focus("#do-archive")
    page.keyboard.press("Enter")
    page.wait_for_selector("#confirm[open]")
    assert page.evaluate("document.activeElement.id") == "confirm-cancel", "the safe choice has the focus"
    check_contrast(page, "the confirmation", "#confirm")
    shot(page, "keyboard-confirm", "desktop")
    page.keyboard.press("Escape")
    page.wait_for_selector("#confirm", state="hidden")
    page.wait_for_selector("#notice:has-text('cancelled')")
    assert not page_json(served, "keyed")["job"].get("archived")
    page.focus("#do-archive")
    page.keyboard.press("Enter")
    page.wait_for_selector("#confirm[open]")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "confirm-ok"
    page.keyboard.press("Enter")
    page.wait_for_selector("#notice:has-text('archived keyed')")
    assert page_json(served, "keyed")["job"].get("archived")
    print(f"worst contrast: board {worst_board['ratio']:.2f}, job page {worst_page['ratio']:.2f}")
    context.close()


def test_focus_survives_a_live_update(served, browser):  # noqa: F811
    """A keyboard user on a job page whose monitor talks: a push re-renders the page, and the
    focused action must keep the focus (else every second of output sends Tab back to the top)."""
    served.add("card", CHATTY.format(name="tick"), "60s")
    wait_for(lambda: served.events("card"), timeout=15)
    context, page = logged_in(browser, served, "desktop")
    open_job(page, served, "card")
    page.wait_for_function(
        "() => document.querySelector('pre.events') && document.querySelector('pre.events').innerText.includes('tick')"
    )
    page.focus("#do-archive")
    assert page.evaluate("document.activeElement.id") == "do-archive"
    first = page.inner_text("pre.events").splitlines()[0]
    page.wait_for_function(
        f"() => document.querySelector('pre.events').innerText.split('\\n')[0] !== {json.dumps(first)}", timeout=15000
    )  # the page was pushed again
    focused = page.evaluate("document.activeElement.id || document.activeElement.tagName")
    shot(page, "focus-after-push", "desktop")
    assert focused == "do-archive", f"a live update moved the keyboard focus from #do-archive to {focused}"
    context.close()


def test_a_rejected_jobs_page(served, browser):  # noqa: F811
    """The result, the verdict with every failing rule, and the footprint, as a person reads them."""
    from tests.server.test_console_api import reject_card

    reject_card(served)
    for kind in ("desktop", "phone"):
        context, page = logged_in(browser, served, kind, "/jobs/card")
        page.wait_for_selector("body[data-page='card'] .verdict")
        text = page.inner_text("#pageview")
        assert "wrote a.py" in text and "rejected" in text and "stray.txt" in page.inner_text(".verdict"), text
        assert "src/a.py: +1" in page.inner_text("pre.footprint")
        assert "End without a result" not in text, "an ended job is not ended again"
        shot(page, "job-rejected", kind)
        context.close()
