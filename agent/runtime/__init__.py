"""CRI runtimes the agent can sit in front of without containerd: the
in-memory test double behind the tests and `simulate`."""
