"""What DMI strings say about the node: a hypervisor's name means a VM, anything else
readable hardware, nothing readable no answer."""

from __future__ import annotations

import pytest

from agent.labels.virtual import RULES, is_virtual
from topology.dmi import Dmi

CASES: list[tuple[str | None, str | None, bool | None]] = [
    # (sys_vendor, product_name, virtual) as real machines and clouds report them
    ("QEMU", "Standard PC (Q35 + ICH9, 2009)", True),
    ("QEMU", "Standard PC (i440FX + PIIX, 1996)", True),
    ("Red Hat", "KVM", True),
    ("Red Hat", "RHEL-AV", False),  # not in the table: taken for hardware
    ("VMware, Inc.", "VMware Virtual Platform", True),
    ("VMware, Inc.", "VMware20,1", True),
    ("Xen", "HVM domU", True),
    ("Microsoft Corporation", "Virtual Machine", True),  # Hyper-V, Azure
    ("Microsoft Corporation", "Surface Laptop 5", False),
    ("Amazon EC2", "m5.large", True),
    ("Amazon EC2", "c5.metal", False),  # bare metal keeps Amazon's name
    ("Google", "Google Compute Engine", True),
    ("OpenStack Foundation", "OpenStack Nova", True),
    ("innotek GmbH", "VirtualBox", True),
    ("Parallels Software International Inc.", "Parallels Virtual Platform", True),
    ("KubeVirt", "None", True),
    ("Nutanix", "AHV", True),
    ("DigitalOcean", "Droplet", True),
    ("Hetzner", "vServer", True),
    ("Alibaba Cloud", "Alibaba Cloud ECS", True),
    ("Apple Inc.", "Apple Virtualization Generic Platform", True),
    ("Cloud Hypervisor", "Cloud Hypervisor", True),
    ("Dell Inc.", "PowerEdge R750", False),
    ("Supermicro", "SYS-221H-TNR", False),
    ("To Be Filled By O.E.M.", "To Be Filled By O.E.M.", False),
    (None, "PowerEdge R750", False),  # sys_vendor unreadable, product still says
    ("", "", None),
    (None, None, None),
]


@pytest.mark.parametrize(("vendor", "product", "virtual"), CASES)
def test_is_virtual(vendor: str | None, product: str | None, virtual: bool | None) -> None:
    assert is_virtual(Dmi(sys_vendor=vendor, product_name=product)) is virtual


def test_case_does_not_matter() -> None:
    assert is_virtual(Dmi(sys_vendor="qemu", product_name="standard pc")) is True
    assert is_virtual(Dmi(sys_vendor="AMAZON EC2", product_name="I3.METAL")) is False


def test_rules_are_lowercase_and_every_rule_is_reachable() -> None:
    for index, rule in enumerate(RULES):
        assert rule.vendor == rule.vendor.lower() and rule.product == rule.product.lower()
        # A DMI made of exactly this rule's strings is decided by this rule, not an earlier one.
        dmi = Dmi(sys_vendor=rule.vendor or "x", product_name=rule.product or "y")
        assert is_virtual(dmi) is rule.virtual, (index, rule)
