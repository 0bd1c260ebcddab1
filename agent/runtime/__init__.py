"""CRI runtimes the agent can run against without containerd: the in-memory one
behind `simulate` (and the tests), and the way to call it in-process."""
