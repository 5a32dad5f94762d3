"""Sixteen processes forking and shrinking at once lose nothing."""

from __future__ import annotations

import os
import subprocess
import sys

WORKER = r"""
import sys
from proctor import api, errors
i = int(sys.argv[1])
quiet = lambda line: None
for k in range(5):
    api.fork({"id": f"p{i}/j{k}", "check": "test",
              "write_paths": [f"w{i}/{k}/a.py", f"w{i}/{k}/b.py", f"w{i}/{k}/c.py"]}, warn=quiet)
for k in range(5):
    api.fork({"id": f"p{i}/j{k}", "write_paths": [f"w{i}/{k}/a.py"]}, lease=f"p{i}/j{k}", warn=quiet)
won = 0
for k in range(3):
    try:
        api.fork({"id": f"root/c{i}-{k}", "parent": "root", "check": "test",
                  "write_paths": [f"shared/{i}-{k}.py"]}, warn=quiet)
        won += 1
    except errors.Refused as exc:
        assert exc.code == "PRC3035", exc.lines()
print(won)
"""


def test_sixteen_processes_lose_nothing(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[jobs]\nmax_live = 20\n[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    assert proctor("job", "fork", "root", "--check", "test").code == 0
    env = dict(os.environ)
    env["PROCTOR_BUSY_TIMEOUT"] = "60"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(i)],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(16)
    ]
    won = 0
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        won += int(out.strip())
    assert won == 20, "max_live admits exactly 20 children, however the forks interleave"
    listing = proctor("ls", "jobs", "-o", "json").json()
    rows = {r["id"]: r for r in listing["jobs"]}
    assert len(rows) == 1 + 16 * 5 + 20
    for i in range(16):
        for k in range(5):
            row = rows[f"p{i}/j{k}"]
            assert row["write_paths"] == [f"w{i}/{k}/a.py"]
            assert [(r["path"], r["digest"]) for r in row["releases"]] == [
                (f"w{i}/{k}/b.py", "absent"),
                (f"w{i}/{k}/c.py", "absent"),
            ]
    from proctor import trail
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(root)))
    with store.read() as conn:
        forks = trail.events(conn, kind="job_fork")
    store.close()
    assert len(forks) == 1 + 16 * 5 * 2 + 20
