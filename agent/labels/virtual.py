"""Is this node a virtual machine? What the firmware's DMI strings say.

A hypervisor names itself in `sys_vendor` or `product_name` (QEMU, VMware,
Xen, Hyper-V, the clouds); anything else readable is taken for hardware. The
table is ordered: the first rule that matches decides, so exceptions (EC2 bare
metal, Microsoft's own hardware) come before the rules they narrow.
"""

from __future__ import annotations

from dataclasses import dataclass

from topology.dmi import Dmi


@dataclass(frozen=True, slots=True)
class Rule:
    """Substrings (lowercase) both fields must contain ("" matches anything), and the verdict."""

    vendor: str
    product: str
    virtual: bool
    what: str


RULES: tuple[Rule, ...] = (
    # EC2 bare-metal instances keep Amazon's vendor string: c5.metal, i3.metal, ...
    Rule("amazon ec2", ".metal", False, "Amazon EC2 bare metal"),
    Rule("amazon ec2", "", True, "Amazon EC2"),
    Rule("qemu", "", True, "QEMU/KVM"),
    Rule("", "kvm", True, "KVM"),
    Rule("", "standard pc (", True, "QEMU/KVM"),  # QEMU's i440FX / Q35 machine types
    Rule("vmware", "", True, "VMware"),
    Rule("", "vmware", True, "VMware"),
    Rule("xen", "", True, "Xen"),
    Rule("", "hvm domu", True, "Xen"),
    # Hyper-V and Azure; a Surface or other Microsoft hardware says what it is instead.
    Rule("microsoft corporation", "virtual machine", True, "Microsoft Hyper-V"),
    Rule("google", "google compute engine", True, "Google Compute Engine"),
    Rule("openstack", "", True, "OpenStack"),
    Rule("", "openstack", True, "OpenStack"),
    Rule("innotek", "", True, "VirtualBox"),
    Rule("", "virtualbox", True, "VirtualBox"),
    Rule("parallels", "", True, "Parallels"),
    Rule("bochs", "", True, "Bochs"),
    Rule("", "bhyve", True, "bhyve"),
    Rule("kubevirt", "", True, "KubeVirt"),
    Rule("nutanix", "ahv", True, "Nutanix AHV"),
    Rule("digitalocean", "", True, "DigitalOcean"),
    Rule("hetzner", "vserver", True, "Hetzner Cloud"),
    Rule("alibaba cloud", "ecs", True, "Alibaba Cloud ECS"),
    Rule("", "apple virtualization", True, "Apple Virtualization"),
    Rule("", "cloud hypervisor", True, "Cloud Hypervisor"),
)


def classify(dmi: Dmi) -> Rule | None:
    """The first rule matching the DMI strings, or None (hardware, or nothing to read)."""
    vendor = (dmi.sys_vendor or "").lower()
    product = (dmi.product_name or "").lower()
    for rule in RULES:
        if rule.vendor in vendor and rule.product in product:
            return rule
    return None


def is_virtual(dmi: Dmi) -> bool | None:
    """True: DMI names a hypervisor; False: it names something else; None: nothing readable."""
    if not (dmi.sys_vendor or dmi.product_name):
        return None
    rule = classify(dmi)
    return rule is not None and rule.virtual
