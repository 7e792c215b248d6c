"""The stream sanitizer on eager ops: what each op reads and writes comes from its schema (in-place and out=
arguments, fresh results), so planted races between streams are reported naming both ops and lines, and properly
ordered multi-stream code, training included, runs silently with the CPU's results."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

HERE = Path(__file__).resolve()


def _line() -> int:
    return sys._getframe(1).f_lineno + 1


def _site(line: int) -> str:
    return f'File "{HERE}", line {line}'


@pytest.fixture(autouse=True)
def sanitizer():
    torch.openreg.set_stream_sanitizer("error")
    yield
    torch.openreg.synchronize()
    torch.openreg.set_stream_sanitizer("off")


def test_read_after_an_in_place_op_on_another_stream():
    x = torch.ones(256, device="openreg")
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        torch.openreg._sleep(30_000_000)
        write_line = _line()
        x.mul_(2)
    with pytest.raises(RuntimeError) as info:
        read_line = _line()
        x + 1
    report = str(info.value)
    assert "'aten::add' on openreg:0 stream 0 reads" in report
    assert f"that 'aten::mul_' on openreg:0 stream {side.stream_id} writes" in report
    assert _site(write_line) in report and _site(read_line) in report


def test_out_argument_written_on_another_stream():
    a, b, c = torch.ones(64, device="openreg"), torch.ones(64, device="openreg"), torch.empty(64, device="openreg")
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        torch.add(a, b, out=c)
    with pytest.raises(RuntimeError, match=r"'aten::sum' on openreg:0 stream 0 reads .* that 'aten::add' .* writes"):
        c.sum()


def test_overwriting_an_input_another_stream_still_reads():
    x = torch.ones(64, device="openreg")
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        torch.openreg._sleep(30_000_000)
        y = x * 3  # reads x on the side stream
    with pytest.raises(RuntimeError, match=r"'zero_' on openreg:0 stream 0 writes .* 'aten::mul' .* reads"):
        x.zero_()
    torch.openreg.current_stream().wait_stream(side)
    assert_close(y.cpu(), torch.full((64,), 3.0))


def test_ops_run_at_the_call_are_checked_too():
    mask = torch.zeros(64, dtype=torch.bool, device="openreg")
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        mask[::2] = True
    with pytest.raises(RuntimeError, match=r"'aten::nonzero' on openreg:0 stream 0 reads"):
        mask.nonzero()


def test_an_ops_first_call_on_an_idle_stream_is_ordered_as_queued_work():
    # A first call runs at the call (its checks raise there) but stands for a kernel a GPU would queue: on a side
    # stream that the host saw finish earlier, it is still unordered with the default stream.
    x = torch.ones(77, device="openreg")
    side = torch.openreg.Stream()
    torch.openreg.synchronize()
    with torch.openreg.stream(side):
        x.addcdiv_(x, x, value=0.25)  # a signature no test calls before
    with pytest.raises(RuntimeError, match=r"stream 0 reads .* that 'aten::addcdiv_' on openreg:0 stream \d+ writes"):
        x.sum()


def test_a_fresh_result_in_memory_freed_while_another_stream_read_it():
    gc.collect()  # device tensors in earlier tests' reference cycles, freed later, would take x's place
    torch.openreg.empty_cache()  # so that the next allocation of this size takes x's block
    side = torch.openreg.Stream()
    x = torch.ones(1024, device="openreg")
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        torch.openreg._sleep(30_000_000)
        x.sum()  # the side stream reads x
    del x  # the bug: no x.record_stream(side)
    with pytest.raises(RuntimeError, match="freed and reused .* 'fill_' .* 'aten::sum' .* reads"):
        torch.ones(1024, device="openreg")


def test_record_stream_makes_the_same_code_clean():
    side = torch.openreg.Stream()
    x = torch.ones(1024, device="openreg")
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        torch.openreg._sleep(30_000_000)
        s = x.sum()
    x.record_stream(side)
    del x
    y = torch.ones(1024, device="openreg") * 2
    torch.openreg.current_stream().wait_stream(side)
    assert s.item() == 1024 and y.sum().item() == 2048


def _train(device: str, side_stream: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(32, 8).to(device)
    target = torch.randn(32, 1).to(device)
    losses = []
    side = torch.openreg.Stream() if side_stream else None
    for _ in range(3):
        opt.zero_grad()
        if side is None:
            loss = torch.nn.functional.mse_loss(model(data), target)
        else:
            # The step's forward and backward on a side stream, ordered both ways with the default stream.
            side.wait_stream(torch.openreg.current_stream())
            with torch.openreg.stream(side):
                loss = torch.nn.functional.mse_loss(model(data), target)
                loss.backward()
            torch.openreg.current_stream().wait_stream(side)
        if side is None:
            loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return losses + [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("side_stream", [False, True])
def test_properly_ordered_training_is_silent_and_matches_the_cpu(side_stream):
    torch.openreg.set_stream_sanitizer("off")
    expected = _train("cpu", side_stream=False)
    torch.openreg.set_stream_sanitizer("error")
    for got, want in zip(_train("openreg", side_stream), expected, strict=True):
        assert_close(got, want)


def test_compiled_kernels_reading_memory_another_stream_writes_are_reported():
    f = torch.compile(lambda t: t.sin() + 1, backend="inductor")
    x = torch.ones(64, device="openreg")
    f(x)  # compiles with the sanitizer on: its own launches are ordered
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        x.mul_(2)
    with pytest.raises(RuntimeError, match=r"stream 0 reads .* that 'aten::mul_' on openreg:0 stream \d+ writes"):
        f(x)
