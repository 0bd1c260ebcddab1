"""Kubernetes name syntax: the cases apimachinery's validation tests use."""

from __future__ import annotations

import pytest

from agent.kube.names import label_key_problem, label_value_problem, namespace_problem


@pytest.mark.parametrize(
    "key",
    [
        "app",
        "a",
        "app.kubernetes.io/name",
        "example.com/storage",
        "numa-agent.io/net.eth1",
        "A_b-c.d",
        "x" * 63,
        "a.b/" + "x" * 63,
        ("a" * 63 + ".") * 3 + "b/c",
    ],
)
def test_valid_label_keys(key: str) -> None:
    assert label_key_problem(key) is None


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "name part must not be empty"),
        ("/app", "prefix before '/' must not be empty"),
        ("example.com/", "name part must not be empty"),
        ("Example.com/app", "lowercase DNS subdomain"),
        ("exa_mple.com/app", "lowercase DNS subdomain"),
        ("x" * 64, "at most 63"),
        ("-app", "start and end"),
        ("app-", "start and end"),
        ("a/b/c", "lowercase DNS subdomain"),
        ("app name", "letters, digits"),
        ("a" * 254 + "/b", "at most 253"),
    ],
)
def test_invalid_label_keys(key: str, reason: str) -> None:
    problem = label_key_problem(key)
    assert problem is not None and reason in problem


@pytest.mark.parametrize("value", ["", "db", "v1.2", "A-b_c.D", "0", "x" * 63])
def test_valid_label_values(value: str) -> None:
    assert label_value_problem(value) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("x" * 64, "at most 63"),
        ("-db", "start and end"),
        ("db.", "start and end"),
        ("a b", "letters"),
    ],
)
def test_invalid_label_values(value: str, reason: str) -> None:
    problem = label_value_problem(value)
    assert problem is not None and reason in problem


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("default", True),
        ("kube-system", True),
        ("a", True),
        ("Shop", False),
        ("a.b", False),
        ("", False),
        ("-a", False),
        ("x" * 64, False),
    ],
)
def test_namespaces(name: str, ok: bool) -> None:
    assert (namespace_problem(name) is None) is ok
