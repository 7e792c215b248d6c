"""Devices: count, current device, selection, properties, torch.accelerator."""

import re
import threading
import time

import pytest
import torch
from torch.testing import assert_close

VALID_RANGE = re.compile(r"0 to 1|0\s*\.\.\s*1|0\s*-\s*1|\[0,\s*2\)|\[0,\s*1\]")


# --- configuration (fresh processes: it is parsed once per process) ---------


def test_default_device_count_is_two(run_python, describe_proc):
    proc = run_python("""
        import torch, openreg_runtime
        print(torch.openreg.device_count(), torch.accelerator.device_count(), torch.openreg.is_initialized())
        torch.ones(1, device='openreg')
        print(torch.openreg.is_initialized())
    """)
    assert proc.returncode == 0, describe_proc(proc)
    # Starts lazily: nothing is initialised until the first tensor.
    assert proc.stdout.split() == ["2", "2", "False", "True"]


def test_device_count_from_environment(run_python, describe_proc):
    proc = run_python(
        """
        import torch, openreg_runtime
        t = torch.ones(2, device='openreg:3')
        print(torch.openreg.device_count(), t.device, t.cpu().tolist())
        """,
        env={"OPENREG_DEVICE_COUNT": "4"},
    )
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.split() == ["4", "openreg:3", "[1.0,", "1.0]"]


BAD_SETTINGS = [
    ("OPENREG_DEVICE_COUNT", "abc"), ("OPENREG_DEVICE_MEMORY", "lots"), ("OPENREG_DEVICE_COUNT", "0"),
    ("OPENREG_DEVICE_MEMORY", "0"), ("OPENREG_DEVICE_MEMORY", "12XB"), ("OPENREG_STRICT", "maybe"),
    # these overflowed 64 bits (to 1 TiB and 13 EiB) and were accepted
    ("OPENREG_DEVICE_MEMORY", "16777217TiB"), ("OPENREG_DEVICE_MEMORY", "99999999999GiB"),
    ("OPENREG_DEVICE_MEMORY", "129TiB"), ("OPENREG_DEVICE_MEMORY", "99999999999999999999999"),
]


@pytest.mark.parametrize("variable, value", BAD_SETTINGS)
def test_bad_environment_value_is_an_error_naming_the_variable(run_python, describe_proc, variable, value):
    # `import torch` must survive; is_available() answers False without raising, as torch.cuda's does when CUDA
    # cannot start; using the device fails with a clear message.
    proc = run_python(
        """
        import sys, torch, openreg_runtime
        assert torch.openreg.is_available() is False
        try:
            torch.ones(1, device='openreg').cpu()
        except Exception as e:
            print('ERROR', type(e).__name__, e)
            sys.exit(3)
        print('NO ERROR')
        """,
        env={variable: value},
    )
    assert proc.returncode == 3, describe_proc(proc)
    assert variable in proc.stdout
    assert value in proc.stdout


@pytest.mark.parametrize("size, warns", [("100TiB", True), ("1GiB", False)])
def test_a_capacity_beyond_the_hosts_memory_warns(run_python, describe_proc, size, warns):
    proc = run_python(
        """
        import warnings, torch, openreg_runtime
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.ones(1, device="openreg").cpu()
        print([str(w.message) for w in caught if "OPENREG_DEVICE_MEMORY" in str(w.message)])
        """,
        env={"OPENREG_DEVICE_MEMORY": size},
    )
    assert proc.returncode == 0, describe_proc(proc)
    assert ("out-of-memory killer" in proc.stdout) == warns, describe_proc(proc)


def test_device_memory_size_from_environment(run_python, describe_proc):
    proc = run_python(
        """
        import torch, openreg_runtime
        print(torch.openreg.get_device_properties(0).total_memory, torch.openreg.mem_get_info(1)[1])
        """,
        env={"OPENREG_DEVICE_MEMORY": "512MiB"},
    )
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.split() == [str(512 * 2**20)] * 2


# --- current device ----------------------------------------------------------


def test_set_device_changes_where_tensors_go(two_devices):
    assert torch.openreg.current_device() == 0
    assert torch.empty(1, device="openreg").device == torch.device("openreg:0")
    torch.openreg.set_device(1)
    assert torch.openreg.current_device() == 1
    assert torch.empty(1, device="openreg").device == torch.device("openreg:1")
    torch.openreg.set_device("openreg:0")
    assert torch.openreg.current_device() == 0
    torch.openreg.set_device(torch.device("openreg", 1))
    assert torch.openreg.current_device() == 1


def test_device_context_manager_restores_previous_device(two_devices):
    with torch.openreg.device(1):
        assert torch.openreg.current_device() == 1
        t = torch.zeros(3, device="openreg")
        with torch.openreg.device(0):
            assert torch.openreg.current_device() == 0
        assert torch.openreg.current_device() == 1
    assert torch.openreg.current_device() == 0
    assert t.device == torch.device("openreg:1")


