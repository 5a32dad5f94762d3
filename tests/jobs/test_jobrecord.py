"""The core job record (proctor/jobrecord.py), checked against what knows the truth: the
standard library's percent-decoding, the fork schema's own pattern, git's revision syntax as
`proctor vcs checkpoint` prints it, and the interpreter's module table for the hook's cost."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor import errors, jobrecord
from proctor.jobs import model

# --- BAGGAGE: the hook's percent-decoding is urllib's, without urllib's import cost -----------

_PERCENTISH = st.text(alphabet=st.sampled_from(list("%0123456789abcdefABCDEFgz=;, .é\u2603")), max_size=40)


@given(st.one_of(_PERCENTISH, st.text(max_size=40)))
@settings(max_examples=600, deadline=None)
def test_unquote_matches_urllib(text):
    assert jobrecord._unquote(text) == urllib.parse.unquote(text, errors="replace")


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9.]{0,8}", fullmatch=True), st.text(max_size=20), max_size=4))
@settings(max_examples=300, deadline=None)
def test_baggage_round_trips_what_a_w3c_writer_encodes(members):
    header = ",".join(f"{k}={urllib.parse.quote(v, safe='')};prop=1" for k, v in members.items())
    assert jobrecord.parse_baggage(header) == members


def test_baggage_reads_the_lease_member_among_others():
    header = "other=1, proctor.lease=api%2Fmigrate;p=x ,=orphan,novalue"
    assert jobrecord.parse_baggage(header)[jobrecord.BAGGAGE_KEY] == "api/migrate"
    assert jobrecord.parse_baggage(None) == {} and jobrecord.parse_baggage("") == {}


# --- id syntax: the one rule, and the schema's pattern agrees with it ------------------------


@given(st.text(alphabet=st.sampled_from(list("aZ09_.-/ :%é")), max_size=24))
@settings(max_examples=800, deadline=None)
def test_job_id_rule_is_the_schemas_pattern(value):
    schema = model.record_schema()["properties"]["id"]
    by_schema = re.search(schema["pattern"], value) is not None and len(value) <= schema["maxLength"]
    # the schema cannot say "no segment is ..": that one refinement is the rule's own
    assert jobrecord.is_job_id(value) == (by_schema and ".." not in value.split("/"))


@pytest.mark.parametrize("value", ["api", "api/migrate", "a.b-c_d/e", "x" * 200])
def test_good_ids(value):
    assert jobrecord.check_job_id(value) == value


@pytest.mark.parametrize(
    "value", ["", "/a", "a/", "a//b", "a/../b", "..", "-a", ".a", "a b", "a:b", "x" * 201, 7, None]
)
def test_bad_ids_are_refused_with_the_code(value):
    with pytest.raises(errors.ProctorError) as caught:
        jobrecord.check_job_id(value)
    assert caught.value.code == errors.BAD_JOB_ID


def test_the_guard_reads_a_spawns_lease_by_the_same_rule():
    from proctor.guard.engine import spawn_job

    assert spawn_job("lease: api/migrate\nrest") == "api/migrate"
    assert spawn_job("lease: a/../b") is None and spawn_job("lease: -x") is None
    assert spawn_job("\n  lease: ok\n") == "ok" and spawn_job("do it\nlease: ok") is None


# --- states, time and place ------------------------------------------------------------------


def test_states_are_one_tuple_everywhere():
    from proctor import config
    from proctor.store import unheld

    assert model.STATES is jobrecord.STATES and config.STATES is jobrecord.STATES
    assert (unheld.DECLARED, unheld.RUNNING, unheld.NO_RETURN) == ("declared", "running", "no_return")
    assert [s for s in jobrecord.STATES if jobrecord.is_live(s)] == ["declared", "running", "exited"]
    assert [s for s in jobrecord.STATES if jobrecord.in_flight(s)] == ["declared", "running"]
    assert config.DEFAULT_BOARD and {s for _, states, _ in config.DEFAULT_BOARD for s in states} == set(
        jobrecord.STATES
    )


def test_overdue_reads_the_deadline():
    from proctor.timeutil import iso

    assert not jobrecord.overdue({}, 1e9)
    assert jobrecord.overdue({"deadline": iso(1000.0)}, 1000.5)
    assert not jobrecord.overdue({"deadline": iso(1000.0)}, 999.5)


def test_taken_here_is_this_machines_real_path(tmp_path, monkeypatch):
    real = tmp_path / "repo"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv("PROCTOR_MACHINE", "alpha")
    job = {"checkout_root": str(link), "machine": "alpha"}
    assert jobrecord.taken_here(job, str(real)) and jobrecord.bound_here(job, str(real))
    assert not jobrecord.taken_here({**job, "machine": "beta"}, str(real))
    assert jobrecord.where_taken({**job, "machine": "beta"}) == f"{link} on machine beta"
    declared = {"declared_in": str(real), "declared_on": "alpha"}
    assert jobrecord.bound_here(declared, str(real)) and not jobrecord.bound_here(
        {**declared, "declared_on": "b"}, str(real)
    )


# --- what others may see ---------------------------------------------------------------------


def test_public_view_hides_the_secrets_digest_and_the_stores_keys():
    row = {"id": "a", "nonce_sha256": "0" * 64, "_root": "a", "_depth": 0, "state": "running"}
    assert jobrecord.public(row) == {"id": "a", "state": "running"}
    assert set(jobrecord.PRIVATE_FIELDS) <= set(model.OUTPUT_FIELDS), "a record carrying one has it ignored"


def test_ls_jobs_shows_no_digest_of_a_secret(tmp_path, new_repo):
    """`ls jobs -o json` and `job exec -o json` printed `nonce_sha256` while the server and MCP
    stripped it: one view now."""
    from tests.support import DEFAULT_CONFIG

    root = new_repo("repo", DEFAULT_CONFIG)

    def run(*argv):
        return subprocess.run(
            [sys.executable, "-m", "proctor", *argv], cwd=root, capture_output=True, text=True, timeout=120
        )

    assert run("job", "fork", "a", "--write-paths", "src/a.py", "--check", "test").returncode == 0
    taken = run("job", "exec", "a", "-o", "json")
    assert taken.returncode == 0, taken.stderr
    assert "nonce_sha256" not in json.loads(taken.stdout), "exec -o json shows the secret, not its digest"
    listing = run("ls", "jobs", "-o", "json")
    rows = json.loads(listing.stdout)["jobs"]
    assert [r["id"] for r in rows] == ["a"] and rows[0]["state"] == "running"
    assert "nonce_sha256" not in listing.stdout and json.loads(taken.stdout)["nonce"] not in listing.stdout


# --- checkpoints -----------------------------------------------------------------------------


@given(
    st.from_regex(r"[0-9a-f]{4,40}", fullmatch=True),
    st.one_of(st.none(), st.from_regex(r"[0-9a-f]{1,16}", fullmatch=True)),
)
@settings(max_examples=200, deadline=None)
def test_checkpoint_split_agrees_with_the_checkpoint_parser(revision, digest):
    from proctor.vcs.checkpoint import parse_name

    token = revision + (f"+{digest}" if digest else "")
    parsed = parse_name(token)
    assert jobrecord.split_checkpoint(token) == (parsed[0], parsed[1] or "")
    assert jobrecord.checkpoint_revision(token) == revision
    assert jobrecord.checkpoint_revision(None) is None and jobrecord.checkpoint_revision("") is None


# --- "that job, or the refusal" --------------------------------------------------------------


def test_require_names_the_remedy():
    assert jobrecord.require({"id": "a"}, "a") == {"id": "a"}
    with pytest.raises(errors.ProctorError) as caught:
        jobrecord.require(None, "gone/away")
    assert caught.value.code == errors.UNKNOWN_JOB and "proctor ls jobs" in str(caught.value)


# --- the hook's cost -------------------------------------------------------------------------


def test_the_core_record_costs_the_hook_no_heavy_module():
    """What the hook may load is the standard library's cheapest and proctor's core: importing
    the core record must add no typing, dataclasses, urllib, jobs package or database driver to
    what the interpreter had already loaded (site may load some of them itself)."""
    heavy = "('typing', 'dataclasses', 'urllib', 'psycopg', 'sqlite3', '_sqlite3')"
    code = (
        "import sys; before = set(sys.modules); import proctor.jobrecord; "
        f"print(' '.join(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {heavy} "
        "or m.startswith('proctor.jobs'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"importing proctor.jobrecord loaded: {done.stdout.strip()}"
    # and the check can fail: the jobs package does load them
    probe = code.replace("import proctor.jobrecord", "import proctor.jobs.lease")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "dataclasses" in loaded.stdout.split(), loaded.stdout + loaded.stderr


# --- the lease order the guard and the CLI share ---------------------------------------------


@pytest.mark.parametrize(
    "record, claim, tier, expected",
    [
        ("a", None, "marker", ("a", "marker")),
        ("a", "a", "agent", ("a", "agent")),
        ("a", "b", "agent", ("a", "contested")),  # a record wins over a claim
        (None, "b", "marker", ("b", "env")),
        (None, None, "agent", (None, None)),
    ],
)
def test_a_record_wins_over_a_claim(record, claim, tier, expected):
    assert jobrecord.settle_lease(record, claim, tier) == expected
