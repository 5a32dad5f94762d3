"""proctor.toml's values: how one raw TOML value is judged, and how an effective one is shown.

Each parser takes what tomllib read and returns the value proctor uses, or raises ValueError
with the reason, which the reader puts after the key's name ("is invalid (...)") before it keeps
the default; `Clamped` is the one exception that carries a value: out of its range, the value is
brought back in and said so, rather than dropped. The ranges live here, beside the parsers that
enforce them. Nothing here knows a section or a key: keys.py pairs them.
"""

from __future__ import annotations

import math
import re
from typing import Any

from proctor.timeutil import format_config_duration, parse_duration

# [monitors] keep: how long monitor events, runs and follow-ups are kept (monitors/retention.py)
MONITORS_KEEP_RANGE = (3600.0, 3650 * 86400.0)
MAX_WAITING_RANGE = (1, 1000)
GRACE_RANGE = (5.0, 3600.0)

_TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _sandbox_mode(value: Any) -> str:
    """[sandbox] mode: off, landlock or auto."""
    if value not in ("off", "landlock", "auto"):
        raise ValueError(f'expected "off", "landlock" or "auto", got {_describe(value)}')
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_describe(value)}")
    return value


def _store_url(value: Any) -> str | None:
    """[store] url: a PostgreSQL URL; the embedded SQLite store when unset."""
    if not isinstance(value, str):
        raise ValueError(f"expected a postgresql://... URL, got {_describe(value)}")
    if not value.strip():
        return None
    if value.split(":", 1)[0] not in ("postgresql", "postgres"):
        raise ValueError("expected a postgresql://... URL (unset it for the embedded store)")
    return value


def _show_store_url(value: str | None) -> str:
    if value is None:
        return "unset (the embedded SQLite store)"
    from proctor.store import redact

    return redact(value)


def _optional_count(value: Any) -> int | None:
    """An integer >= 0 where 0 means unlimited; stored as None for unlimited."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a whole number, got {_describe(value)}")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"expected a whole number, got {value}")
        if value != int(value):
            raise ValueError(f"expected a whole number, got {value}")
        value = int(value)
    if value < 0:
        raise ValueError("must be 0 (unlimited) or more")
    return value or None


class Clamped(ValueError):
    """A value out of its range, brought back into it (and reported)."""

    def __init__(self, message: str, value: float) -> None:
        super().__init__(message)
        self.value = value


def _duration(value: Any, unit_seconds: float) -> float:
    """Seconds, more than 0, from `20m`, `90s`, `1h30m` or a bare number in the key's unit."""
    seconds = parse_duration(value, unit_seconds)
    if seconds <= 0:
        raise ValueError("must be more than 0")
    return seconds


def _positive(value: Any, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number of {unit}, got {_describe(value)}")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"expected a finite number of {unit}, got {value}")
    if value <= 0:
        raise ValueError("must be more than 0")
    return float(value)


def _minutes(value: Any) -> float:
    """Minutes, fractions allowed, from a duration or a bare number of minutes."""
    return _duration(value, 60) / 60


def _grace_seconds(value: Any) -> float:
    seconds = _duration(value, 1)
    low, high = GRACE_RANGE
    if not low <= seconds <= high:
        # a window under the floor would kill Claude before it saves its session file
        raise Clamped(f"clamped to {low:g}..{high:g} seconds", min(high, max(low, seconds)))
    return seconds


def _monitors_keep(value: Any) -> float:
    seconds = _duration(value, 1)
    low, high = MONITORS_KEEP_RANGE
    if not low <= seconds <= high:
        # under an hour a follow-up could go before its agent is back; past ten years is no bound
        raise Clamped(
            f"clamped to {format_config_duration(low)}..{format_config_duration(high)}", min(high, max(low, seconds))
        )
    return seconds


def _max_waiting(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number, got {_describe(value)}")
    low, high = MAX_WAITING_RANGE
    if not low <= value <= high:
        raise Clamped(f"clamped to {low}..{high}", min(high, max(low, value)))
    return value


def _commit_body(value: Any) -> str:
    if value not in ("full", "minimal"):
        raise ValueError(f"expected full or minimal, got {_describe(value)}")
    return value


def _optional_duration(value: Any) -> float | None:
    seconds = parse_duration(value)
    return seconds or None


def _duration_zero_never(value: Any) -> float:
    return parse_duration(value)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _TARGET_NAME.match(value):
        raise ValueError(f"expected a target name such as ci, got {_describe(value)}")
    return value


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if isinstance(value, (dict, list)):
        return "a table" if isinstance(value, dict) else "an array"
    return repr(value)


def _show_count(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


def _show_optional_duration(value: float | None) -> str:
    return format_config_duration(value)


def _show_stale(value: float) -> str:
    return "0 (never)" if value == 0 else format_config_duration(value)


def _render_raw(raw: Any) -> str:
    if isinstance(raw, bool):
        return str(raw).lower()
    if isinstance(raw, str):
        return f'"{raw}"'
    if isinstance(raw, dict):
        return "{...}"
    return repr(raw)
