"""The guard: a verdict (deny, advise, pass) on every tool call of an agent session.

`proctor hook <host>` turns the host's JSON into one Call (call.py), builds the Context the
rules read (context.py: the checkout, the cached config, the store, the acting lease), runs
every rule of rules/ that the workspace has not turned off (engine.py), and answers in the
form that host honours (hook/). Everything here is on the hook's hot path: standard library
and proctor's core only, and no work proportional to the size of the store.

Every uncertainty fails open with at most an advisory: a missing or unreadable store, a
lease naming no live job, a command whose writes cannot be named.
"""
