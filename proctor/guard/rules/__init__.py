"""The guard's rules, one module each, listed here in the order they are evaluated.

Each module is a `Rule`: NAME, DEFAULT ("deny" or "advise"), EVENTS (the call events it
reads), SUMMARY, CATCHES, WHY and `check(ctx: Context) -> [(strength, message)]`, where
strength "rule" takes the rule's effective decision (its default, or what [guard.rules] in
proctor.toml sets: deny, advise or off) and "advise" is a finding the rule only ever advises.
A rule with options adds OPTIONS and `check_options(values)` (background_silent.py). Adding a
rule is adding its module and its line in ALL below.
"""

from __future__ import annotations

from proctor.guard.rules import (
    background_left,
    background_silent,
    background_unbounded,
    lease_base_diverged,
    lease_deadline,
    lease_declaration,
    lease_entry,
    lease_foreign_path,
    lease_gate,
    lease_harness,
    lease_read_boundary,
    lease_read_only,
    lease_store,
    lease_tamper,
    lease_unattributed,
    lease_write_scope,
    monitor_followup,
)

# The interface, for the type checker only: the hook never loads `typing` (mypy reads any
# `if TYPE_CHECKING:` as true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from proctor.guard.context import Context

    class Rule(Protocol):  # read-only members: a module's constants satisfy them
        @property
        def NAME(self) -> str: ...
        @property
        def DEFAULT(self) -> str: ...
        @property
        def EVENTS(self) -> tuple[str, ...]: ...
        @property
        def SUMMARY(self) -> str: ...
        @property
        def CATCHES(self) -> str: ...
        @property
        def WHY(self) -> str: ...

        def check(self, ctx: Context) -> list[tuple[str, str]]: ...


ALL: tuple[Rule, ...] = (
    lease_entry,  # first: it marks the paths an entry lets through, which later rules skip
    lease_write_scope,
    lease_read_only,
    lease_deadline,
    lease_foreign_path,
    lease_declaration,
    lease_gate,
    lease_store,
    lease_tamper,
    lease_harness,
    lease_read_boundary,
    lease_base_diverged,
    lease_unattributed,
    background_silent,
    background_left,
    background_unbounded,
    monitor_followup,
)

BY_NAME = {rule.NAME: rule for rule in ALL}
