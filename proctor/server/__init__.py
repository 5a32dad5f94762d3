"""`proctor server`: the daemon that runs monitors, delivers follow-ups, and serves the JSON
API (/api/v1/) and the console, bound to 127.0.0.1 behind a bearer token."""
