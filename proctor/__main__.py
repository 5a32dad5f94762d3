"""Entry point for `proctor` and `python -m proctor`.

The hook runs on every tool call of an agent session and a hook that times out fails open,
so `hook` is branched on here, before anything else is imported: the CLI framework is
loaded only for the other commands. A sandboxed worker's commands are handed to its broker
before either.
"""

import os
import sys


def main() -> None:
    argv = sys.argv[1:]
    if "PROCTOR_BROKER" in os.environ:
        # a sandboxed worker's process: proctor work's broker runs the command for it, outside
        # the worker's domain, which denies proctor's state (proctor/broker.py)
        from proctor.broker import forward

        raise SystemExit(forward(argv))
    if argv and argv[0] == "hook":
        from proctor.hook import main as hook_main

        raise SystemExit(hook_main(argv[1:]))
    from proctor.cli import run

    raise SystemExit(run(argv))


if __name__ == "__main__":
    main()
