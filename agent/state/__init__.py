"""The agent's memory across restarts: one versioned, checksummed state file."""

from agent.state.store import SCHEMA_VERSION, LoadResult, StateError, StateStore

__all__ = ["SCHEMA_VERSION", "LoadResult", "StateError", "StateStore"]
