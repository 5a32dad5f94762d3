"""Readers of agent hosts' session transcripts (core: the guard's hook reads them).

`incremental.py` reads a transcript, any host's, since the last call; each host's module
(`claude.py`) says what its lines mean."""
