"""proctor.toml: every value with its source; bad values reported by name, defaults kept."""

from __future__ import annotations

import os

import pytest


def _settings(result) -> dict:
    return {s["key"]: s for s in result.json()["settings"]}


def test_defaults_without_a_file(tmp_path, proctor, new_repo):
    root = new_repo("r")
    shown = proctor("config", "show", "-o", "json", cwd=root)
    assert shown.code == 0
    data = shown.json()
    assert data["exists"] is False and data["problems"] == []
    settings = _settings(shown)
    assert settings["jobs.max_depth"]["value"] is None
    assert settings["jobs.max_live"]["value"] is None
    assert settings["jobs.default_timeout"]["value"] is None
    assert settings["jobs.stale_after"]["value"] == 7200
    assert settings["jobs.gate"]["value"] == "ci"
    assert all(s["source"] == "default" for s in settings.values())


def test_values_and_sources(tmp_path, proctor, new_repo):
    root = new_repo(
        "r",
        """
[jobs]
max_depth = 3
max_live = 12
default_timeout = "2h"
stale_after = "30m"
gate = "release"

[targets.test]
command = "pytest -q"
timeout = "10m"
cwd = "sub"
""",
    )
    settings = _settings(proctor("config", "show", "-o", "json", cwd=root))
    assert settings["jobs.max_depth"] == {**settings["jobs.max_depth"], "value": 3, "source": "proctor.toml"}
    assert settings["jobs.max_live"]["value"] == 12
    assert settings["jobs.default_timeout"]["value"] == 7200
    assert settings["jobs.stale_after"]["value"] == 1800
    assert settings["jobs.gate"]["value"] == "release"
    assert settings["targets.test.command"]["value"] == "pytest -q"
    assert settings["targets.test.timeout"]["value"] == 600
    assert settings["targets.test.cwd"]["value"] == "sub"
    text = proctor("config", "show", cwd=root).out
    assert "jobs.stale_after" in text and "30m" in text and "proctor.toml" in text


def test_zero_means_unlimited_and_never(tmp_path, proctor, new_repo):
    root = new_repo("r", "[jobs]\nmax_depth = 0\nstale_after = 0\n")
    settings = _settings(proctor("config", "show", "-o", "json", cwd=root))
    assert settings["jobs.max_depth"]["value"] is None
    assert settings["jobs.stale_after"]["value"] == 0


@pytest.mark.parametrize(
    "line, key, default",
    [
        ("max_depth = -1", "jobs.max_depth", None),
        ("max_depth = 2.5", "jobs.max_depth", None),
        ('max_depth = "three"', "jobs.max_depth", None),
        ("max_depth = true", "jobs.max_depth", None),
        ("max_live = inf", "jobs.max_live", None),
        ("max_live = nan", "jobs.max_live", None),
        ("stale_after = inf", "jobs.stale_after", 7200),
        ("stale_after = nan", "jobs.stale_after", 7200),
        ("stale_after = -5", "jobs.stale_after", 7200),
        ('stale_after = "soon"', "jobs.stale_after", 7200),
        ('default_timeout = "2 fortnights"', "jobs.default_timeout", None),
        ("gate = 5", "jobs.gate", "ci"),
    ],
)
def test_bad_value_reported_with_default(tmp_path, proctor, line, key, default, new_repo):
    root = new_repo("r", f"[jobs]\n{line}\n")
    shown = proctor("config", "show", "-o", "json", cwd=root)
    assert shown.code == 0
    setting = _settings(shown)[key]
    assert setting["value"] == default and setting["source"] == "default"
    name = key.split(".")[1]
    assert setting["problem"] and name in setting["problem"] and "using the default" in setting["problem"]
    assert any(name in p for p in shown.json()["problems"])
    # Any command that reads the config says so on stderr, and still works.
    listed = proctor("ls", "jobs", cwd=root)
    assert listed.code == 0
    assert name in listed.err and "using the default" in listed.err


