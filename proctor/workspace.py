"""A workspace: the checkout a command runs in, with its config and its repository's store.

Opened once per command (or library call). Config and store are loaded on first use, so a
command that needs neither (vcs checkpoint) touches neither. Config problems are reported
once, on the `warn` channel (stderr by default), the first time the config is read.
"""

from __future__ import annotations

import sys
from typing import Callable

from proctor import config as config_mod
from proctor.paths import Checkout, find_checkout, repo_state_dir
from proctor.store import Store, open_store


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class Workspace:
    def __init__(self, cwd: str | None = None, warn: Callable[[str], None] | None = None) -> None:
        self.checkout: Checkout = find_checkout(cwd)
        self.root = self.checkout.root
        self.warn = warn or _stderr
        self._config: config_mod.Config | None = None
        self._state_dir: str | None = None
        self._store: Store | None = None

    @property
    def config(self) -> config_mod.Config:
        if self._config is None:
            self._config = config_mod.load(self.root)
            for problem in self._config.problems:
                self.warn(f"proctor: {problem}")
        return self._config

    @property
    def state_dir(self) -> str:
        if self._state_dir is None:
            self._state_dir = repo_state_dir(self.checkout)
        return self._state_dir

    @property
    def store_url(self) -> str | None:
        """The PostgreSQL URL this checkout's store is on (PROCTOR_STORE_URL, else [store] url);
        None for the embedded store."""
        from proctor.store import configured_url

        url = configured_url(self.root)
        return None if not url or url.startswith("sqlite") else url

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.state_dir, root=self.root)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