def test_device_context_manager_restores_on_exception(two_devices):
    with pytest.raises(KeyError):
        with torch.openreg.device(1):
            raise KeyError("x")
    assert torch.openreg.current_device() == 0


def test_torch_device_as_context_manager_sets_factory_default(two_devices):
    with torch.device("openreg:1"):
        t = torch.ones(2, 2)
        e = torch.empty(3)
    assert t.device == torch.device("openreg:1")
    assert e.device == torch.device("openreg:1")
    assert_close(t.cpu(), torch.ones(2, 2))
    assert torch.empty(1).device == torch.device("cpu")


def test_current_device_is_per_thread(two_devices):
    torch.openreg.set_device(1)
    seen = {}

    def worker():
        seen["initial"] = torch.openreg.current_device()
        torch.openreg.set_device(1)
        seen["after_set"] = torch.openreg.current_device()
        seen["tensor"] = torch.empty(1, device="openreg").device

    def other():
        seen["other"] = torch.openreg.current_device()

    for fn in (worker, other):
        t = threading.Thread(target=fn)
        t.start()
        t.join(30)
    assert seen == {"initial": 0, "after_set": 1, "tensor": torch.device("openreg:1"), "other": 0}
    assert torch.openreg.current_device() == 1
    torch.openreg.set_device(0)


@pytest.mark.parametrize("index", [2, 7, -5, 2**20, -(2**30)])
def test_invalid_index_names_valid_range(two_devices, index):
    if torch.openreg.device_count() != 2:
        pytest.fail("the message check assumes the default of 2 devices")
    with pytest.raises(RuntimeError) as info:
        torch.openreg.set_device(index) if index >= 0 else torch.openreg.memory_stats(index)
    assert VALID_RANGE.search(str(info.value)), str(info.value)
    assert torch.openreg.current_device() == 0


# Each takes a device index; none may reach memory unchecked (2**20 was a segfault, or device 0 through an 8-bit
# index), and none may answer for a device that does not exist.
INDEXED = ["current_stream", "default_stream", "memory_stats", "memory_allocated", "max_memory_reserved",
           "reset_peak_memory_stats", "empty_cache", "mem_get_info", "get_rng_state", "get_device_name",
           "get_device_properties", "Stream"]