def test_unknown_key_and_section(tmp_path, proctor, new_repo):
    root = new_repo(
        "r",
        '[jobs]\nmax_dpeth = 3\n[jbos]\nx = 1\n[guard.rules]\nlease-gate = "advise"\n'
        '[workers.cheap]\nexecutor = "claude"\n',
    )
    problems = proctor("config", "show", "-o", "json", cwd=root).json()["problems"]
    assert any("unknown key max_dpeth in [jobs]" in p for p in problems)
    assert any("unknown section [jbos]" in p for p in problems)
    assert not any("guard" in p or "workers" in p for p in problems), (
        "a known rule, and sections later capabilities read, are not unknown"
    )


def test_unparseable_file_keeps_every_default(tmp_path, proctor, new_repo):
    root = new_repo("r", "[jobs\nmax_depth = 3\n")
    shown = proctor("config", "show", "-o", "json", cwd=root)
    assert shown.code == 0
    assert any("cannot be parsed" in p for p in shown.json()["problems"])
    assert _settings(shown)["jobs.max_depth"]["value"] is None
    assert proctor("ls", "jobs", cwd=root).code == 0


def test_bad_targets(tmp_path, proctor, new_repo):
    root = new_repo(
        "r",
        """
[targets.nocommand]
timeout = "5m"
[targets.badtimeout]
command = "true"
timeout = "forever"
[targets.escape]
command = "true"
cwd = "../elsewhere"
[targets.extra]
command = "true"
retries = 3
""",
    )
    shown = proctor("config", "show", "-o", "json", cwd=root)
    problems = "\n".join(shown.json()["problems"])
    settings = _settings(shown)
    assert "[targets.nocommand] command must be a non-empty string" in problems
    assert "targets.nocommand.command" not in settings
    assert "[targets.badtimeout] timeout" in problems and settings["targets.badtimeout.timeout"]["value"] == 3600
    assert "[targets.escape] cwd" in problems and "targets.escape.cwd" not in settings
    assert "unknown key retries in [targets.extra]" in problems


def test_unreadable_config(tmp_path, proctor, new_repo):
    root = new_repo("r")
    os.mkdir(os.path.join(root, "proctor.toml"))  # a directory where the file should be
    shown = proctor("config", "show", "-o", "json", cwd=root)
    assert shown.code == 0
    assert any("cannot be read" in p for p in shown.json()["problems"])


def test_init_writes_a_commented_config_that_parses_clean(tmp_path, proctor, new_repo):
    root = new_repo("r")
    made = proctor("init", cwd=root)
    assert made.code == 0 and "proctor.toml" in made.out
    text = open(os.path.join(root, "proctor.toml")).read()
    assert text.count("#") > 10
    shown = proctor("config", "show", "-o", "json", cwd=root)
    assert shown.json()["problems"] == []
    again = proctor("init", cwd=root)
    assert again.code == 2 and "--force" in again.err
    assert proctor("init", "--force", cwd=root).code == 0


def test_the_template_holds_every_key_and_each_example_reads_back(tmp_path):
    """`proctor init`'s template is generated from the key table: uncomment every key and table
    it shows (targets and workers included) and the file parses with no problem, every setting
    read from it, none defaulted; TOML's own parser reads it too."""
    import re
    import tomllib

    from proctor import config as config_mod

    text = config_mod.template()
    assert tomllib.loads(text) == {"jobs": {"stale_after": "2h", "gate": "ci"}}, "only the written keys are live"
    lines = []
    for line in text.splitlines():  # every table header and key the template shows, uncommented
        if re.fullmatch(r"# \[[\w.]+\]", line) or re.fullmatch(r"# [\w-]+ = .+", line):
            line = line[2:]
        lines.append(line)
    uncommented = "\n".join(lines) + "\n"
    parsed = tomllib.loads(uncommented)
    assert {
        f"{s}.{k}" for s, table in parsed.items() for k in table if s in ("jobs", "monitors", "store", "sandbox")
    } == set(config_mod.KEYS)
    loaded = config_mod.parse(uncommented.encode(), str(tmp_path / "proctor.toml"))
    assert loaded.problems == [], loaded.problems
    defaulted = [name for name, setting in loaded.settings.items() if setting.source == "default"]
    assert defaulted == [], f"keys the template does not set: {defaulted}"
    assert loaded.guard_rules == {"lease-write-scope": "deny"}
    from proctor.guard.rules import ALL

    assert "lease-write-scope" in {rule.NAME for rule in ALL}, "the template's example names a real rule"
