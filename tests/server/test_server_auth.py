"""The server's authentication middleware (proctor/server/auth.py) and its table of who may
call each route (proctor/server/app.py build): every route has a policy, a route without one
is refused to everyone, a job's secret on a route of the token's is refused as it always was,
the open routes ask nothing, and the checks keep their order (host, origin, identity)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading

import pytest

from proctor import errors
from proctor.server import app as app_mod
from proctor.server import auth
from tests.support import make_repo
from tests.server.test_server import wait_for

TOKEN = "tok"
SECRET = "the-jobs-secret"
UNAUTHORIZED_BODY = {
    "error": {
        "code": errors.UNAUTHORIZED,
        "message": "send the server token (proctor server status prints where it is)",
    }
}

# (path, methods) -> policy: a change here is a change of who may call what
EXPECTED = {
    ("/", ("GET", "HEAD")): auth.PAGE,
    ("/jobs/{id:path}", ("GET", "HEAD")): auth.PAGE,
    ("/api/v1/jobs/{id:path}", ("GET", "HEAD")): auth.PERSON,
    ("/api/v1/actions", ("POST",)): auth.PERSON,
    ("/api/v1/attempt", ("GET", "HEAD")): auth.PERSON,
    ("/api/v1/login-link", ("POST",)): auth.PERSON,
    ("/login", ("GET", "HEAD")): auth.OPEN,
    ("/login", ("POST",)): auth.OPEN,
    ("/api/v1/status", ("GET", "HEAD")): auth.JOB,
    ("/api/v1/jobs", ("GET", "HEAD")): auth.PERSON,
    ("/api/v1/monitors", ("GET", "HEAD")): auth.JOB,
    ("/api/v1/monitors", ("POST",)): auth.JOB,
    ("/api/v1/monitors/{id}", ("DELETE",)): auth.JOB,
    ("/api/v1/events", ("GET", "HEAD")): auth.JOB,
    ("/api/v1/runs", ("GET", "HEAD")): auth.JOB,
    ("/api/v1/followups", ("GET", "HEAD")): auth.JOB,
    ("/api/v1/followups/{id:int}", ("GET", "HEAD")): auth.JOB,
    ("/api/v1/stream", ("GET", "HEAD")): auth.PERSON,
    ("/api/v1/shutdown", ("POST",)): auth.PERSON,
    ("/mcp", ()): auth.OPEN,
}


def _state(tmp_path, port: int) -> app_mod.State:
    from proctor.paths import find_checkout, repo_state_dir

    root = make_repo(tmp_path / "repo")
    return app_mod.State(root, repo_state_dir(find_checkout(root)), root, TOKEN, port)


@contextlib.asynccontextmanager
async def _lifespan(app):
    yield


def _table(app) -> list:
    (middleware,) = [m for m in app.user_middleware if m.cls is auth.Authenticate]
    return middleware.kwargs["table"]


def test_every_route_is_in_the_table(tmp_path):
    app = app_mod.build(_state(tmp_path, 1), _lifespan)
    table = _table(app)
    assert [route for route, _policy in table] == app.routes, "the table is the routes, in order"
    found = {(route.path, tuple(sorted(route.methods or ()))): policy for route, policy in table}
    assert found == EXPECTED


def test_a_policy_the_middleware_does_not_know_is_refused_at_once():
    from starlette.routing import Route

    with pytest.raises(ValueError, match="no policy"):
        auth.Authenticate(lambda scope, receive, send: None, [(Route("/x", lambda request: None), "token")])


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The application in this process, with one route added past the table, and a job's
    secret known without a store (`_identify` answers it as the store would)."""
    import uvicorn
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    identify = app_mod._identify

    def _identify(state, header, cookie):
        if header == f"Nonce {SECRET}":
            return "nonce", "the-job"
        return identify(state, header, cookie)

    monkeypatch.setattr(app_mod, "_identify", _identify)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = app_mod.build(_state(tmp_path, port), _lifespan)
    reached: list[str] = []

    async def unlisted(request):
        reached.append(request.url.path)
        return JSONResponse({"reached": True})

    app.router.routes.append(Route("/api/v1/unlisted", unlisted))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=10)
    yield port, reached
    server.should_exit = True
    thread.join(10)


