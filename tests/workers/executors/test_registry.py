"""The executors are their package: config, which is core and may not import it, lists the
package's files and reads each module's SPEND line as text. These tests hold that reading to
what Python itself imports, so a new executor module is all it takes to add one, and a module's
spend unit is said once, in the module."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from proctor import config
from proctor.workers import executors

PACKAGE_MODULES = sorted(m.name for m in pkgutil.iter_modules(executors.__path__) if not m.name.startswith("_"))


def test_the_registry_lists_exactly_the_executor_modules_on_disk():
    assert PACKAGE_MODULES, "found no executor module to judge"
    assert list(config.EXECUTORS) == PACKAGE_MODULES
    for name in config.EXECUTORS:
        assert executors.module(name).__name__ == f"proctor.workers.executors.{name}"
    with pytest.raises(KeyError):
        executors.module("no-such-cli")


@pytest.mark.parametrize("name", PACKAGE_MODULES)
def test_every_executor_module_declares_its_spend_unit(name):
    module = importlib.import_module(f"proctor.workers.executors.{name}")
    assert module.SPEND in ("usd", "tokens", "none"), f"{name}.py declares no SPEND"
    # config read the same value from the file's text, without importing it
    assert config.workers.SPENDS[name] == module.SPEND


def test_tokens_only_is_the_modules_that_declare_tokens():
    declared = {
        name for name in PACKAGE_MODULES if importlib.import_module(executors.__name__ + "." + name).SPEND == "tokens"
    }
    assert set(config.TOKENS_ONLY) == declared
    assert declared, "no executor reports tokens: the max_spend_usd refusal would go untested"


def test_a_dollar_limit_is_refused_exactly_where_a_module_reports_no_dollars(tmp_path):
    """A limit that could never fire is refused, not kept: on a module that says tokens and on
    one that says none (a program of one's own reports nothing), each with its reason."""
    body = "".join(f'[workers.{n}]\nexecutor = "{n}"\ncommand = ["x"]\nmax_spend_usd = 2\n' for n in PACKAGE_MODULES)
    cfg = config.parse(body.encode(), str(tmp_path / config.CONFIG_NAME))
    refused = {n for n in PACKAGE_MODULES if cfg.workers[n].max_spend_usd is None}
    spends = {n: importlib.import_module(f"proctor.workers.executors.{n}").SPEND for n in PACKAGE_MODULES}
    assert refused == {n for n, spend in spends.items() if spend != "usd"}
    assert {spends[n] for n in refused} == {"tokens", "none"}, "both reasons are tested"
    problems = "\n".join(cfg.problems)
    for name in refused:
        why = "reports tokens, not dollars" if spends[name] == "tokens" else "reports no spend"
        assert f"max_spend_usd cannot be enforced on a {name} worker ({name} {why})" in problems
    for name in set(PACKAGE_MODULES) - refused:
        assert cfg.workers[name].max_spend_usd == 2 and f"[workers.{name}]" not in problems


def test_a_name_that_is_no_module_is_refused_and_the_message_names_the_modules(tmp_path):
    cfg = config.parse(b'[workers.w]\nexecutor = "nope"\n', str(tmp_path / config.CONFIG_NAME))
    assert not cfg.workers
    assert cfg.problems == [
        f'proctor.toml: [workers.w] executor = "nope" is invalid (expected {", ".join(PACKAGE_MODULES)}); '
        "worker ignored"
    ]


def test_reading_the_registry_imports_no_executor(tmp_path):
    """config learns the names from a listing: the hook, which reaches config when its settings
    are recomputed, never loads an agent CLI's parser."""
    import subprocess
    import sys

    code = "import sys, proctor.config; print(sorted(m for m in sys.modules if m.startswith('proctor.workers')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
