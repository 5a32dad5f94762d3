"""proctor.toml's worker stops: idle and grace durations, each worker's wall clock and slots, and
how `proctor config show` reports them, the derived idle limit and every bad value."""

from __future__ import annotations

import pytest

from proctor.config import Worker, load


def _load(tmp_path, text: str):
    (tmp_path / "proctor.toml").write_text(text)
    return load(str(tmp_path))


def _settings(result) -> dict:
    return {s["key"]: s for s in result.json()["settings"]}


# --- durations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, minutes",
    [
        ("20", 20.0),
        ("2.5", 2.5),
        ('"20m"', 20.0),
        ('"90s"', 1.5),
        ('"1h30m"', 90.0),
        ('"2h"', 120.0),
        ('"45"', 45.0),  # a bare number written as text keeps the key's unit too
    ],
)
def test_idle_minutes_takes_a_duration_or_minutes(tmp_path, raw, minutes):
    config = _load(tmp_path, f"[jobs]\nidle_minutes = {raw}\n")
    assert config.problems == []
    assert config["jobs.idle_minutes"] == minutes and config.idle_limit_seconds == minutes * 60
    assert config.settings["jobs.idle_minutes"].source == "proctor.toml"


@pytest.mark.parametrize(
    "raw, seconds",
    [
        ("30", 30.0),
        ("12.5", 12.5),
        ('"90s"', 90.0),
        ('"2m"', 120.0),
        ('"1h"', 3600.0),
        ('"1m30s"', 90.0),
    ],
)
def test_grace_seconds_takes_a_duration_or_seconds(tmp_path, raw, seconds):
    config = _load(tmp_path, f"[jobs]\ngrace_seconds = {raw}\n")
    assert config.problems == []
    assert config["jobs.grace_seconds"] == seconds


@pytest.mark.parametrize(
    "raw, minutes",
    [
        ("45", 45.0),
        ("0.5", 0.5),
        ('"20m"', 20.0),
        ('"90s"', 1.5),
        ('"1h30m"', 90.0),
        ('"3h"', 180.0),
    ],
)
def test_wall_minutes_takes_a_duration_or_minutes(tmp_path, raw, minutes):
    config = _load(tmp_path, f'[workers.w]\nexecutor = "claude"\nwall_minutes = {raw}\n')
    assert config.problems == []
    assert config.workers["w"].wall_minutes == minutes
    assert config.settings["workers.w.wall_minutes"].source == "proctor.toml"


BAD = ["inf", "-inf", "nan", "-1", "0", '"0s"', "true", '"soon"', '"1h30"', '"20 minutes"', '""', '"99999d"', "[1]"]


@pytest.mark.parametrize("raw", BAD)
@pytest.mark.parametrize("key, default", [("idle_minutes", None), ("grace_seconds", 60.0)])
def test_bad_jobs_duration_reported_with_the_default_kept(tmp_path, key, default, raw):
    config = _load(tmp_path, f'[jobs]\n{key} = {raw}\n[targets.test]\ncommand = "true"\ntimeout = "5m"\n')
    setting = config.settings[f"jobs.{key}"]
    assert setting.value == default and setting.source == "default"
    assert config.problems == [setting.problem]
    assert f"[jobs] {key} = " in setting.problem and "is invalid" in setting.problem
    assert "using the default" in setting.problem
    assert config.idle_limit_seconds == 15 * 60, "a rejected idle_minutes leaves the derived limit"


@pytest.mark.parametrize("raw", BAD)
def test_bad_wall_minutes_reported_with_60_kept(tmp_path, raw):
    config = _load(tmp_path, f'[workers.w]\nexecutor = "claude"\nwall_minutes = {raw}\n')
    assert config.workers["w"].wall_minutes == 60.0
    assert len(config.problems) == 1
    assert "[workers.w] wall_minutes = " in config.problems[0]
    assert "is invalid" in config.problems[0] and config.problems[0].endswith("using the default (60)")
    setting = config.settings["workers.w.wall_minutes"]
    assert setting.source == "default" and setting.problem == config.problems[0]


@pytest.mark.parametrize(
    "raw, clamped",
    [
        ("99999", 3600.0),
        ('"2h"', 3600.0),
        ("1", 5.0),
        ('"1s"', 5.0),
        ('"500ms"', 5.0),
    ],
)
def test_grace_out_of_range_is_clamped_and_says_so(tmp_path, raw, clamped):
    config = _load(tmp_path, f"[jobs]\ngrace_seconds = {raw}\n")
    assert config["jobs.grace_seconds"] == clamped
    assert config.problems == [
        f"proctor.toml: [jobs] grace_seconds = {raw} is out of range; clamped to 5..3600 seconds ({clamped:g})"
    ]
    setting = config.settings["jobs.grace_seconds"]
    assert setting.source == "proctor.toml" and setting.problem == config.problems[0]