def _call(port: int, method: str, path: str, headers: dict | None = None, body: bytes | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        sent = {"Host": f"127.0.0.1:{port}", **(headers or {})}
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_a_route_added_without_a_policy_is_refused_to_everyone(served):
    port, reached = served
    for headers in ({}, {"Authorization": f"Bearer {TOKEN}"}, {"Authorization": f"Nonce {SECRET}"}):
        status, _headers, body = _call(port, "GET", "/api/v1/unlisted", headers)
        assert status == 500, (headers, body)
        assert json.loads(body)["error"]["code"] == errors.ROUTE_UNLISTED, "a server fault, not the caller's"
    assert reached == [], "the handler never ran"


def test_the_token_passes_and_a_secret_passes_where_its_policy_lets_it(served):
    port, _reached = served
    status, _headers, body = _call(port, "GET", "/api/v1/status", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and json.loads(body)["repo"], body
    status, _headers, body = _call(port, "GET", "/api/v1/status", {"Authorization": f"Nonce {SECRET}"})
    assert status == 200, body


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/api/v1/jobs"),
        ("GET", "/api/v1/jobs/the-job"),
        ("GET", "/api/v1/attempt?job=the-job&number=1"),
        ("GET", "/api/v1/stream"),
        ("POST", "/api/v1/actions"),
        ("POST", "/api/v1/login-link"),
        ("POST", "/api/v1/shutdown"),
    ],
)
def test_a_secret_on_a_route_of_the_tokens_is_refused_as_before(served, method, path):
    port, _reached = served
    headers = {"Authorization": f"Nonce {SECRET}", "Content-Type": "application/json"}
    status, got, body = _call(port, method, path, headers, b"{}" if method == "POST" else None)
    assert status == 401 and got["content-type"] == "application/json"
    assert body == json.dumps(UNAUTHORIZED_BODY, separators=(",", ":")).encode()
    status, _got, again = _call(port, method, path, {"Content-Type": "application/json"}, None)
    assert (status, again) == (401, body), "the same answer as no credential at all"


@pytest.mark.parametrize("path, target", [("/", "/login"), ("/jobs/a b", "/login?next=/jobs/a%20b")])
def test_a_console_page_sends_a_secret_or_a_stranger_to_the_login_page(served, path, target):
    port, _reached = served
    for headers in ({}, {"Authorization": f"Nonce {SECRET}"}):
        status, got, _body = _call(port, "GET", path.replace(" ", "%20"), headers)
        assert (status, got["location"]) == (303, target)


def test_the_open_routes_ask_nothing(served):
    port, _reached = served
    status, got, body = _call(port, "GET", "/login")
    assert status == 200 and got["content-type"].startswith("text/html") and b"Server token" in body
    # /mcp checks for itself: its own refusal, which names a job's secret too
    status, _got, body = _call(port, "POST", "/mcp", {"Content-Type": "application/json"}, b"{}")
    assert status == 401 and b"PROCTOR_NONCE" in json.loads(body)["error"]["message"].encode()


def test_no_route_is_the_routers_answer_unchecked(served):
    port, _reached = served
    assert _call(port, "GET", "/nowhere", {"Host": "evil.example"})[0] == 404
    assert _call(port, "GET", "/api/v1/actions")[0] == 405


def test_the_checks_keep_their_order(served):
    port, _reached = served
    # a wrong host wins over a foreign origin and over no credential
    status, _got, body = _call(port, "POST", "/api/v1/monitors", {"Host": "evil.example", "Origin": "http://evil"})
    assert (status, json.loads(body)["error"]["code"]) == (421, errors.BAD_HOST)
    # a foreign origin wins over no credential
    status, _got, body = _call(
        port, "POST", "/api/v1/monitors", {"Origin": "http://evil", "Content-Type": "application/json"}, b"{}"
    )
    assert (status, json.loads(body)["error"]["code"]) == (403, errors.CROSS_SITE)
    # a form post (not JSON) is cross-site even with the token
    status, _got, body = _call(
        port,
        "POST",
        "/api/v1/shutdown",
        {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-www-form-urlencoded"},
        b"a=1",
    )
    assert (status, json.loads(body)["error"]["code"]) == (403, errors.CROSS_SITE)


def test_a_handlers_refusal_is_still_its_json(served):
    port, _reached = served
    status, _got, body = _call(port, "GET", "/api/v1/runs?limit=x", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 400 and json.loads(body)["error"]["message"] == "limit must be a number", body
