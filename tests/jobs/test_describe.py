"""proctor describe job: the holder's terms, from the row, byte-identical, no empty sections."""

from __future__ import annotations

import json
import os


def fork(proctor, *args, **kw):
    result = proctor("job", "fork", *args, **kw)
    assert result.code == 0, result.err
    return result


def test_terms_are_rendered_from_the_row(repo, proctor):
    fork(
        proctor,
        "--stdin",
        stdin=json.dumps(
            {
                "id": "api/migrate",
                "criteria": "move the accounts table\n\nkeep the old reader working",
                "write_paths": ["db/m.go", "api/x.go"],
                "deny_paths": ["db/secret"],
                "check": "test",
                "goals": [{"id": "migration", "kind": "paths", "paths": ["db/migrations/**"]}],
                "model": "opus",
            }
        ),
    )
    fork(proctor, "other", "--write-paths", "db/m.go", "--check", "lint")
    fork(proctor, "dep", "--write-paths", "z.py", "--check", "test")
    fork(
        proctor,
        "api/migrate",
        "--write-paths",
        "db/m.go,api/x.go",
        "--deny-paths",
        "db/secret",
        "--check",
        "test",
        "--depends-on",
        "dep",
        "--criteria",
        "move the accounts table\n\nkeep it",
    )
    first = proctor("describe", "job", "api/migrate")
    second = proctor("describe", "job", "api/migrate")
    assert first.code == 0 and first.out == second.out
    text = first.out
    assert "Criteria:\n  move the accounts table\n\n  keep it\n" in text
    assert "Write paths:\n  db/m.go\n  api/x.go\n" in text
    assert "Deny paths:\n  db/secret\n" in text
    assert "Held by other jobs:\n  db/m.go  (held by other)\n" in text
    assert "Check:\n  proctor run test    # true\n" in text
    assert "Depends on:\n  dep\n" in text
    assert "Read paths" not in text and "Goals" not in text, "empty sections are dropped"
    assert "ci" not in text.split()


def test_goals_and_releases_render(repo, proctor):
    fork(
        proctor,
        "--stdin",
        stdin=json.dumps(
            {
                "id": "g",
                "write_paths": ["a.py", "b.py"],
                "goals": [
                    {"id": "p", "paths": ["a.py"]},
                    {"id": "s", "kind": "symbol", "expect": "absent", "symbols": ["Old"], "depends_on": ["p"]},
                ],
            }
        ),
    )
    fork(
        proctor,
        "--stdin",
        stdin=json.dumps({"id": "g", "write_paths": ["a.py"], "goals": [{"id": "p", "paths": ["a.py"]}]}),
    )
    text = proctor("describe", "job", "g").out
    assert "Goals:\n  p: paths changed: paths a.py\n" in text
    assert "Released paths:\n  b.py  absent\n" in text


def test_refuses_a_job_whose_check_became_the_gate(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[targets.release]\ncommand = 'make release'\n")
    monkeypatch.chdir(root)
    fork(proctor, "j", "--write-paths", "a.py", "--check", "release")
    assert proctor("describe", "job", "j").code == 0
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write("[jobs]\ngate = 'release'\n")
    refused = proctor("describe", "job", "j")
    assert refused.code == 1 and refused.err.startswith("PRC3038") and refused.out == ""


def test_refuses_a_target_that_chains_to_the_gate(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[targets.full]\ncommand = 'true'\n[targets.ci]\ncommand = 'make'\n")
    monkeypatch.chdir(root)
    fork(proctor, "j", "--write-paths", "a.py", "--check", "full")
    with open(os.path.join(root, "proctor.toml"), "w") as handle:
        handle.write("[targets.full]\ncommand = 'proctor run ci'\n[targets.ci]\ncommand = 'make'\n")
    refused = proctor("describe", "job", "j")
    assert refused.code == 1 and "full -> ci" in refused.err


def test_unknown_and_bad_ids(repo, proctor):
    missing = proctor("describe", "job", "nope")
    assert missing.code == 2 and "no job nope" in missing.err
    bad = proctor("describe", "job", "a b")
    assert bad.code == 2 and "PRC3050" in bad.err


def test_held_by_others_leaves_out_its_own_family(repo, proctor):
    fork(proctor, "p", "--write-paths", "lib/x.py,lib/y.py", "--check", "test")
    fork(proctor, "p/c", "--parent", "p", "--write-paths", "lib/x.py", "--check", "test")
    fork(proctor, "stranger", "--write-paths", "lib/x.py", "--check", "test")
    text = proctor("describe", "job", "p/c").out
    assert "lib/x.py  (held by stranger)" in text
    assert "(held by p)" not in text
    assert "(held by p/c)" not in proctor("describe", "job", "p").out
