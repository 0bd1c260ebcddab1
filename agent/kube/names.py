"""Kubernetes' syntax for label keys, label values and namespace names.

The same rules the API server applies (apimachinery `validation.IsQualifiedName`,
`IsValidLabelValue`, `IsDNS1123Label`), so that what the agent accepts or writes
is what a cluster would accept. Each check returns the reason a text is invalid,
or None, so callers can put the reason in their own message.
"""

from __future__ import annotations

import re

MAX_NAME = 63  # a label name, a label value, a DNS-1123 label
MAX_PREFIX = 253  # a label key's prefix (a DNS-1123 subdomain)

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value (empty is valid), or None."""
    if len(value) > MAX_NAME:
        return f"must be at most {MAX_NAME} characters (has {len(value)})"
    if value and not _NAME.fullmatch(value):
        return (
            "must be empty or consist of letters, digits, '-', '_' or '.', "
            "and start and end with a letter or digit"
        )
    return None


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label key (`[prefix/]name`), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' must not be empty"
    if prefix:
        if len(prefix) > MAX_PREFIX:
            return f"the prefix must be at most {MAX_PREFIX} characters"
        if not _DNS_SUBDOMAIN.fullmatch(prefix):
            return "the prefix must be a lowercase DNS subdomain (such as example.com)"
    if not name:
        return "the name part must not be empty"
    if len(name) > MAX_NAME:
        return f"the name part must be at most {MAX_NAME} characters (has {len(name)})"
    if not _NAME.fullmatch(name):
        return (
            "the name part must consist of letters, digits, '-', '_' or '.', "
            "and start and end with a letter or digit"
        )
    return None


def namespace_problem(name: str) -> str | None:
    """Why `name` is not a valid namespace name (a DNS-1123 label), or None."""
    if not name:
        return "must not be empty"
    if len(name) > MAX_NAME:
        return f"must be at most {MAX_NAME} characters (has {len(name)})"
    if not _DNS_LABEL.fullmatch(name):
        return "must consist of lowercase letters, digits or '-', and start and end with one"
    return None
