"""The firmware's DMI strings in fake trees (hardware, KVM guest, none) and the reader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from topology.dmi import Dmi, read_dmi
from topology.shapes import DMI_HARDWARE, DMI_KVM, SHAPES, DmiSpec, MachineSpec, MachineSpecError


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_reads_its_dmi(name: str, shape_root: Callable[[str], Path]) -> None:
    spec = SHAPES[name].dmi
    dmi = read_dmi(shape_root(name))
    if spec is None:
        assert dmi == Dmi()
    else:
        assert dmi == Dmi(spec.sys_vendor, spec.product_name, spec.product_uuid)


def test_shapes_cover_hardware_kvm_and_none() -> None:
    kinds = {"none" if s.dmi is None else s.dmi.sys_vendor for s in SHAPES.values()}
    assert "none" in kinds and "QEMU" in kinds and len(kinds) >= 3, kinds


def test_missing_and_unreadable_files_are_none(spec_root: Callable[[MachineSpec], Path]) -> None:
    root = spec_root(MachineSpec(dmi=DmiSpec(sys_vendor="  Dell Inc.\n", product_name="")))
    ident = root / "class/dmi/id"
    # product_uuid is root's (0400): reading it fails the way a directory does here.
    (ident.resolve() / "product_uuid").mkdir()
    assert read_dmi(root) == Dmi(sys_vendor="Dell Inc.", product_name=None, product_uuid=None)


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        ("hardware", DMI_HARDWARE),
        ("kvm", DMI_KVM),
        ("none", None),
        ({"sys_vendor": "VMware, Inc."}, DmiSpec(sys_vendor="VMware, Inc.")),
    ],
)
def test_dmi_from_a_scenario(value: object, expect: DmiSpec | None) -> None:
    assert MachineSpec.from_mapping({"dmi": value}).dmi == expect


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("xen", "dmi: unknown preset 'xen'"),
        ({"vendor": "x"}, "dmi: vendor: unknown key"),
        ({"sys_vendor": 1}, "dmi: sys_vendor: expected a string"),
        (3, "dmi: expected a preset name or a mapping"),
    ],
)
def test_dmi_from_a_scenario_errors(value: object, says: str) -> None:
    with pytest.raises(MachineSpecError) as err:
        MachineSpec.from_mapping({"dmi": value})
    assert says in str(err.value)
