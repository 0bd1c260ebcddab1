"""The CRI relay: a gRPC server on a unix socket that passes every CRI call
to the real runtime, with a table of hooks for the calls the agent changes."""
