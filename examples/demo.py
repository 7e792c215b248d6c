"""A tour of the openreg device with the runtime alone: devices, copies, streams, events
and allocator statistics. Compute ops (add, matmul, ...) come with openreg-eager.

Run it with `nox -s demo`, or `python examples/demo.py` where openreg-runtime is installed.
`openreg demo` (with `pip install openreg`) trains a model on the device instead.
"""

import torch

import openreg_runtime  # registers the device with openreg-runtime alone (openreg does it at `import torch`)

MiB = 1 << 20


def show(label: str, value: object) -> None:
    print(f"  {label:<34} {value}")


def main() -> None:
    print(f"torch {torch.__version__}, openreg-runtime {openreg_runtime.__version__}")
    print(f"\nDevices: {torch.openreg.device_count()} x {torch.openreg.get_device_name(0)}")
    props = torch.openreg.get_device_properties(0)
    show("memory per device", f"{props.total_memory / MiB:.0f} MiB")
    show("current device", torch.openreg.current_device())

    print("\nTensors and copies")
    x = torch.arange(8, dtype=torch.float32).to("openreg:0")
    y = torch.empty(8, device="openreg:1")
    y.copy_(x)  # openreg:0 -> openreg:1, ordered on both devices' streams
    show("x (openreg:0) -> host", x.cpu().tolist())
    show("y (openreg:1) = x, back on host", y.cpu().tolist())
    z = torch.zeros(2, 3, device="openreg:1").fill_(7)
    show("zeros(2, 3).fill_(7) on openreg:1", z.cpu().tolist())

    print("\nStreams and events")
    stream = torch.openreg.Stream()
    start, end = torch.openreg.Event(enable_timing=True), torch.openreg.Event(enable_timing=True)
    with torch.openreg.stream(stream):
        start.record()
        torch.openreg._sleep(50_000_000)  # keeps the stream busy for 50 ms, like torch.cuda._sleep
        end.record()
    show("stream", stream)
    show("work done right after queueing?", stream.query())
    end.synchronize()
    show("work done after end.synchronize()?", stream.query())
    show("elapsed between the events", f"{start.elapsed_time(end):.1f} ms (asked for 50 ms)")

    print("\nAsynchronous copy from pinned memory")
    host = torch.full((4 * MiB // 4,), 3.0).pin_memory()
    dev = torch.empty(host.shape, device="openreg:0")
    done = torch.openreg.Event()
    dev.copy_(host, non_blocking=True)  # returns at once; the copy runs on the current stream
    done.record()
    done.synchronize()
    show("pinned host buffer", f"{host.numel() * 4 / MiB:.0f} MiB, is_pinned={host.is_pinned()}")
    show("first values on the device", dev[:4].cpu().tolist())

    print("\nMemory statistics (openreg:0)")
    show("allocated", f"{torch.openreg.memory_allocated(0) / MiB:.2f} MiB")
    show("reserved by the caching allocator", f"{torch.openreg.memory_reserved(0) / MiB:.2f} MiB")
    del dev
    show("allocated after `del dev`", f"{torch.openreg.memory_allocated(0) / MiB:.2f} MiB")
    show("peak allocated", f"{torch.openreg.max_memory_allocated(0) / MiB:.2f} MiB")
    torch.openreg.empty_cache()
    free, total = torch.openreg.mem_get_info(0)
    show("free / total after empty_cache()", f"{free / MiB:.0f} / {total / MiB:.0f} MiB")
    stats = torch.openreg.memory_stats(0)
    show("allocations so far", stats.get("allocation.all.allocated", "n/a"))

    torch.openreg.synchronize()
    print("\nDone.")


if __name__ == "__main__":
    main()
