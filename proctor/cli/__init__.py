"""The person's door: `proctor <group> <command>`. One module per command group (main.py
builds the tree, options.py holds shared options); every command calls proctor.api or the
capability that owns its verb (jobs/, workers/, monitors/, server/, store/, symbols/,
guard.harness) and none states a rule of its own.

click runs with standalone_mode=False and one error handler, so exit codes are stable:
0 success, 1 a status (refused, rejected), 2 could not answer (usage, input, store).
"""

from __future__ import annotations

import json
import sys

import click

from proctor.errors import EXIT_CANNOT_ANSWER, ProctorError

# -o json on a command that fails prints the error object on stdout too.
_state = {"output": "text"}


def set_output(mode: str) -> None:
    _state["output"] = mode


def emit_json(payload: object) -> None:
    """Indented for a person at a terminal; one compact line (C encoder, fast) for a pipe."""
    if sys.stdout.isatty():
        text = json.dumps(payload, indent=2, default=str)
    else:
        text = json.dumps(payload, separators=(",", ":"), default=str)
    sys.stdout.write(text + "\n")


def run(argv: list[str]) -> int:
    from proctor.cli.main import cli

    try:
        _refuse_brokered(argv)
        result = cli.main(args=argv, prog_name="proctor", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except ProctorError as exc:
        for line in exc.lines():
            sys.stderr.write(line + "\n")
        if _state["output"] == "json":
            emit_json(exc.to_json())
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        sys.stderr.write("proctor: aborted\n")
        return EXIT_CANNOT_ANSWER
    except click.ClickException as exc:
        exc.show()
        return EXIT_CANNOT_ANSWER
    except BrokenPipeError:
        return 0


def _refuse_brokered(argv: list[str]) -> None:
    """A sandboxed worker's command, run by its broker (proctor/broker.py) with proctor's state
    writable, never starts what would write it with the worker's hand: agent CLIs, the
    server's monitors, a store move."""
    import os

    from proctor import broker
    from proctor.errors import BROKER_REFUSED

    job = os.environ.get(broker.BROKERED)
    word = broker.command_word(argv)
    if job and word in broker.REFUSED:
        raise ProctorError(
            f"`proctor {word}` is not run for a sandboxed worker ({job}): it would start what "
            f"writes proctor's store outside the worker's sandbox. The person runs it, outside "
            f"the job",
            BROKER_REFUSED,
        )
