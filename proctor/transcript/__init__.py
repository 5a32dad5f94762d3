"""Readers of agent hosts' session transcripts (core: the guard's hook reads them)."""
