"""Development-only tooling, imported from the checkout by `make demo`, the tests and
the benchmarks: a private containerd, an offline busybox image, a kubelet-like CRI
client and pod runner, the in-memory runtime with fault injection, and the demo.

Neither the wheel nor the .deb installs this package (pyproject.toml's package list;
tests/packaging/test_installed_files.py checks), and no module of the agent imports it.
"""
