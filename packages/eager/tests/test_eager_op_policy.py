"""The per-op policy table (csrc/generic/op_policy.cpp) says what openreg does about individual ops: every row
must name an op this torch has, and what the row promises about kernels must be what the dispatcher holds. What
each policy does is tested where its behaviour is (fidelity, semantics, SDPA, training tests)."""

from __future__ import annotations

import pytest
import torch

import openreg_eager

ROWS = openreg_eager._C.op_policies()
# Policies under which openreg registers a PrivateUse1 kernel of its own for the op.
REGISTERING = {"bypass composite", "overrideable", "hot", "own kernel"}


def _overloads(op: str) -> list[str]:
    """The qualified overload names a row's op covers ("aten::addr" is the default overload)."""
    name, _, overload = op.partition(".")
    if overload != "*":
        return [op if overload else name]
    return [n for n in torch._C._dispatch_get_all_op_names() if n.split(".")[0] == name]


def test_the_table_has_rows_of_every_policy_with_reasons():
    assert {policy for _, policy, _ in ROWS} >= REGISTERING | {"host results", "cpu indices", "keep wrapper"}
    for op, policy, reason in ROWS:
        assert op.startswith(("aten::", "openreg::")) and len(reason) > 20, (op, policy, reason)
    assert len({(op, policy) for op, policy, _ in ROWS}) == len(ROWS), "a row is written twice"


@pytest.mark.parametrize(("op", "policy"), [(op, policy) for op, policy, _ in ROWS], ids=lambda v: str(v))
def test_every_row_names_an_op_of_this_torch(op, policy):
    overloads = _overloads(op)
    assert overloads, f"{op} ({policy}): no such op in torch {torch.__version__}"
    for name in overloads:
        op_name, _, overload = name.partition(".")
        torch._C._dispatch_find_schema_or_throw(op_name, overload)  # raises for an overload this torch lacks


@pytest.mark.parametrize("op", [op for op, policy, _ in ROWS if policy in REGISTERING])
def test_a_registering_row_has_an_openreg_kernel(op):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1"), f"{op} has no PrivateUse1 kernel"


@pytest.mark.parametrize("op", [op for op, policy, _ in ROWS if policy == "keep wrapper"])
def test_a_kept_wrapper_is_not_replaced(op):
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "CompositeExplicitAutogradNonFunctional")


def test_an_unlisted_op_is_served_from_its_schema_alone():
    # A structured op with no row: the generic kernel serves it directly, on device memory.
    assert not any(op.split(".")[0] == "aten::hypot" for op, _, _ in ROWS)
    a, b = torch.rand(5), torch.rand(5)
    torch.testing.assert_close(torch.hypot(a.to("openreg"), b.to("openreg")).cpu(), torch.hypot(a, b))
