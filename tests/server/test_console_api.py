"""The console's API, without a browser: a job's page, the actions and the rules they follow
(the person's only: no job secret, no leased process, no other origin), the stream that pushes
rows instead of a "look again", one-time login links, and `proctor job move` from the CLI."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from proctor import api
from tests.server.test_server import Server, cli, served, wait_for  # noqa: F401  (the fixture)


def _row(root: str, job: str) -> dict | None:
    return next((r for r in api.ls_jobs(cwd=root)["jobs"] if r["id"] == job), None)


def _act(served, **body):  # noqa: F811
    return served.call("POST", "/api/v1/actions", body)


def test_a_jobs_page_holds_its_terms_monitors_runs_and_trail(served):  # noqa: F811
    served.add("card", "echo page-line")
    wait_for(lambda: served.events("card"), timeout=20)
    status, page = served.call("GET", "/api/v1/jobs/card")
    assert status == 200, page
    terms = cli(served.root, "describe", "job", "card").stdout
    assert page["terms"]["text"] == terms, "the terms as describe job renders them"
    assert page["job"]["column"] == "Running" and "nonce_sha256" not in page["job"]
    [monitor] = page["monitors"]
    wait_for(lambda: served.call("GET", "/api/v1/jobs/card")[1]["monitors"][0]["last"] is not None, timeout=20)
    monitor = served.call("GET", "/api/v1/jobs/card")[1]["monitors"][0]
    assert monitor["last"]["exit_code"] == 0 and monitor["next"] > monitor["last"]["started"]
    page = served.call("GET", "/api/v1/jobs/card")[1]
    assert page["output"][0]["line"] == "page-line"
    kinds = [event["kind"] for event in page["trail"]]
    assert kinds[-1] == "job_fork" and "job_exec" in kinds, "the trail, newest first"
    assert served.call("GET", "/api/v1/jobs/nobody")[0] == 400
    status, answer = served.call("GET", "/api/v1/jobs/card", token=None)
    assert status == 401


def test_actions_change_the_store_as_the_cli_would(served):  # noqa: F811
    root = served.root
    api.fork({"id": "spare", "write_paths": ["src/s.py"], "check": "test"}, cwd=root)
    api.fork({"id": "gone", "write_paths": ["src/g.py"], "check": "test"}, cwd=root)
    status, done = _act(served, action="end", job="spare")
    assert status == 200 and done["state"] == "no_return", done
    assert _row(root, "spare")["state"] == "no_return"
    assert "abandoned by user:token" in _row(root, "spare")["end_reason"], (
        "who acted: the token here, user:console from a browser"
    )
    assert _act(served, action="archive", job="spare")[0] == 200
    assert _row(root, "spare")["archived"] and _row(root, "spare")["column"] is None
    assert _act(served, action="trash", job="other")[0] == 200 and _row(root, "other")["trashed"]
    assert _act(served, action="delete", job="gone")[0] == 200 and _row(root, "gone") is None
    status, refused = _act(served, action="end", job="spare")
    assert status == 409 and refused["refusals"][0]["code"], "ending an ended job is refused, as the CLI refuses it"
    assert _act(served, action="launch", job="card")[0] == 400
    assert _act(served, action="archive", job="../x")[0] == 400
    assert _act(served, action="move", job="card")[0] == 400, "a move names its column"
    status, refused = _act(served, action="move", job="card", column="Nowhere")
    assert status == 409 and refused["refusals"][0]["code"] == "PRC3066", refused
    trail = [e["kind"] for e in served.call("GET", "/api/v1/jobs/spare")[1]["trail"]]
    assert trail[:2] == ["job_archive", "job_exit"]


def test_a_move_to_a_passive_column_deletes_the_jobs_monitors(served):  # noqa: F811
    root = served.root
    status, monitor = served.add("card", "sleep 30", interval="10s")
    assert status == 201
    status, done = _act(served, action="move", job="card", column="Returned")
    assert status == 200 and done["monitors_deleted"] == [], "Returned is active: the monitor stays"
    assert _row(root, "card")["column"] == "Returned" and _row(root, "card")["state"] == "running"
    status, done = _act(served, action="move", job="card", column="Done")
    assert status == 200 and done["monitors_deleted"] == [monitor["id"]], done
    assert served.call("GET", "/api/v1/monitors?job=card")[1]["monitors"] == []
    assert served.add("card", "true")[0] == 409, "no monitor for a card in a passive column"
    # the move holds while the state does; a move back to the state's own column clears it
    assert _act(served, action="move", job="card", column="Running")[0] == 200
    row = _row(root, "card")
    assert row["column"] == "Running" and not row.get("moved")
    assert _act(served, action="move", job="card", column="Declared")[0] == 200
    api.exit_job("card", {"schema_version": 1, "status": "done", "summary": "s"}, cwd=served.worktree)
    assert _row(root, "card")["column"] == "Returned", "a new state: the card follows it again"


def test_actions_are_the_persons_only(served, tmp_path):  # noqa: F811
    root = served.root
    body = json.dumps({"action": "archive", "job": "other"})
    # a job's secret manages that job's monitors, nothing more
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/api/v1/actions",
        data=body.encode(),
        method="POST",
        headers={"Authorization": f"Nonce {served.card_nonce}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401
    # another origin, or a form post, cannot act with the person's cookie
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    conn.request(
        "POST",
        "/api/v1/actions",
        body,
        {
            "Authorization": f"Bearer {served.token}",
            "Origin": "http://evil.example",
            "Content-Type": "application/json",
        },
    )
    assert conn.getresponse().status == 403
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    conn.request(
        "POST",
        "/api/v1/actions",
        "action=archive&job=other",
        {"Authorization": f"Bearer {served.token}", "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert conn.getresponse().status == 403
    # a process that works a job, holding the token, is refused
    call = (
        "import json,sys,urllib.request,urllib.error\n"
        "r=urllib.request.Request(sys.argv[1],data=sys.argv[2].encode(),method='POST',headers={'Authorization':'Bearer '+sys.argv[3],"
        "'Content-Type':'application/json'})\n"
        "try:\n  print(urllib.request.urlopen(r,timeout=30).status)\n"
        "except urllib.error.HTTPError as e:\n  print(e.code, e.read().decode())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", call, f"http://127.0.0.1:{served.port}/api/v1/actions", body, served.token],
        env={**os.environ, "BAGGAGE": "proctor.lease=card"},
        cwd=served.worktree,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.startswith("403") and "SERVER_LEASED_CALLER" in done.stdout, done.stdout + done.stderr
    assert not _row(root, "other").get("archived")


def _sse(port: int, token: str, path: str, seconds: float) -> list[tuple[str, dict]]:
    """The events one stream sent within `seconds` (read off the socket: no client buffering)."""
    import socket

    sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    data, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        data += chunk
    sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    events, kind = [], None
    for line in body.decode().splitlines():  # chunked framing lines are neither `event:` nor `data:`
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: ") and kind:
            events.append((kind, json.loads(line[6:])))
            kind = None
    return events


def test_the_stream_pushes_rows_once_and_then_only_what_changed(served):  # noqa: F811
    import threading

    got: list = []
    reader = threading.Thread(target=lambda: got.extend(_sse(served.port, served.token, "/api/v1/stream?job=card", 8)))
    reader.start()
    time.sleep(2.5)
    forked = time.monotonic()
    api.fork({"id": "late", "write_paths": ["src/late.py"], "check": "test"}, cwd=served.root)
    reader.join()
    jobs = [data for kind, data in got if kind == "jobs"]
    assert jobs[0]["full"] is True and {"card", "other", "proctor-server"} <= {r["id"] for r in jobs[0]["upsert"]}
    assert "age_seconds" not in jobs[0]["upsert"][0], "ages are counted by the page, so a quiet board pushes nothing"
    later = [data for data in jobs[1:] if data["upsert"]]
    assert later and [r["id"] for r in later[0]["upsert"]] == ["late"], later
    assert "late" in later[0]["order"]
    pages = [data for kind, data in got if kind == "job"]
    assert pages and pages[0]["id"] == "card" and pages[0]["terms"]["text"].startswith("Job:")
    assert len(pages) <= 2, "the page is sent again only when it changed"
    del forked


def _open_link(url: str) -> urllib.error.HTTPError:
    """The answer to one GET of a login link, its redirect not followed (a 303 or a refusal)."""

    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.build_opener(Keep).open(url, timeout=30)
    return answer.value


def test_a_login_link_opens_one_session_once(served):  # noqa: F811
    done = cli(served.root, "server", "status")
    line = next(line for line in done.stdout.splitlines() if line.startswith("login:"))
    url = line.split()[1]
    assert url.startswith(f"http://127.0.0.1:{served.port}/login?code=") and "within 5 min" in line
    first = _open_link(url)
    assert first.code == 303 and first.headers["Location"] == "/"
    cookie = first.headers["Set-Cookie"]
    assert cookie.startswith(f"proctor_{served.port}=") and "HttpOnly" in cookie and served.token not in cookie
    assert _open_link(url).code == 403, "a code is used once"
    # the cookie it gave opens the console's API
    session = cookie.split(";")[0]
    request = urllib.request.Request(f"http://127.0.0.1:{served.port}/api/v1/jobs/card", headers={"Cookie": session})
    assert urllib.request.urlopen(request, timeout=30).status == 200
    # only the token's holder gets a link: not a console session, not a job's secret
    for headers in ({"Cookie": session}, {"Authorization": f"Nonce {served.card_nonce}"}):
        request = urllib.request.Request(
            f"http://127.0.0.1:{served.port}/api/v1/login-link",
            data=b"{}",
            method="POST",
            headers={**headers, "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code in (401, 403)
    as_json = json.loads(cli(served.root, "server", "status", "-o", "json").stdout)
    assert as_json["login_link"].startswith(f"http://127.0.0.1:{served.port}/login?code=")
    # a process that works a job gets no link
    leased = cli(served.root, "server", "status", env={"BAGGAGE": "proctor.lease=card"})
    login = next(line for line in leased.stdout.splitlines() if line.startswith("login:"))
    assert "no login link" in login and "proctor.lease=card" in login and "code=" not in login, login


def test_login_codes_expire_and_are_bounded(monkeypatch):
    from proctor.server import console

    clock = [1000.0]
    monkeypatch.setattr(console.time, "monotonic", lambda: clock[0])
    codes = console.LoginCodes()
    code, seconds = codes.issue()
    clock[0] += seconds + 1
    assert not codes.redeem(code), "an expired code opens nothing"
    many = [codes.issue()[0] for _ in range(console.MAX_LOGIN_CODES + 5)]
    assert len(codes.codes) == console.MAX_LOGIN_CODES and not codes.redeem(many[0]) and codes.redeem(many[-1])
    assert not codes.redeem("") and not codes.redeem("x" * 5000)


def test_after_logging_in_a_deep_link_returns_to_its_job_and_nowhere_else(served):  # noqa: F811
    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(Keep)
    with pytest.raises(urllib.error.HTTPError) as sent:
        opener.open(f"http://127.0.0.1:{served.port}/jobs/card", timeout=30)
    assert sent.value.code == 303 and sent.value.headers["Location"] == "/login?next=/jobs/card"
    for target, lands in (
        ("/jobs/card", "/jobs/card"),
        ("//evil.example/x", "/"),
        ("https://evil.example", "/"),
        ("/jobs/x\r\nSet-Cookie: a=b", "/"),
    ):
        form = urllib.parse.urlencode({"token": served.token, "next": target}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{served.port}/login", data=form, method="POST")
        with pytest.raises(urllib.error.HTTPError) as answer:
            opener.open(request, timeout=30)
        assert answer.value.code == 303 and answer.value.headers["Location"] == lands, (target, answer.value.headers)


def test_job_move_from_the_cli(tmp_path, monkeypatch, new_repo):
    root = new_repo("repo", "[targets.test]\ncommand = 'true'\n")
    api.fork({"id": "a", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    done = cli(root, "job", "move", "a", "Running", "-o", "json")
    assert json.loads(done.stdout)["moved"]["column"] == "Running"
    assert _row(root, "a")["column"] == "Running" and _row(root, "a")["state"] == "declared"
    refused = cli(root, "job", "move", "a", "Nope", check=False)
    assert (
        refused.returncode == 1
        and "PRC3066" in refused.stderr
        and "Declared, Running, Returned, Done" in refused.stderr
    )
    leased = cli(root, "job", "move", "a", "Done", "--lease", "a", check=False)
    assert leased.returncode == 1 and "PRC3042" in leased.stderr
    assert "moved a to Done" in cli(root, "job", "move", "a", "Done").stdout


def test_a_child_inside_its_parent_is_no_overlap(served):  # noqa: F811
    root = served.root
    api.fork(
        {"id": "card/part", "parent": "card", "write_paths": ["src/a.py"], "check": "test"},
        cwd=served.worktree,
        environ={"BAGGAGE": "proctor.lease=card"},
    )
    api.fork({"id": "rival", "write_paths": ["src/**"], "check": "test"}, cwd=root)
    listing = api.ls_jobs(cwd=root)
    rows = {r["id"]: r for r in listing["jobs"]}
    assert "card" not in rows["card/part"]["overlaps_with"] and "card/part" not in rows["card"]["overlaps_with"]
    assert rows["card/part"]["overlaps_with"] == ["rival"] and set(rows["rival"]["overlaps_with"]) >= {
        "card",
        "card/part",
    }
    assert all(set(p["jobs"]) != {"card", "card/part"} for p in listing["overlaps"])
    text = cli(root, "ls", "jobs").stdout
    assert "card] and card/part" not in text and "card/part [src/a.py] and rival" in text, text


def test_the_servers_own_jobs_are_never_stale(tmp_path):
    from proctor.config import load
    from proctor.jobs.listing import build

    at = time.time()
    old = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at - 86400))
    jobs = [
        {"id": "proctor-server", "state": "running", "holder": "server", "created": old, "updated": old},
        {"id": "quiet", "state": "running", "holder": "session", "created": old, "updated": old},
    ]
    rows = {r["id"]: r for r in build(jobs, load(str(tmp_path)), at)["jobs"]}
    assert rows["quiet"]["stale"] and not rows["proctor-server"]["stale"]


def test_the_console_page_runs_only_its_own_script_and_is_never_framed(served):  # noqa: F811
    import base64
    import hashlib

    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/", headers={"Authorization": f"Bearer {served.token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        page, policy = response.read().decode(), response.headers["Content-Security-Policy"]
        assert response.headers["X-Frame-Options"] == "DENY"
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline'; img" in policy and "script-src 'unsafe-inline'" not in policy, "inline styles only"
    with urllib.request.urlopen(f"http://127.0.0.1:{served.port}/login", timeout=30) as response:
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


def reject_card(served):  # noqa: F811
    """card's holder writes src/a.py and stray.txt (outside its paths), files a result citing a
    run of its check, and the person's wait rejects it; the wait's output."""
    holder = served.worktree
    os.makedirs(os.path.join(holder, "src"), exist_ok=True)
    with open(os.path.join(holder, "src", "a.py"), "w") as handle:
        handle.write("ok = True\n")
    with open(os.path.join(holder, "stray.txt"), "w") as handle:
        handle.write("not card's\n")
    made = api.run_target("test", cwd=holder, warn=lambda _line: None)
    api.exit_job(
        "card",
        {
            "schema_version": 2,
            "status": "done",
            "summary": "wrote a.py",
            "changed_paths": ["src/a.py"],
            "validation": [{"run": made["id"], "output_ref": made["output_ref"]}],
        },
        cwd=holder,
        warn=lambda _line: None,
    )
    waited = cli(served.root, "job", "wait", "card", check=False)
    assert waited.returncode == 1, waited.stdout + waited.stderr
    return waited


def test_a_rejected_jobs_page_holds_its_result_verdict_and_footprint(served):  # noqa: F811
    """card's holder writes its own file and one outside its paths, files a result citing its
    check, and the person's wait rejects it: the page holds the result, every failing rule with
    its subject, and the footprint as `job wait` prints it."""
    waited = reject_card(served)
    page = served.call("GET", "/api/v1/jobs/card")[1]
    assert page["result"]["summary"] == "wrote a.py" and page["job"]["state"] == "fail"
    subjects = [s for failure in page["verdict"]["failures"] for s in failure["subjects"]]
    assert any("stray.txt" in s for s in subjects), page["verdict"]
    for failure in page["verdict"]["failures"]:
        for subject in failure["subjects"]:
            assert f"{failure['label']}: {subject}" in waited.stdout, "every failing rule, as the wait printed it"
    footprint = "\n".join(page["footprint"])
    assert "src/a.py: +1" in footprint and "stray.txt" in footprint, footprint
    assert page["job"]["column"] == "Done"


def test_a_server_started_in_the_foreground_says_where_it_is_with_a_login_link(new_repo):
    """`server start --foreground` prints the lines `server start` prints (console, api, mcp,
    token, a one-time login link) once it listens; the link opens the console once; Ctrl-C ends
    it. The server `server start` detaches puts no login link in its log."""
    import signal
    import threading

    root = new_repo("repo", "[targets.test]\ncommand = 'true'\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "server", "start", "--foreground"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in proc.stdout), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any(line.startswith("login:") for line in lines) or proc.poll() is not None, timeout=60)
        said = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines if ":" in line}
        assert lines[0].startswith("server started in the foreground") and f"(pid {proc.pid})" in lines[0], lines
        status = json.loads(cli(root, "server", "status", "-o", "json").stdout)
        assert said["console"] == status["console"] and said["api"] == status["url"] and said["mcp"] == status["mcp"]
        assert said["token"] == status["token_path"]
        url = said["login"].split()[0]
        assert url.startswith(status["console"] + "login?code=") and "within 5 min" in said["login"], lines
        first = _open_link(url)
        assert first.code == 303 and first.headers["Set-Cookie"].startswith("proctor_")
        assert _open_link(url).code == 403, "the link is good once"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
        reader.join(timeout=10)
        assert lines[-1] == "server stopped", lines
        assert json.loads(cli(root, "server", "status", "-o", "json", check=False).stdout)["running"] is False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    detached = cli(root, "server", "start")
    try:
        assert "login:   http://127.0.0.1:" in detached.stdout, detached.stdout
        log = os.path.join(os.path.dirname(status["token_path"]), "server.log")
        with open(log, encoding="utf-8", errors="replace") as handle:
            assert "code=" not in handle.read(), "a login link in the detached server's log"
    finally:
        cli(root, "server", "stop", check=False)
