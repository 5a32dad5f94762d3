"""The auth middleware picks a route by the router's own matching (the same Route objects, the
first FULL match); a job's secret must never reach a person-only route (PERSON/PAGE) whatever
the spelling of the path or the method. These held when tried (they pass): each variant is
refused (401), redirected to the login page or a slash redirect (3xx, no handler ran), or not
found / not allowed by the router (404/405)."""

from __future__ import annotations

import pytest

from tests.server.test_server_auth import SECRET, _call, served  # noqa: F401 (fixture)

VARIANTS = [
    ("GET", "/api/v1/jobs/"),
    ("GET", "/api/v1/jobs?job=x"),
    ("GET", "//api/v1/jobs"),
    ("GET", "/api/v1//jobs"),
    ("GET", "/api/v1/./jobs"),
    ("GET", "/api/v1/status/../jobs"),
    ("GET", "/api/v1/status%2F..%2Fjobs"),
    ("GET", "/api/v1/%6Aobs"),
    ("GET", "/api/v1/jobs%2Fthe-job"),
    ("GET", "/api/v1/jobs/the-job/"),
    ("GET", "/api/v1/jobs/%2e%2e"),
    ("HEAD", "/api/v1/jobs"),
    ("HEAD", "/api/v1/stream"),
    ("GET", "/api/v1/stream/"),
    ("GET", "/API/V1/JOBS"),
    ("POST", "/api/v1/shutdown/"),
    ("POST", "/api/v1/shutdown?x=1"),
    ("OPTIONS", "/api/v1/shutdown"),
    ("GET", "/api/v1/attempt/"),
    ("GET", "/jobs/x"),
    ("GET", "/mcp/../api/v1/jobs"),
]


@pytest.mark.parametrize("method, path", VARIANTS, ids=[f"{m} {p}" for m, p in VARIANTS])
def test_a_secret_never_reaches_a_person_route(served, method, path):  # noqa: F811
    port, reached = served
    headers = {"Authorization": f"Nonce {SECRET}", "Content-Type": "application/json"}
    status, got, body = _call(port, method, path, headers, b"{}" if method == "POST" else None)
    assert status in (301, 302, 303, 307, 308, 401, 404, 405), (status, got, body[:300])
