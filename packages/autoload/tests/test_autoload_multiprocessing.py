"""openreg tensors sent to other processes with torch.multiprocessing arrive on the same device and share memory
with the sender, as CUDA tensors do through CUDA IPC (patch 10 in openreg._torch_patches). Each case runs as a
script of its own under the spawn start method, as users run it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from openreg_runtime.testing import clean_env

PRELUDE = """
import json, sys, torch, torch.multiprocessing as mp

def shared_mappings():
    with open("/proc/self/maps") as f:
        return sum("openreg-shared" in line for line in f)
"""


def _run(tmp_path, code: str) -> dict:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(PRELUDE) + textwrap.dedent(code))
    out = subprocess.run([sys.executable, str(script)], env=clean_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_process_argument_shares_memory_on_the_same_device(tmp_path):
    out = _run(tmp_path, """
        def child(t, weight, q):
            q.put({"device": str(t.device), "seen": t.cpu().tolist(), "parameter": type(weight).__name__,
                   "requires_grad": weight.requires_grad, "weight": weight.detach().cpu().tolist()})
            t.mul_(10)
            torch.openreg.synchronize()

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            base = torch.arange(12.0, device="openreg:1")
            view = base.view(3, 4).t()[1:]  # an offset and strides of its own
            weight = torch.nn.Parameter(torch.ones(2, device="openreg"))
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(view, weight, q))
            p.start()
            got = q.get(timeout=120)
            p.join(120)
            got.update(exitcode=p.exitcode, expected=view.cpu().div(10).tolist(), after=view.cpu().tolist())
            print(json.dumps(got))
    """)
    assert out["exitcode"] == 0
    assert out["device"] == "openreg:1"
    assert out["seen"] == out["expected"]  # the view's values, as the parent held them before the child's write
    assert out["after"] == [[v * 10 for v in row] for row in out["seen"]]  # the child's write, seen by the parent
    assert (out["parameter"], out["requires_grad"], out["weight"]) == ("Parameter", True, [1.0, 1.0])


def test_a_queue_carries_tensors_both_ways_and_the_memory_goes_with_the_last_user(tmp_path):
    out = _run(tmp_path, """
        def child(inbox, outbox, done):
            t = inbox.get(timeout=120)
            t.add_(1)
            torch.openreg.synchronize()
            mine = torch.full((3,), 7.0, device="openreg")
            outbox.put((mine, mine.untyped_storage()))
            done.wait(120)  # the sender lives until the receiver has the descriptor, as with CPU tensors
            del t, mine
            torch.openreg.synchronize()  # the memory goes in stream order
            outbox.put(shared_mappings())

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            inbox, outbox, done = ctx.Queue(), ctx.Queue(), ctx.Event()
            p = ctx.Process(target=child, args=(inbox, outbox, done))
            p.start()
            t = torch.zeros(5, device="openreg")
            inbox.put(t)
            theirs, storage = outbox.get(timeout=120)
            done.set()
            child_left = outbox.get(timeout=120)
            p.join(120)
            result = {"mine": t.cpu().tolist(), "theirs": theirs.cpu().tolist(), "device": str(theirs.device),
                      "storage": [storage.device.type, storage.nbytes()], "child_left": child_left}
            del t, theirs, storage
            torch.openreg.synchronize()  # the memory goes in stream order
            result.update(parent_left=shared_mappings(), exitcode=p.exitcode)
            print(json.dumps(result))
    """)
    assert out["exitcode"] == 0
    assert out["mine"] == [1.0] * 5
    assert (out["theirs"], out["device"], out["storage"]) == ([7.0] * 3, "openreg:0", ["openreg", 12])
    assert out["child_left"] == 0 and out["parent_left"] == 0


@pytest.mark.parametrize("device", ["cpu", "openreg"])
def test_a_non_leaf_that_requires_grad_is_refused_as_on_the_cpu(tmp_path, device):
    out = _run(tmp_path, f"""
        from multiprocessing.reduction import ForkingPickler
        x = torch.ones(2, device="{device}", requires_grad=True) * 2
        try:
            ForkingPickler.dumps(x)
            print(json.dumps({{"raised": None}}))
        except RuntimeError as e:
            print(json.dumps({{"raised": str(e)}}))
    """)
    assert out["raised"] and out["raised"].startswith("Cowardly refusing to serialize non-leaf tensor")


def test_a_received_tensor_is_not_sent_on_but_its_clone_is(tmp_path):
    # CUDA refuses to send on memory another process shared with it (torch's _share_cuda_), naming the fix.
    out = _run(tmp_path, """
        from multiprocessing.reduction import ForkingPickler

        def child(t, q):
            try:
                ForkingPickler.dumps(t)
                refused = None
            except RuntimeError as e:
                refused = str(e)
            ForkingPickler.dumps(t.clone())
            q.put({"refused": refused})

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(torch.arange(4.0, device="openreg"), q))
            p.start()
            got = q.get(timeout=120)
            p.join(120)
            got.update(exitcode=p.exitcode)
            print(json.dumps(got))
    """)
    assert out["exitcode"] == 0
    assert out["refused"] == ("Attempted to send openreg tensor received from another process; this is not currently "
                              "supported. Consider cloning before sending.")
