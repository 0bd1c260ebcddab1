"""CPUSet: the Linux list format and set algebra."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topology.cpuset import CPUSet, CPUSetError


@pytest.mark.parametrize(
    ("text", "ids", "canonical"),
    [
        ("", (), ""),
        ("  ", (), ""),
        ("0", (0,), "0"),
        ("0-3", (0, 1, 2, 3), "0-3"),
        ("0-3,8,10-11", (0, 1, 2, 3, 8, 10, 11), "0-3,8,10-11"),
        ("8,0-3", (0, 1, 2, 3, 8), "0-3,8"),
        ("1,2,3", (1, 2, 3), "1-3"),
        ("0-0", (0,), "0"),
        ("0-3\n", (0, 1, 2, 3), "0-3"),
        ("3,3", (3,), "3"),
    ],
)
def test_parse_and_print(text: str, ids: tuple[int, ...], canonical: str) -> None:
    cpus = CPUSet.parse(text)
    assert cpus.ids() == ids
    assert str(cpus) == canonical
    assert len(cpus) == len(ids)


@pytest.mark.parametrize("text", ["3-1", "a", "1,,2", "-1", "1-", ",1", "1-2-3", "0x1", "99999999"])
def test_malformed_text_names_the_text(text: str) -> None:
    with pytest.raises(CPUSetError) as err:
        CPUSet.parse(text)
    assert repr(text) in str(err.value)


def test_algebra_and_order() -> None:
    a = CPUSet.parse("0-3")
    b = CPUSet.parse("2-5")
    assert str(a | b) == "0-5"
    assert str(a & b) == "2-3"
    assert str(a - b) == "0-1"
    assert str(a.union(b, CPUSet.of([9]))) == "0-5,9"
    assert a.intersection(b) == CPUSet.parse("3,2")
    assert a.difference(b).size() == 2
    assert CPUSet.parse("2-3").is_subset(a)
    assert not b.is_subset(a)
    assert sorted([CPUSet.parse("4"), CPUSet.parse("1,9"), CPUSet.parse("1-2")]) == [
        CPUSet.parse("1-2"),
        CPUSet.parse("1,9"),
        CPUSet.parse("4"),
    ]
    assert list(CPUSet.parse("5,1,3")) == [1, 3, 5]
    assert 3 in a and 7 not in a and "x" not in a
    assert CPUSet.parse("4-9").take_lowest(3) == CPUSet.parse("4-6")
    assert CPUSet.parse("4-9").first() == 4
    assert not CPUSet() and CPUSet.parse("") == CPUSet()


def test_negative_ids_are_rejected() -> None:
    with pytest.raises(CPUSetError):
        CPUSet.of([-1])


@given(st.frozensets(st.integers(min_value=0, max_value=1024), max_size=64))
def test_round_trip(ids: frozenset[int]) -> None:
    cpus = CPUSet.of(ids)
    assert set(cpus) == ids
    assert CPUSet.parse(str(cpus)) == cpus
