"""PyTorch's device-generic test framework runs on openreg.

`instantiate_device_type_tests` turns a generic test class into one class per
available device type. openreg is the PrivateUse1 backend, so its variant comes
from `PrivateUse1TestBase`, which torch adds to the device bases when
`torch.<privateuse1 backend name>.is_available()` is true *at the time
common_device_type is imported*. openreg must therefore be imported first;
`only_for="openreg"` is translated by torch to "privateuse1".

Generated names: the class is `<Generic>PRIVATEUSE1` (or `<Generic>OPENREG`
once PrivateUse1TestBase.setUpClass has renamed the base's device_type), and
its tests `test_<name>_openreg[_<dtype>]`.
"""

from __future__ import annotations

import torch
import torch.testing._internal.common_device_type as common_device_type  # noqa: E402
from torch.testing._internal.common_device_type import (  # noqa: E402
    PrivateUse1TestBase,
    deviceCountAtLeast,
    dtypes,
    instantiate_device_type_tests,
)
from torch.testing._internal.common_utils import TestCase  # noqa: E402

import openreg_eager  # noqa: F401  (must come before common_device_type: see the docstring)

# If common_device_type was imported earlier in this process (by another test
# module) before any openreg layer was loaded, its list of device bases was
# computed without openreg; add the PrivateUse1 base now that openreg is
# available. (In a fresh process the import order above already takes care of it.)
if (
    torch._utils._is_privateuse1_backend_available()
    and PrivateUse1TestBase not in common_device_type.device_type_test_bases
):
    common_device_type.device_type_test_bases.append(PrivateUse1TestBase)


class TestEagerGeneric(TestCase):
    """Device-generic tests; the framework passes `device` (e.g. "openreg:0") and `dtype`."""

    def _ref(self, dtype, *shape, seed=0):
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(*shape, generator=g) * 4).to(dtype)

    def test_device_type(self, device):
        self.assertEqual(torch.device(device).type, "openreg")
        self.assertEqual(torch.empty(1, device=device).device, torch.device(device))

    @dtypes(torch.float32, torch.float64, torch.int64)
    def test_add(self, device, dtype):
        a, b = self._ref(dtype, 5, 6), self._ref(dtype, 5, 6, seed=1)
        got = torch.add(a.to(device), b.to(device), alpha=2)
        self.assertEqual(got.device, torch.device(device))
        self.assertEqual(got.dtype, dtype)
        self.assertEqual(got.cpu(), torch.add(a, b, alpha=2))

    @dtypes(torch.float32, torch.float64)
    def test_matmul(self, device, dtype):
        a, b = self._ref(dtype, 4, 7), self._ref(dtype, 7, 3, seed=1)
        self.assertEqual((a.to(device) @ b.to(device)).cpu(), a @ b)
        batch_a, batch_b = self._ref(dtype, 2, 4, 7), self._ref(dtype, 2, 7, 3, seed=2)
        self.assertEqual(torch.bmm(batch_a.to(device), batch_b.to(device)).cpu(), torch.bmm(batch_a, batch_b))

    @dtypes(torch.float32, torch.int32, torch.bool)
    def test_sum(self, device, dtype):
        x = self._ref(dtype, 3, 4, 5)
        d = x.to(device)
        self.assertEqual(d.sum().cpu(), x.sum())
        self.assertEqual(d.sum(dim=(0, 2)).cpu(), x.sum(dim=(0, 2)))
        self.assertEqual(d.sum(dim=1, keepdim=True).cpu(), x.sum(dim=1, keepdim=True))
        self.assertEqual(d.sum().dtype, x.sum().dtype)

    @dtypes(torch.float32)
    def test_autograd(self, device, dtype):
        x = self._ref(dtype, 4, 4).requires_grad_()
        xd = x.detach().to(device).requires_grad_()
        (x.exp() * x.sin()).sum().backward()
        (xd.exp() * xd.sin()).sum().backward()
        self.assertEqual(xd.grad.device, torch.device(device))
        self.assertEqual(xd.grad.cpu(), x.grad)

    @deviceCountAtLeast(2)
    def test_multi_device(self, devices):
        self.assertEqual(len(devices), torch.openreg.device_count())
        a = torch.ones(3, device=devices[1])
        self.assertEqual((a * 2).device, torch.device(devices[1]))
        self.assertEqual(a.to(devices[0]).device, torch.device(devices[0]))


instantiate_device_type_tests(TestEagerGeneric, globals(), only_for="openreg")

GENERATED = [
    name
    for name in list(globals())
    if name.startswith("TestEagerGeneric") and name.upper().endswith(("PRIVATEUSE1", "OPENREG"))
]


def test_openreg_variant_was_generated():
    """Guards against the framework silently generating nothing for openreg."""
    assert torch._C._get_privateuse1_backend_name() == "openreg"
    assert GENERATED, f"no openreg class generated; classes: {[n for n in globals() if n.startswith('Test')]}"
    assert "TestEagerGeneric" not in globals()  # the generic template is removed
    cls = globals()[GENERATED[0]]
    assert issubclass(cls, PrivateUse1TestBase)
    tests = sorted(n for n in dir(cls) if n.startswith("test_"))
    for expected in (
        "test_add_openreg_float32",
        "test_add_openreg_int64",
        "test_matmul_openreg_float64",
        "test_sum_openreg_bool",
        "test_device_type_openreg",
        "test_autograd_openreg_float32",
        "test_multi_device_openreg",
    ):
        assert expected in tests, f"{expected} not in {tests}"
    # Only the openreg variant: no CPU class from this module.
    assert not [n for n in globals() if n.startswith("TestEagerGeneric") and n.endswith("CPU")]
