"""A rule's entry, written the way the specification writes one: what it catches, why, its
default and override, and how to see it. `proctor describe rules` lists every rule this
workspace enforces, deny first."""

from __future__ import annotations

from proctor.guard.rules import ALL, BY_NAME


def effective_decisions(root: str) -> dict[str, str]:
    from proctor.guard import settings
    from proctor.paths import find_checkout

    return settings.compute(find_checkout(root), "HEAD")["rules"]


def entry(name: str, decision: str) -> str:
    rule = BY_NAME[name]
    other = "advise" if rule.DEFAULT == "deny" else "deny"
    lines = [
        rule.NAME,
        f"A {rule.DEFAULT} rule by default: it catches {rule.SUMMARY}.",
        "",
        "What it catches",
        rule.CATCHES,
        "",
        "Why",
        rule.WHY,
        "",
        "Default and override",
        f"By default this rule takes the decision {rule.DEFAULT}. A workspace sets it by name, in its",
        "proctor.toml, to deny, advise or off:",
        "",
        "  [guard.rules]",
        f'  {rule.NAME} = "{other}"',
        "",
        "A loosening takes effect once it is committed; a tightening applies at once.",
        f"In this workspace it takes the decision {decision}.",
        "",
        "Seeing it",
        "A verdict names its rule in brackets:",
        f"  {rule.DEFAULT} [{rule.NAME}]: ...",
        f"A workspace that sets this rule to {other} sees {other} [{rule.NAME}]: ... instead.",
        f"proctor describe rule {rule.NAME} prints this entry; proctor describe rules lists every rule",
        "this workspace enforces.",
    ]
    return "\n".join(lines) + "\n"


def listing(decisions: dict[str, str]) -> list[dict]:
    order = {"deny": 0, "advise": 1, "off": 2}
    rows = [
        {"name": r.NAME, "decision": decisions.get(r.NAME, r.DEFAULT), "default": r.DEFAULT, "summary": r.SUMMARY}
        for r in ALL
    ]
    return sorted(rows, key=lambda row: (order[row["decision"]], row["name"]))
