"""The agent hosts proctor guards (Claude Code, Codex, Gemini CLI, opencode): one module each,
and this registry, which the hook, the harness, doctor, the CLI's choices, lease-tamper and the
workers' executors read. Adding a host is adding its module here.

A host's module carries everything proctor knows of it: how its hook event reads (parse) and
what answer it honours (render), on the hook's path; its configuration directory (MARKER),
where it reads MCP servers, what of it a leased session must not write (protected), and the
wiring `proctor describe harness` prints and doctor checks. Imports: the standard library's
cheapest modules and the guard's call record; the hook loads this package on every call.
"""

from __future__ import annotations

import os


def _hosts() -> tuple[str, ...]:
    """The hosts: one module each in this package (adding a host is adding its module)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return tuple(sorted(name[:-3] for name in os.listdir(here) if name.endswith(".py") and name[:1] != "_"))


HOSTS = _hosts()


def adapter(host: str):
    """The host's module, proctor/hosts/<host>.py. Each has: parse(event) -> Call and
    render(call, verdict) -> the answer the host honours (the hook's path); MARKER (its
    configuration directory), LABEL, SKILLS (whether it reads <MARKER>/skills), mcp_files(root,
    home, environ), protected(root, home, xdg_config, environ) (what lease-tamper keeps a holder
    out of), wiring(), mcp_wiring(), wired(root, home), and optionally install(root) (files
    `proctor agent harness install` writes for it)."""
    if host not in HOSTS:
        raise KeyError(host)
    return __import__(f"proctor.hosts.{host}", fromlist=["parse"])


def modules() -> list:
    """Every host's module, in HOSTS' order."""
    return [adapter(host) for host in HOSTS]
