"""Memory pools: torch.openreg.MemPool and use_mem_pool, as torch.cuda's."""

import gc
import threading

import pytest
import torch
from torch.testing import assert_close

MiB = 2**20


def empty(nbytes, device="openreg"):
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def pool_segments(pool):
    return sorted(s["total_size"] for s in pool.snapshot())


def test_allocations_inside_use_mem_pool_come_from_the_pool_and_its_blocks_serve_it_alone(clean_device):
    pool = torch.openreg.MemPool()
    assert pool.id[0] == 0 and pool.id[1] > 0  # a user-created pool's id, as CUDA's
    assert pool.use_count() == 1
    outside = empty(MiB)
    with torch.openreg.use_mem_pool(pool):
        assert pool.use_count() == 2
        inside, big = empty(MiB), empty(2 * MiB)
    assert pool.use_count() == 1
    assert pool_segments(pool) == [MiB, 2 * MiB]
    assert {s["segment_pool_id"] for s in torch.openreg.memory_snapshot()} >= {(0, 0), pool.id}
    freed = inside.data_ptr()
    del inside
    assert empty(MiB).data_ptr() != freed  # outside the pool, its cached block is not taken
    with torch.openreg.use_mem_pool(pool):
        again = empty(MiB)
    assert again.data_ptr() == freed
    del outside, big, again


def test_a_live_pool_keeps_its_cache_through_empty_cache_and_gives_it_back_when_deleted(clean_device):
    pool = torch.openreg.MemPool()
    with torch.openreg.use_mem_pool(pool):
        block = empty(3 * MiB)
    del block
    reserved = torch.openreg.memory_reserved()
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved() == reserved
    assert pool_segments(pool) == [3 * MiB]
    del pool
    gc.collect()
    assert torch.openreg.memory_reserved() == reserved - 3 * MiB


def test_only_the_calling_threads_allocations_on_the_given_device_are_routed(clean_device, two_devices):
    pool = torch.openreg.MemPool()
    seen = []
    with torch.openreg.use_mem_pool(pool, device="openreg:1"):
        mine = empty(MiB, "openreg:1")
        on_zero = empty(2 * MiB, "openreg:0")
        thread = threading.Thread(target=lambda: seen.append(empty(4 * MiB, "openreg:1")))
        thread.start()
        thread.join(30)
    assert [s["total_size"] for s in pool.snapshot()] == [MiB]
    assert {s["device"] for s in pool.snapshot()} == {1}
    del mine, on_zero
    seen.clear()


def test_pools_nest_and_the_outer_one_is_routed_to_again(clean_device):
    outer, inner = torch.openreg.MemPool(), torch.openreg.MemPool()
    with torch.openreg.use_mem_pool(outer):
        a = empty(MiB)
        with torch.openreg.use_mem_pool(inner):
            b = empty(2 * MiB)
        c = empty(3 * MiB)
    d = empty(4 * MiB)
    assert pool_segments(outer) == [MiB, 3 * MiB]
    assert pool_segments(inner) == [2 * MiB]
    del a, b, c, d


