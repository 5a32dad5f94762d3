"""proctor: a supervisor for AI coding agents.

Four capabilities over one store: the guard (a hook on every tool call), jobs and leases
(declared write sets, verified against the real diff), monitors (commands run for a job that
wake its idle agent) and workers (agent CLIs run unattended). DESIGN.md maps the layers.
"""

__version__ = "0.1.0"