@pytest.mark.parametrize("index", [2, 7, -5, 2**20, -(2**30)])
def test_every_entry_point_checks_its_device_index(run_python, describe_proc, index):
    proc = run_python(f"""
        import torch, openreg_runtime
        for name in {INDEXED!r}:
            try:
                getattr(torch.openreg, name)({index})
            except RuntimeError as e:
                assert "out of range" in str(e), (name, e)
            else:
                raise AssertionError(name + " accepted device {index}")
        print("OK")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "OK", describe_proc(proc)


def test_a_device_index_out_of_range_raises_an_accelerator_error():
    """CUDA raises torch.AcceleratorError (a RuntimeError: "invalid device ordinal") for an index that names no
    device, from Python's entry points and from a factory alike."""
    for call in (lambda: torch.openreg.set_device(2), lambda: torch.empty(1, device="openreg:2"),
                 lambda: torch.accelerator.set_device_index(2),
                 lambda: torch.ones(1, device="openreg").to("openreg:5")):
        with pytest.raises(torch.AcceleratorError, match="openreg device index [25] is out of range"):
            call()


def test_minus_one_is_the_current_device_and_a_negative_device_context_selects_nothing(two_devices):
    torch.openreg.set_device(1)
    assert torch.openreg.current_stream(-1).device_index == 1
    assert torch.openreg.memory_stats(-1) == torch.openreg.memory_stats(1)
    torch.openreg.set_device(-1)  # as torch.cuda.set_device(-1): nothing
    with torch.openreg.device(-1):
        assert torch.openreg.current_device() == 1
    assert torch.openreg.current_device() == 1


def test_synchronize_with_a_negative_index_waits_for_the_current_device_only(two_devices):
    torch.zeros(1, device="openreg:1")
    with torch.openreg.device(1):
        torch.openreg._sleep(300_000_000)
    start = time.perf_counter()
    torch.openreg.synchronize(-5)
    assert time.perf_counter() - start < 0.25, "synchronize(-5) waited for device 1"
    assert not torch.openreg.default_stream(1).query()
    torch.openreg.synchronize(1)


def test_a_stream_context_that_fails_to_enter_changes_nothing(two_devices):
    bad = torch.openreg.Stream(stream_id=500, device_index=1, device_type=torch.openreg.default_stream().device_type)
    with pytest.raises(RuntimeError, match="stream id 500"):
        with torch.openreg.stream(bad):
            pass
    assert torch.openreg.current_device() == 0
    assert torch.openreg.current_stream(1).stream_id == 0


@pytest.mark.parametrize("call", ["empty", "device_cm", "name", "properties"])
def test_invalid_index_in_other_entry_points(two_devices, call):
    with pytest.raises((RuntimeError, ValueError, IndexError)) as info:
        if call == "empty":
            torch.empty(1, device="openreg:5")
        elif call == "device_cm":
            with torch.openreg.device(5):
                pass
        elif call == "name":
            torch.openreg.get_device_name(5)
        else:
            torch.openreg.get_device_properties(5)
    assert VALID_RANGE.search(str(info.value)), str(info.value)
    assert torch.openreg.current_device() == 0


# --- torch.openreg surface -------------------------------------------------------


def test_torch_openreg_surface(two_devices):
    assert torch.openreg.is_available() is True
    assert torch.openreg.device_count() >= 2
    name = torch.openreg.get_device_name(1)
    assert isinstance(name, str) and name
    assert torch.openreg.get_device_name() == torch.openreg.get_device_name(0)
    props = torch.openreg.get_device_properties(1)
    assert props.total_memory == torch.openreg.mem_get_info(1)[1] > 0
    assert props.name == name
    assert torch.openreg.is_bf16_supported() is True
    amp = torch.openreg.get_amp_supported_dtype()
    assert torch.bfloat16 in amp
    assert all(isinstance(d, torch.dtype) for d in amp)


def test_device_of_selects_the_device_of_an_openreg_tensor_or_storage_only(two_devices):
    on_one = torch.ones(2, device="openreg:1")
    for obj in (on_one, on_one.untyped_storage()):
        with torch.openreg.device_of(obj):
            assert torch.openreg.current_device() == 1
            assert torch.ones(1, device="openreg").device == torch.device("openreg:1")
        assert torch.openreg.current_device() == 0
    torch.openreg.set_device(1)
    with torch.openreg.device_of(torch.ones(2)):  # a CPU tensor: nothing changes, as torch.cuda.device_of's
        assert torch.openreg.current_device() == 1


def test_can_device_access_peer_is_cudas_for_devices_that_share_the_hosts_memory(two_devices):
    assert torch.openreg.can_device_access_peer(0, 1) is True
    assert torch.openreg.can_device_access_peer("openreg:1", torch.device("openreg:0")) is True
    assert torch.openreg.can_device_access_peer(1, 1) is False  # cudaDeviceCanAccessPeer's answer for itself
    with pytest.raises(AssertionError, match=r"Invalid peer device id: .*index 5 is out of range"):
        torch.openreg.can_device_access_peer(0, 5)
    with pytest.raises(AssertionError, match=r"Invalid device id: .*index 7 is out of range"):
        torch.openreg.can_device_access_peer(7, 0)


def test_what_openreg_answers_for_cudas_queries_about_itself():
    assert torch.openreg.is_tf32_supported() is False
    assert torch.openreg.get_allocator_backend() == "native"


def test_is_bf16_supported_matches_bfloat16_tensors():
    t = torch.full((3,), 1.5, dtype=torch.bfloat16, device="openreg")
    assert_close(t.cpu(), torch.full((3,), 1.5, dtype=torch.bfloat16))


def test_synchronize_waits_for_queued_work():
    start = time.perf_counter()
    torch.openreg._sleep(200_000_000)
    queued = time.perf_counter() - start
    torch.openreg.synchronize()
    total = time.perf_counter() - start
    assert queued < 0.15, "_sleep should only queue work"
    assert total >= 0.19


def test_synchronize_specific_device(two_devices):
    with torch.openreg.device(1):
        torch.openreg._sleep(200_000_000)
    start = time.perf_counter()
    torch.openreg.synchronize(1)
    assert time.perf_counter() - start >= 0.15
    assert torch.openreg.current_stream(1).query()


# --- torch.accelerator ---------------------------------------------------------


def test_accelerator_is_openreg(two_devices):
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("openreg")
    assert torch.accelerator.device_count() == torch.openreg.device_count()


def test_set_device_needs_an_index_as_cudas(two_devices):
    """torch.cuda.set_device (and the memory fraction and caching_allocator_alloc) refuse a device without an index,
    which openreg took silently; the functions that read "the current device" from one still take it."""
    torch.openreg.set_device(1)
    for call in (lambda: torch.openreg.set_device("openreg"),
                 lambda: torch.openreg.set_device(torch.device("openreg")),
                 lambda: torch.openreg.set_per_process_memory_fraction(0.5, "openreg"),
                 lambda: torch.openreg.get_per_process_memory_fraction("openreg")):
        with pytest.raises(ValueError, match="^Expected a torch.device with a specified index or an integer"):
            call()
    assert torch.openreg.current_device() == 1
    assert torch.openreg.memory_allocated("openreg") == torch.openreg.memory_allocated(1)
    with torch.openreg.device("openreg"):
        assert torch.openreg.current_device() == 1


def test_accelerator_set_device_index(two_devices):
    torch.accelerator.set_device_index(1)
    assert torch.openreg.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    assert torch.empty(1, device="openreg").device == torch.device("openreg:1")
    torch.accelerator.set_device_index(0)
    assert torch.openreg.current_device() == 0


def test_accelerator_streams(two_devices):
    cur = torch.accelerator.current_stream()
    assert cur.device == torch.device("openreg:0")
    assert cur.stream_id == torch.openreg.current_stream().stream_id == 0
    s = torch.openreg.Stream()
    torch.accelerator.set_stream(s)
    assert torch.openreg.current_stream().stream_id == s.stream_id
    assert torch.accelerator.current_stream().stream_id == s.stream_id
    torch.accelerator.set_stream(torch.openreg.default_stream())
    assert torch.openreg.current_stream().stream_id == 0


def test_accelerator_synchronize_waits():
    torch.openreg._sleep(200_000_000)
    start = time.perf_counter()
    torch.accelerator.synchronize()
    assert time.perf_counter() - start >= 0.15
    assert torch.openreg.current_stream().query()


def test_benchmark_timer_synchronizes_openreg():
    from torch.utils.benchmark import Timer

    x = torch.zeros(1024, device="openreg")
    m = Timer(stmt="x.fill_(1.0)", globals={"x": x}).timeit(20)
    assert m.mean > 0
    # The timer synchronises the accelerator, so queued device time is measured.
    m = Timer(stmt="torch.openreg._sleep(20_000_000)", globals={"torch": torch}).timeit(5)
    assert m.mean >= 0.018
    assert_close(x.cpu(), torch.ones(1024))


# --- generated methods ----------------------------------------------------------


def test_tensor_openreg_method(two_devices):
    cpu = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    a = cpu.openreg()
    b = cpu.openreg(1)
    assert a.device == torch.device("openreg:0")
    assert b.device == torch.device("openreg:1")
    assert a.is_openreg and b.is_openreg and not cpu.is_openreg
    assert_close(a.cpu(), cpu)
    assert_close(b.cpu(), cpu)


def test_module_openreg_method(two_devices):
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    ref = {k: v.clone() for k, v in m.state_dict().items()}
    m.openreg(1)
    for k, v in m.state_dict().items():
        assert v.device == torch.device("openreg:1"), k
        assert_close(v.cpu(), ref[k])
    m.cpu()
    for k, v in m.state_dict().items():
        assert_close(v, ref[k])


def test_storage_openreg_methods(two_devices):
    cpu = torch.arange(4, dtype=torch.float32)
    s = cpu.untyped_storage().openreg()
    assert s.is_openreg and s.device == torch.device("openreg:0")
    assert not cpu.untyped_storage().is_openreg
    assert s.cpu().tolist() == cpu.untyped_storage().tolist()
    s1 = cpu.untyped_storage().openreg(1)
    assert s1.device == torch.device("openreg:1")
    assert s1.cpu().tolist() == cpu.untyped_storage().tolist()
    t = torch.empty(0, device="openreg:1").set_(s1, 0, (4,), (1,))
    assert_close(t.cpu(), cpu)


def test_accelerator_device_capability_lists_the_dtypes_that_convert_to_each_other(two_devices):
    held = {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool, torch.float16, torch.bfloat16}
    held |= {torch.float32, torch.float64, torch.complex32, torch.complex64, torch.complex128}
    held |= {torch.uint16, torch.uint32, torch.uint64, torch.float8_e5m2, torch.float8_e4m3fn}
    held |= {torch.float8_e5m2fnuz, torch.float8_e4m3fnuz, torch.float8_e8m0fnu}
    quantized = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}
    try:  # quantized tensors come with openreg-eager
        torch.quantize_per_tensor(torch.ones(1, device="openreg:1"), 1.0, 0, torch.qint8)
        made = quantized
    except NotImplementedError:
        made = set()
    for device in (None, "openreg:1", 1):
        assert set(torch.accelerator.get_device_capability(device)["supported_dtypes"]) == held | made
    for source in held:
        x = torch.ones(4, dtype=source, device="openreg:1")
        for target in held:
            assert x.to(target).cpu().tolist() == torch.ones(4, dtype=source).to(target).tolist(), (source, target)
    with pytest.raises(RuntimeError, match="openreg"):
        torch.accelerator.get_device_capability(5)
