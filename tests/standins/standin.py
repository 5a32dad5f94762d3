"""A stand-in for an agent CLI: replays a recorded stream, does some work, then misbehaves.

Configured by environment variables (arguments are the real CLI's and are ignored):
  STANDIN_STREAM   a JSONL stream to replay (a real one from shared/fixtures, or synthetic)
  STANDIN_WRITE    "path=content;path2=content2": files to write before replaying
  STANDIN_SUMMARY  a result summary to file with `proctor job exit <lease> --stdin`
  STANDIN_STATUS   the status filed with it (default done)
  STANDIN_MODE     comma-separated: hang_after (sleep after the stream), silent_after:N (go
                   silent after N lines), stderr_ticks:N (N stderr lines, 0.3 s apart, before
                   the stream), grandchild (leave a child holding stdout open), exit:N,
                   ticks_forever (a line every 0.2 s), slow:S (S seconds between lines),
                   slow_append:S (S seconds after each appended line)
  STANDIN_APPEND   extra raw lines to print after the stream (\n-separated)
  STANDIN_SHELL    a shell command run (sh -c) after the writes, before the result is filed:
                   what a misbehaving worker does with git, per lease ($BAGGAGE) if it likes
  STANDIN_ARGV_LOG a file each run appends its argv to (one JSON line)
"""

import json
import os
import subprocess
import sys
import time


def main() -> int:
    modes = [m for m in os.environ.get("STANDIN_MODE", "").split(",") if m]
    options = dict(m.split(":", 1) if ":" in m else (m, "") for m in modes)
    for spec in filter(None, os.environ.get("STANDIN_WRITE", "").split(";")):
        path, _, content = spec.partition("=")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as handle:
            handle.write(content.replace("\\n", "\n"))
    if os.environ.get("STANDIN_ARGV_LOG"):
        with open(os.environ["STANDIN_ARGV_LOG"], "a") as handle:
            handle.write(json.dumps(sys.argv[1:]) + "\n")
    if os.environ.get("STANDIN_SHELL"):
        subprocess.run(["sh", "-c", os.environ["STANDIN_SHELL"]], stdout=subprocess.DEVNULL)
    if "stderr_ticks" in options:
        for n in range(int(options["stderr_ticks"])):
            sys.stderr.write(f"thinking {n}\n")
            sys.stderr.flush()
            time.sleep(0.3)
    if os.environ.get("STANDIN_SUMMARY") is not None:
        lease = next(
            (
                p.split("=", 1)[1]
                for p in os.environ.get("BAGGAGE", "").split(",")
                if p.strip().startswith("proctor.lease=")
            ),
            None,
        )
        record = {
            "schema_version": 1,
            "status": os.environ.get("STANDIN_STATUS", "done"),
            "summary": os.environ["STANDIN_SUMMARY"].replace("\\n", "\n"),
        }
        subprocess.run(
            [sys.executable, "-m", "proctor", "job", "exit", lease, "--stdin"],
            input=json.dumps(record),
            text=True,
            capture_output=True,
        )
    if "grandchild" in options:
        subprocess.Popen(["sleep", "120"], stdout=sys.stdout, stderr=sys.stderr)
    lines = []
    if os.environ.get("STANDIN_STREAM"):
        with open(os.environ["STANDIN_STREAM"]) as handle:
            lines = [line.rstrip("\n") for line in handle if line.strip()]
    appended = [line for line in os.environ.get("STANDIN_APPEND", "").split("\n") if line]
    first_appended = len(lines)
    lines += appended
    silent_after = int(options["silent_after"]) if "silent_after" in options else None
    for index, line in enumerate(lines):
        if silent_after is not None and index >= silent_after:
            time.sleep(3600)
        print(line, flush=True)
        if "slow" in options:
            time.sleep(float(options["slow"]))
        if "slow_append" in options and index >= first_appended:
            time.sleep(float(options["slow_append"]))
    if "ticks_forever" in options:
        while True:
            print(json.dumps({"type": "tick"}), flush=True)
            time.sleep(0.2)
    if "hang_after" in options:
        time.sleep(3600)
    return int(options.get("exit", "0") or 0)


if __name__ == "__main__":
    sys.exit(main())