def test_a_clamp_reads_as_a_clamp_in_config_show(tmp_path, proctor, new_repo):
    root = new_repo("r", '[jobs]\ngrace_seconds = "2h"\nidle_minutes = "soon"\n')
    text = proctor("config", "show", cwd=root).out
    grace = next(line for line in text.splitlines() if line.startswith("jobs.grace_seconds"))
    assert grace.split() == ["jobs.grace_seconds", "3600", "proctor.toml", "(clamped)"]
    idle = next(line for line in text.splitlines() if line.startswith("jobs.idle_minutes"))
    assert idle.endswith("default (proctor.toml value rejected)")


# --- workers ------------------------------------------------------------------------------------


def test_wall_clock_defaults_to_an_hour(tmp_path):
    config = _load(tmp_path, '[workers.w]\nexecutor = "claude"\n')
    worker = config.workers["w"]
    assert worker.wall_minutes == 60.0 and isinstance(worker.wall_minutes, float)
    assert worker.slots is None and config.problems == []
    assert config.settings["workers.w.wall_minutes"].source == "default"


@pytest.mark.parametrize("raw, slots", [("1", 1), ("3", 3)])
def test_slots(tmp_path, raw, slots):
    config = _load(tmp_path, f'[workers.w]\nexecutor = "claude"\nslots = {raw}\n')
    assert config.problems == [], "slots is a known key"
    assert config.workers["w"].slots == slots
    assert config.settings["workers.w.slots"].source == "proctor.toml"


@pytest.mark.parametrize("raw", ["0", "-2", "2.5", "2.0", "true", '"2"', "inf", "nan"])
def test_bad_slots_reported_and_unlimited(tmp_path, raw):
    config = _load(tmp_path, f'[workers.w]\nexecutor = "codex"\nslots = {raw}\n')
    assert config.workers["w"].slots is None
    [problem] = config.problems
    assert problem.startswith(f"proctor.toml: [workers.w] slots = {raw} is invalid (expected a whole number, 1 or more")
    assert problem.endswith("; using the default (unlimited)")
    assert config.settings["workers.w.slots"].shown == "unlimited"


def test_worker_built_without_slots_has_none():
    assert Worker("w", "claude", None, None, None, 60.0).slots is None


# --- the derived idle limit -----------------------------------------------------------------------


def test_idle_derived_from_the_longest_target(tmp_path):
    config = _load(
        tmp_path,
        '[targets.test]\ncommand = "pytest"\ntimeout = "15m"\n[targets.lint]\ncommand = "ruff"\ntimeout = "5m"\n',
    )
    assert config["jobs.idle_minutes"] is None and config.idle_limit_seconds == 22.5 * 60
    assert config.idle_limit_source == "derived: 1.5 x [targets.test] timeout 15m"
    assert config.settings["jobs.idle_minutes"].shown == "22.5 (derived: 1.5 x [targets.test] timeout 15m)"


def test_idle_derived_from_the_floor(tmp_path):
    config = _load(tmp_path, '[targets.test]\ncommand = "pytest"\ntimeout = "5m"\n')
    assert config.idle_limit_seconds == 15 * 60
    assert config.settings["jobs.idle_minutes"].shown == "15 (derived: the 15-minute floor; longest target timeout 5m)"
    empty = load(str(tmp_path / "nowhere"))
    assert empty.idle_limit_seconds == 15 * 60
    assert empty.idle_limit_source == "derived: the 15-minute floor; no target is defined"


def test_idle_derived_from_a_target_default_timeout(tmp_path):
    config = _load(tmp_path, '[targets.ci]\ncommand = "make ci"\n')
    assert config.idle_limit_seconds == 90 * 60
    assert config.idle_limit_source == "derived: 1.5 x [targets.ci] timeout 1h"


def test_idle_set_is_not_derived(tmp_path):
    config = _load(tmp_path, '[jobs]\nidle_minutes = "20m"\n[targets.test]\ncommand = "x"\ntimeout = "2h"\n')
    assert config.idle_limit_seconds == 20 * 60
    assert config.idle_limit_source == "[jobs] idle_minutes in proctor.toml"
    assert config.settings["jobs.idle_minutes"].shown == "20"


# --- config show, as a real process -------------------------------------------------------------

