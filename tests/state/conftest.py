"""The node fixtures (an agent on an in-memory runtime) for the state tests."""

from tests.node.conftest import make_node, sockdir

__all__ = ["make_node", "sockdir"]