def test_a_graph_captured_into_a_pool_uses_it_as_cuda_graphs_do(clean_device):
    x = torch.ones(MiB // 4, device="openreg")  # (runtime ops alone: the runtime's tests run without openreg-eager)
    pool = torch.openreg.MemPool()
    graph = torch.openreg.OpenRegGraph()
    with torch.openreg.graph(graph, pool=pool.id):
        y = x.clone()
    assert pool.use_count() == 2  # the pool and the graph
    assert pool_segments(pool) == [MiB]
    graph.reset()
    assert pool.use_count() == 1
    del y


def test_a_pool_routed_to_during_a_capture_is_kept_by_the_graph_until_it_is_reset(clean_device):
    x = torch.ones(MiB // 4, device="openreg")
    pool = torch.openreg.MemPool()
    graph = torch.openreg.OpenRegGraph()
    with torch.openreg.graph(graph), torch.openreg.use_mem_pool(pool):
        z = x.clone()
    assert pool_segments(pool) == [MiB]
    assert pool.use_count() == 2  # the pool and the graph
    reserved = torch.openreg.memory_reserved()
    del pool
    gc.collect()
    x.fill_(2.0)
    graph.replay()
    assert_close(z.cpu(), torch.full((MiB // 4,), 2.0))
    del z  # back to the pool's cache, which replays write into
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved() == reserved
    graph.reset()
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved() == reserved - MiB


def test_a_pool_made_with_use_on_oom_lends_its_cache_to_allocations_that_run_out_of_memory(run_python,
                                                                                           describe_proc):
    # CUDA splits the lender's block for a smaller request (24 MiB of 48); openreg lends it whole.
    proc = run_python("""
        import torch, openreg_runtime
        for lends in (False, True):
            for mib in (40, 24):
                pool = torch.openreg.MemPool(use_on_oom=lends)
                with torch.openreg.use_mem_pool(pool):
                    torch.empty(48 * 2**20, dtype=torch.uint8, device="openreg")  # freed into the pool's cache
                try:
                    x = torch.full((mib * 2**20,), 7, dtype=torch.uint8, device="openreg")
                    print(lends, mib, "allocated", int(x[-1].item()), len(pool.snapshot()))
                    del x
                except torch.OutOfMemoryError:
                    print(lends, mib, "out of memory", len(pool.snapshot()))
                del pool
    """, env={"OPENREG_DEVICE_MEMORY": "64MiB"})
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.split("\n")[:4] == ["False 40 out of memory 1", "False 24 out of memory 1",
                                           "True 40 allocated 7 1", "True 24 allocated 7 1"]


def test_a_custom_allocator_is_refused_with_the_way_out():
    with pytest.raises(NotImplementedError, match="custom allocator .* pass allocator=None"):
        torch.openreg.MemPool(allocator=object())
    torch.openreg.MemPool(no_split=True)  # openreg never splits a block


def test_running_out_of_memory_during_a_capture_raises_the_out_of_memory_error(run_python, describe_proc):
    """As CUDA's allocator, which then skips freeing its cache (a wait the capture forbids): the error is
    torch.OutOfMemoryError, and the device is usable after."""
    proc = run_python("""
        import torch, openreg_runtime
        held = torch.empty(40 * 2**20, dtype=torch.uint8, device="openreg")
        try:
            with torch.openreg.graph(torch.openreg.OpenRegGraph()):
                torch.empty(40 * 2**20, dtype=torch.uint8, device="openreg")
        except torch.OutOfMemoryError as e:
            print("out of memory", "capturing" if torch.openreg.is_current_stream_capturing() else "not capturing")
        del held
        print(int(torch.full((40 * 2**20,), 3, dtype=torch.uint8, device="openreg")[-1].item()))
    """, env={"OPENREG_DEVICE_MEMORY": "64MiB"})
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.split("\n")[:2] == ["out of memory not capturing", "3"]


def test_a_pool_serves_an_allocation_that_ran_out_of_memory_from_a_larger_block_of_its_own(run_python, describe_proc):
    """CUDA splits the pool's free 48 MiB block for a 24 MiB request; openreg, which never splits, gives it whole
    rather than run out of memory (outside the out-of-memory path a block at most a quarter larger is taken)."""
    proc = run_python("""
        import torch, openreg_runtime
        pool = torch.openreg.MemPool()
        with torch.openreg.use_mem_pool(pool):
            block = torch.empty(48 * 2**20, dtype=torch.uint8, device="openreg")
            address = block.data_ptr()
            del block
            x = torch.full((24 * 2**20,), 5, dtype=torch.uint8, device="openreg")
        print(x.data_ptr() == address, int(x[-1].item()))
    """, env={"OPENREG_DEVICE_MEMORY": "64MiB"})
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.split("\n")[0] == "True 5"
