"""The guard's rules: one module each in this package, evaluated in the order of their ORDER.

Each module is a `Rule`: NAME, DEFAULT ("deny" or "advise"), EVENTS (the call events it
reads), SUMMARY, CATCHES, WHY and `check(ctx: Context) -> [(strength, message)]`, where
strength "rule" takes the rule's effective decision (its default, or what [guard.rules] in
proctor.toml sets: deny, advise or off) and "advise" is a finding the rule only ever advises.
A rule with options adds OPTIONS and `check_options(values)` (background_silent.py). Adding a
rule is adding its module: ALL is read from the package (a module whose name starts with `_`
is a helper, not a rule).
"""

from __future__ import annotations

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
        @property
        def ORDER(self) -> int: ...

        def check(self, ctx: Context) -> list[tuple[str, str]]: ...


def _rules() -> tuple[Rule, ...]:
    """Every rule module of this package, in ORDER (ties by name, so the order is fixed)."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    names = sorted(name[:-3] for name in os.listdir(here) if name.endswith(".py") and name[:1] != "_")
    found = [__import__(f"proctor.guard.rules.{name}", fromlist=["check"]) for name in names]
    return tuple(sorted(found, key=lambda rule: (rule.ORDER, rule.NAME)))


ALL = _rules()

BY_NAME = {rule.NAME: rule for rule in ALL}