WORKERS = """
[jobs]
grace_seconds = "90s"

[targets.test]
command = "pytest -q"
timeout = "15m"

[workers.cheap]
executor = "claude"
model = "haiku"
max_spend_usd = 1.5
slots = 2

[workers.cx]
executor = "codex"
wall_minutes = "1h30m"
max_spend_usd = 3

[workers.sh]
executor = "command"
command = ["./run.sh", "--fast"]
wall_minutes = "soon"
max_spend_usd = 0.5
"""


def test_config_show_prints_each_workers_limits(tmp_path, proctor_process, new_repo):
    root = new_repo("r", WORKERS)
    text = proctor_process("config", "show", cwd=root)
    assert text.code == 0, text.err
    rows = {line.split()[0]: line for line in text.out.splitlines() if line.startswith(("jobs.", "workers."))}

    def row(key: str, shown: str, source: str) -> None:
        assert rows[key].split(None, 1)[1].startswith(shown), rows[key]
        assert rows[key].rstrip().endswith(source), rows[key]

    row("jobs.idle_minutes", "22.5 (derived: 1.5 x [targets.test] timeout 15m)", "default")
    row("jobs.grace_seconds", "90 ", "proctor.toml")
    row("workers.cheap.executor", "claude ", "proctor.toml")
    row("workers.cheap.command", "claude (the executor's default)", "default")
    row("workers.cheap.model", "haiku ", "proctor.toml")
    row("workers.cheap.wall_minutes", "60 ", "default")
    row("workers.cheap.max_spend_usd", "1.5 ", "proctor.toml")
    row("workers.cheap.slots", "2 ", "proctor.toml")
    row("workers.cx.model", "the CLI's default", "default")
    row("workers.cx.wall_minutes", "90 ", "proctor.toml")
    row("workers.cx.max_spend_usd", "not enforceable: codex reports tokens", "default (proctor.toml value rejected)")
    row("workers.cx.slots", "unlimited", "default")
    row("workers.sh.command", "./run.sh --fast", "proctor.toml")
    row("workers.sh.wall_minutes", "60 ", "default (proctor.toml value rejected)")
    row(
        "workers.sh.max_spend_usd",
        "not enforceable: command reports no spend",
        "default (proctor.toml value rejected)",
    )
    assert "[workers.sh] max_spend_usd cannot be enforced on a command worker (command reports no spend)" in text.out
    assert "[workers.cx] max_spend_usd cannot be enforced on a codex worker" in text.out
    assert '[workers.sh] wall_minutes = "soon" is invalid' in text.out

    shown = proctor_process("config", "show", "-o", "json", cwd=root)
    assert shown.code == 0, shown.err
    data = shown.json()
    assert data["idle_limit"] == {"seconds": 1350.0, "source": "derived: 1.5 x [targets.test] timeout 15m"}
    settings = _settings(shown)
    assert settings["jobs.idle_minutes"]["value"] is None
    assert settings["jobs.grace_seconds"]["value"] == 90
    limits = {key: (s["value"], s["source"]) for key, s in settings.items() if key.startswith("workers.cheap.")}
    assert limits == {
        "workers.cheap.executor": ("claude", "proctor.toml"),
        "workers.cheap.command": (None, "default"),
        "workers.cheap.model": ("haiku", "proctor.toml"),
        "workers.cheap.wall_minutes": (60.0, "default"),
        "workers.cheap.max_spend_usd": (1.5, "proctor.toml"),
        "workers.cheap.slots": (2, "proctor.toml"),
    }
    assert settings["workers.cx.wall_minutes"]["value"] == 90
    assert settings["workers.cx.max_spend_usd"]["shown"] == "not enforceable: codex reports tokens"
    assert settings["workers.cx.slots"]["shown"] == "unlimited"
    assert settings["workers.sh.command"]["value"] == ["./run.sh", "--fast"]
    assert settings["workers.sh.wall_minutes"]["problem"] in data["problems"]


def test_a_bad_duration_is_on_stderr_and_stops_nothing(tmp_path, proctor, new_repo):
    root = new_repo(
        "r", '[jobs]\nidle_minutes = nan\n[workers.w]\nexecutor = "claude"\nwall_minutes = inf\nslots = 0\n'
    )
    listed = proctor("ls", "jobs", cwd=root)
    assert listed.code == 0
    for needle in (
        "[jobs] idle_minutes = nan is invalid",
        "[workers.w] wall_minutes = inf is invalid",
        "[workers.w] slots = 0 is invalid",
    ):
        assert needle in listed.err, needle
