"""Times and durations, one way everywhere: UTC with milliseconds; `30s`, `15m`, `2h`."""

from __future__ import annotations

import math
import re
import time

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION = 100 * 365 * 86400.0  # a century: past it, a deadline is no longer a date


def now() -> float:
    return time.time()


def iso(ts: float) -> str:
    """A timestamp as stored: UTC, milliseconds, `Z`."""
    whole = int(ts // 1)
    millis = int(round((ts - whole) * 1000))
    if millis == 1000:
        whole, millis = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


def parse_iso(text: str) -> float:
    """Seconds since the epoch of `2026-11-30T04:42:21.123Z` (no datetime: the hook reads these)."""
    year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    fraction = text[19:].rstrip("Z")
    frac = float("0" + fraction) if fraction.startswith(".") else 0.0
    # days from civil (Howard Hinnant's algorithm), exact for the proleptic Gregorian calendar
    y = year - (month <= 2)
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return days * 86400 + hour * 3600 + minute * 60 + second + frac


def parse_duration(value: object, unit_seconds: float = 1.0) -> float:
    """Seconds from `90`, `1.5`, `"30s"`, `"15m"`, `"2h"`, `"1h30m"`.

    A bare number is in the unit the key names (`unit_seconds`). Raises ValueError on a
    negative, infinite or NaN value, a boolean, or text that is no duration.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 15m or 2h, got a boolean")
    if isinstance(value, (int, float)):
        seconds = float(value) * unit_seconds
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if not text:
            raise ValueError("expected a duration such as 30s, 15m or 2h, got an empty string")
        try:
            seconds = float(text) * unit_seconds
        except ValueError:
            pos, seconds = 0, 0.0
            for match in _DURATION.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
                pos = match.end()
            if pos != len(text) or pos == 0:
                raise ValueError(f"{value!r} is not a duration; write it as 30s, 15m, 2h or 1h30m") from None
    else:
        raise ValueError(f"expected a duration such as 30s, 15m or 2h, got {type(value).__name__}")
    if math.isnan(seconds) or math.isinf(seconds):
        raise ValueError("a duration must be finite")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    if seconds > MAX_DURATION:
        raise ValueError("a duration cannot be longer than 100 years")
    return seconds


def format_duration(seconds: float) -> str:
    """`45s`, `12m`, `3h5m`, `2d4h`: short, for listings."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, _ = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def format_config_duration(seconds: float | None) -> str:
    """A duration as a person would write it in proctor.toml: `2h`, `90m`, `45s`."""
    if seconds is None:
        return "unset"
    if seconds == 0:
        return "0"
    for suffix, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{suffix}"
    return f"{seconds:g}s"
