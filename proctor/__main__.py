"""Entry point for `proctor` and `python -m proctor`.

Kept free of imports so that a fast path (the guard's hook, which runs on every tool call)
can branch here before the CLI framework is loaded.
"""

import sys


def main() -> None:
    from proctor.cli import run

    raise SystemExit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
