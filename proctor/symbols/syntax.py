"""What a symbol goal may name: an identifier, or one inside its scope (`Store.load`). The job
record's reader (jobs/model.py) refuses a malformed name when the job is forked, and the goals'
grader (symbols/goals.py) when it grades; both read it here, so symbols imports nothing of jobs.
"""

from __future__ import annotations

import re

SYMBOL_NAME = re.compile(r"(?:[^\W\d]|\$)[\w$]*(?:\.(?:[^\W\d]|\$)[\w$]*)*")
