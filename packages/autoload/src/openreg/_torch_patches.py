"""Every change openreg makes to torch internals, for torch releases that lack what it needs.

PyTorch's lazy Inductor initialisation: a device module's `_inductor_backend_init` hook runs at the
first Inductor compilation, through every entry point, before the compilation selects its
decomposition table; if it raises, the compilation fails and the next one tries again; once the
device is registered it never runs again. Releases that call the hook say so in
`torch._inductor.codegen.common` (checked by capability, not by version); on the others (2.13, 2.14)
this module gives the same behaviour without importing Inductor at `import torch`:

1. `torch._inductor.compile_fx.compile_fx`, through which torch.compile, direct calls, the C++
   wrapper and AOTInductor all compile, is wrapped when that module is first imported (an import
   watcher on sys.meta_path) to run the hook first. The same wrapper applies `openreg.<key>`
   options to openreg_inductor.config for that compilation, on every release.
2. `torch._TorchCompileInductorWrapper` (torch.compile's Inductor backend) accepts `openreg.<key>`
   options, validated against openreg_inductor.config, and keeps them in its config, so they reach
   compile_fx and take part in Dynamo's comparison of backends.
3. Dynamo: once Dynamo and openreg's layers are both loaded, openreg's device interface is registered
   (public API) and `torch.openreg`'s device and stream functions are entered in Dynamo's trace rules
   as CUDA's are (`get_torch_obj_rule_map`, built once at import), so compiled functions trace them.
   Dynamo's `get_interface_for_device("openreg")`, which answers for CUDA at any time, loads openreg's layers
   when they are not loaded yet (it raised "No interface for device openreg" before the device was used).
4. `torch._inductor.utils`: Inductor emits device guards (and user-stream contexts) only for GPU types
   (`device_need_guard`), and takes any other device for a Triton one (`get_current_backend`). openreg
   gets guards, so a graph on openreg:1 runs there, and is a "cpp" backend, as its kernels are.
   `torch._inductor.lowering` puts a pointwise op on its first GPU-type input's device, else its first input's:
   `cpu_scalar + x` on openreg ran on the CPU and returned a CPU tensor. openreg counts as a GPU type there
   (where `is_gpu` also sends an accumulating `index_put` of dtypes Triton cannot add atomically to ATen's kernel,
   openreg's eager one: the same values).
5. `torch._inductor.scheduler.BaseSchedulerNode.is_cpu` keeps Triton-only fusion steps (loop reindexing)
   away from nodes on the CPU; openreg nodes get the same, their kernels being the CPU's C++. So does the
   default grouping of nodes into combo kernels (`combo_kernels=True`, Triton's), which leaves out the CPU's
   and MPS's: a group of openreg nodes made Inductor fail ("type(self)=<class '...Scheduler'>").
6. `torch._inductor.codecache._get_cpp_wrapper_header` names the header that C++-wrapper and AOTInductor
   builds precompile, by device (`aoti_include/<device>.h`); openreg's wrappers include the CPU's, so that
   is the one precompiled for them.
7. `torch.export.pt2_archive._package._load_aoti`, through which `torch._inductor.aoti_load_package` loads an
   AOTInductor model, finds its runner in a registry that openreg's eager layer fills when it loads; loading
   an openreg package loads openreg's layers first, so that a process may load one before using the device.

Shallow-copy compatibility, which PyTorch main has and 2.13 and 2.14 lack (pytorch/pytorch#116255):

8. `aten::_has_compatible_shallow_copy_type` decides whether `tensor.data = other` may take `other`'s TensorImpl,
   and so whether `nn.Module.to` / `_apply` moves a Parameter's (and its grad's) `.data` or builds a new
   Parameter, untying tied weights and leaving optimizers and held references on the old tensors. Torch counts
   CPU, CUDA, MPS, HIP, XPU, HPU and MTIA as interchangeable dense backends, main PrivateUse1 too. A kernel for
   openreg's keys (AutogradPrivateUse1; PrivateUse1 below autograd and in inference mode), which the dispatcher
   picks whenever an argument is on openreg, gives main's answer: two dense tensors are compatible, anything else
   gets torch's own answer. Not registered where torch already says so for PrivateUse1, asked of storage-less
   tensors (`torch_shallow_copies`), so that the device does not start. The Meta keys' kernels give fake tensors
   the same answer: `x.data = x.data.to("openreg")` in a compiled function failed tracing, where CUDA's compiles.

Host access to device memory, which torch makes through the host pointer for every device but CPU and CUDA:

9. `torch.UntypedStorage._byteswap` (behind `byteswap`, which `torch.load` uses for other-endian files) swaps the
   bytes in place through the data pointer, outside stream order (queued writes land after it) and outside strict
   mode's protection (a fault). An openreg storage is swapped on a host copy, which is then copied back, both
   in stream order.

Sharing between processes, which torch asks of CUDA only (its IPC handles):

10. torch.multiprocessing's reducers (`reduce_tensor`, `reduce_storage`, registered with multiprocessing's
    ForkingPickler) send a storage that is not CUDA's through its CPU file descriptor, which an openreg storage has
    not: a spawned process's argument failed, and a Queue's receiver waited forever while the sender's feeder thread
    printed the error. openreg tensors and storages go to openreg_runtime.multiprocessing instead (shared device
    memory); everything else to torch's reducers, unchanged.

torch.distributed, which picks a default backend for a process group by NCCL's name only:

12. `init_process_group()` (or `new_group()`) with no backend on a machine whose accelerator's backend is a plugin
    (orccl) makes the group's default backend type GLOO, which it does not have: DDP then fails ("Could not find
    backend type 1"). With "cpu:gloo,openreg:orccl" it compares the plugin's upper-case name with lower-case ones
    and leaves the type UNDEFINED (a warning at every destroy_process_group). A group that has a plugin backend and
    no NCCL gets CUSTOM, the type plugins are registered with, as torch means to. Releases that choose the type
    from the group's backends (`_get_default_backend_type_for_backend_config`, 2.14) are left alone: there the
    wrapper also caught groups of gloo alone, which then had no backend of their default type.

DLPack, which torch gives a PrivateUse1 device under its default name only:

13. `torch.Tensor.__dlpack_device__` (behind `torch.from_dlpack(tensor)`) compares the device type with
    "privateuse1", which a renamed backend never is, and raises ValueError for an openreg tensor, whose capsule
    torch's C++ exports and imports as the kDLExtDev device it means for PrivateUse1. An openreg tensor it refuses
    gets (kDLExtDev, index); releases that answer are left to.

Random ops that torch.compile replays, which torch replays on its own devices only:

14. `torch._prims.rng_prims`' `run_and_save_rng_state` and `run_with_rng_state` (the partitioner wraps the random
    ops of a checkpointed region in them, so that the recomputation in the backward draws what the forward drew)
    pick the device's RNG state functions from a table of CPU, CUDA, HPU and XPU: compiling a checkpointed region
    with dropout raised "Backend not supported for openreg". On openreg they save and restore `torch.openreg`'s
    state, as on CUDA, traced by make_fx too (its proxy-mode kernel calls the table's lookup itself).

FlexAttention, which torch runs on the devices it names and Inductor lowers by device type:

15. `torch.nn.attention.flex_attention` refuses devices outside CUDA, CPU, XPU, HPU and MPS (`_validate_device`), and
    Inductor lowers its operator to Triton unless the device is the CPU's or MPS's. On openreg it runs eagerly as
    on CUDA, torch's dense implementation with its backward; compiled, Inductor lowers it with the CPU's C++
    template (openreg's kernels are the CPU's C++), which, as on the CPU, serves inference only: it writes no
    logsumexp unless asked (`_apply_kernel_options`), and inputs that require grad are refused at the call.

Convolution layouts under FakeTensor, which torch predicts for an out-of-tree device as contiguous:

16. FakeTensor's convolution (`torch._subclasses.fake_impls.conv`, behind torch.compile and export) takes the output's
    memory format from the backend `_select_conv_backend` picks, which for openreg is `Overrideable`, always
    contiguous; openreg's convolution is the CPU's, which keeps channels-last (as CUDA's does) when the input or the
    weight is. Compiled code then failed its stride assertion for channels-last models and under Inductor's layout
    optimisation. On openreg the fake convolution is asked as the CPU's, its results' layouts kept.

The device module's hand-over:

11. `torch._register_device_module` refuses a second module for a device. Until openreg's layers load,
    `torch.openreg` is a stand-in; while it is, registering the runtime's device module replaces it.
"""

from __future__ import annotations

import functools
import importlib.machinery
import inspect
import sys
import threading
import types
from collections.abc import Callable
from types import ModuleType

import torch

from . import _compile, _state

_lock = threading.Lock()
_load_layers: Callable[[], None] | None = None  # what install() was given: loads openreg's layers


def torch_calls_hook() -> bool:
    """Whether this torch runs device modules' `_inductor_backend_init` itself (needs Inductor imported)."""
    from torch._inductor.codegen import common

    return calls_hook(common)


def calls_hook(module: ModuleType) -> bool:
    """Whether code of `module` (its functions and its classes' methods) names `_inductor_backend_init`: what the
    code does, whatever its text or comments say."""
    def names_hook(code: types.CodeType) -> bool:
        return "_inductor_backend_init" in code.co_names or any(
            names_hook(c) for c in code.co_consts if isinstance(c, types.CodeType))

    def own(f) -> bool:
        return inspect.isfunction(f) and f.__module__ == module.__name__

    members = list(vars(module).values())
    members += [f for c in members if inspect.isclass(c) and c.__module__ == module.__name__ for f in vars(c).values()]
    return any(names_hook(f.__code__) for f in members if own(f))


def run_hook() -> None:
    """Runs `torch.openreg._inductor_backend_init` unless openreg is registered with Inductor already."""
    from torch._inductor.codegen.common import get_scheduling_for_device

    if get_scheduling_for_device("openreg") is None:
        torch.openreg._inductor_backend_init()


def _replace(holders, name: str, make: Callable) -> None:
    """Replaces function `name` of each of `holders` that still has the original with make(original), once:
    the replacement keeps the original as `_openreg_original`."""
    original = getattr(holders[0], name)
    if getattr(original, "_openreg_original", None):
        return
    patched = functools.wraps(original)(make(original))
    patched._openreg_original = original
    for holder in holders:
        if getattr(holder, name, None) is original:
            setattr(holder, name, patched)


def _compile_fx(original):
    hook = not torch_calls_hook()

    def compile_fx(*args, config_patches=None, **kwargs):
        if hook:
            run_hook()
        config_patches, options = _compile.split_options(config_patches)
        with _compile.options(options):
            return original(*args, config_patches=config_patches, **kwargs)

    compile_fx._openreg_runs_hook = hook
    return compile_fx


def _patch_compile_fx(module: ModuleType) -> None:
    _replace([module], "compile_fx", _compile_fx)


def _apply_options(original):
    def apply_options(self, options):
        options, ours = _compile.split_options(options)
        original(self, options)
        if ours:
            _compile.validate(ours)
            self.config.update({_compile.OPTION_PREFIX + k: v for k, v in ours.items()})

    return apply_options


def _get_compiler_config(original):
    def get_compiler_config(self):
        from torch._inductor.compile_fx import get_patched_config_dict

        return get_patched_config_dict(config_patches=_compile.split_options(self.config)[0])

    return get_compiler_config


def _patch_compile_options() -> None:
    _replace([torch._TorchCompileInductorWrapper], "apply_options", _apply_options)
    _replace([torch._TorchCompileInductorWrapper], "get_compiler_config", _get_compiler_config)


# torch.openreg functions Dynamo handles as it does their torch.accelerator / torch.cuda counterparts
# (same special handler), or evaluates at trace time (constant) where their result cannot change, or
# can only with a guard.
TRACED = {"synchronize": "accelerator.synchronize", "current_stream": "accelerator.current_stream",
          "stream": "cuda.stream"}
CONSTANT = ("device_count", "is_available", "get_device_properties", "get_device_capability", "get_device_name")
GUARDED = ("current_device", "is_initialized")


def dynamo_ready(module: ModuleType | None = None) -> None:
    """Registers openreg with Dynamo, if both Dynamo and openreg's layers are loaded (else later, by whichever
    of the two loads last)."""
    if "torch._dynamo" not in sys.modules or not _state.loaded() or not _compile.register_device_interface():
        return
    from torch._dynamo.trace_rules import get_torch_obj_rule_map
    from torch._dynamo.variables import TorchInGraphFunctionVariable
    from torch._dynamo.variables import torch as torch_variables

    rules, handlers = get_torch_obj_rule_map(), TorchInGraphFunctionVariable._get_handlers()
    for name in (*TRACED, *CONSTANT, *GUARDED):
        rules[getattr(torch.openreg, name)] = TorchInGraphFunctionVariable
    for name, counterpart in TRACED.items():
        module, function = counterpart.split(".")
        handlers[getattr(torch.openreg, name)] = handlers[getattr(getattr(torch, module), function)]
    for name in CONSTANT + GUARDED:
        torch_variables.constant_fold_functions[getattr(torch.openreg, name)] = None
    for name in GUARDED:
        torch_variables.constant_fold_functions_need_guards[getattr(torch.openreg, name)] = None


def _get_interface_for_device(original):
    def get_interface_for_device(device):
        name = device.type if isinstance(device, torch.device) else device
        if name.split(":")[0] == "openreg" and not _state.loaded() and _load_layers is not None:
            try:
                _load_layers()  # registers the interface (dynamo_ready)
            except Exception as exc:  # torch's error, with the reason
                raise NotImplementedError(f"No interface for device {name}: {exc}") from exc
        return original(device)

    return get_interface_for_device


def _patch_device_interface(module: ModuleType) -> None:
    # Also in the modules that imported it by name before openreg was (vars: a module's __getattr__ may load things).
    original = module.get_interface_for_device
    holders = [module, *(m for m in list(sys.modules.values())
                         if m is not module and vars(m).get("get_interface_for_device") is original)]
    _replace(holders, "get_interface_for_device", _get_interface_for_device)


def _device_need_guard(original):
    def device_need_guard(device: str) -> bool:
        return device == "openreg" or original(device)

    return device_need_guard


def _get_current_backend(original):
    def get_current_backend(device_type: str | None = None) -> str:
        if not device_type:
            from torch._inductor.virtualized import V

            device_type = V.graph.get_current_device_or_throw().type
        return "cpp" if device_type == "openreg" else original(device_type)

    return get_current_backend


# Modules that import the patched functions by name, in case they were imported before openreg.
_IMPORTERS = ("torch._inductor.scheduler", "torch._inductor.codegen.common", "torch._inductor.kernel.mm_common")


def _patch_inductor_utils(module: ModuleType) -> None:
    holders = [module, *filter(None, map(sys.modules.get, _IMPORTERS))]
    _replace(holders, "device_need_guard", _device_need_guard)
    _replace(holders, "get_current_backend", _get_current_backend)


def _is_gpu(original):
    def is_gpu(device: str | None) -> bool:
        return device == "openreg" or original(device)

    return is_gpu


def _patch_lowering(module: ModuleType) -> None:
    _replace([module], "is_gpu", _is_gpu)


def _is_cpu(original):
    def is_cpu(self) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", "openreg")

    return is_cpu


def _group_for_combo_kernels(original):
    @functools.wraps(original)
    def group(scheduler):
        return [nodes for nodes in original(scheduler)
                if not any(n.get_device() is not None and n.get_device().type == "openreg" for n in nodes)]

    group._openreg_original = original
    return group


def _patch_scheduler(module: ModuleType) -> None:
    _replace([module.BaseSchedulerNode], "is_cpu", _is_cpu)
    node = module.ForeachKernelSchedulerNode
    # Torch's grouping only: one set with set_group_algorithm_for_combo_kernels is the user's.
    if node.group_algorithm_for_combo_kernels is node._default_group_nodes_for_combo_kernels:
        node.group_algorithm_for_combo_kernels = staticmethod(
            _group_for_combo_kernels(node._default_group_nodes_for_combo_kernels))


def _get_cpp_wrapper_header(original):
    def get_cpp_wrapper_header(device: str, aot_mode: bool = False) -> str:
        return original("cpu" if device.split(":")[0] == "openreg" else device, aot_mode)

    return get_cpp_wrapper_header


def _patch_codecache(module: ModuleType) -> None:
    _replace([module], "_get_cpp_wrapper_header", _get_cpp_wrapper_header)


def _load_aoti(original):
    def load_aoti(file, model_name, *args, **kwargs):
        if not _state.loaded():  # else the package's metadata need not be read twice
            metadata = torch._C._aoti.AOTIModelPackageLoader.load_metadata_from_package(file, model_name)
            if metadata.get("AOTI_DEVICE_KEY") == "openreg" and _load_layers is not None:
                _load_layers()
        return original(file, model_name, *args, **kwargs)

    return load_aoti


def _patch_pt2_archive(module: ModuleType) -> None:
    _replace([module], "_load_aoti", _load_aoti)


class _Storageless(torch.Tensor):
    """Tensors of any device without memory (wrapper subclass): asking torch about a device does not start it."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError  # needed only to exist: the op asked is answered above the Python key


def torch_shallow_copies(device: str = "privateuseone") -> bool:
    """Whether `_has_compatible_shallow_copy_type` pairs a CPU tensor with a dense `device` tensor (for
    PrivateUse1 once installed, openreg's answer)."""
    cpu, other = (torch.Tensor._make_wrapper_subclass(_Storageless, (0,), device=torch.device(d))
                  for d in ("cpu", device))
    return torch._has_compatible_shallow_copy_type(cpu, other)


# PyTorch main's dense backends: a backend's dense key means the Dense functionality and that backend.
_DENSE = tuple(getattr(torch._C.DispatchKey, key)
               for key in ("CPU", "CUDA", "MPS", "HIP", "XPU", "HPU", "MTIA", "PrivateUse1"))
# None until decided; True where torch does it itself; else openreg's kernels, registered while this object lives.
_shallow_copy: torch.library.Library | bool | None = None


def _dense(tensor: torch.Tensor) -> bool:
    return any(map(torch._C._dispatch_keys(tensor).has, _DENSE))


def _has_compatible_shallow_copy_type(self: torch.Tensor, other: torch.Tensor) -> bool:
    if _dense(self) and _dense(other):
        return True
    return torch.ops.aten._has_compatible_shallow_copy_type.default.decompose(self, other)


def _patch_shallow_copy() -> None:
    global _shallow_copy
    if _shallow_copy is not None:
        return
    try:
        _shallow_copy = torch_shallow_copies()
    except Exception:  # a torch that cannot be asked this way gets the kernels: they only add main's rule
        _shallow_copy = False
    if not _shallow_copy:
        _shallow_copy = torch.library.Library("aten", "IMPL")
        for key in ("AutogradPrivateUse1", "PrivateUse1", "AutogradMeta"):
            _shallow_copy.impl("_has_compatible_shallow_copy_type", _has_compatible_shallow_copy_type, key)
        # Fake tensors are asked as meta ones (below autograd too). torch.library refuses a Meta kernel for an op
        # with a CompositeImplicitAutograd one, asking for the ops it decomposes into; this op decomposes into none.
        _shallow_copy.m.impl("_has_compatible_shallow_copy_type", "Meta", _has_compatible_shallow_copy_type, False)


def _byteswap(original):
    def byteswap(self, *args, **kwargs):
        if self.device.type != "openreg":
            return original(self, *args, **kwargs)
        host = self.cpu()
        original(host, *args, **kwargs)
        self.copy_(host)

    return byteswap


def _dlpack_device(original):
    def dlpack_device(self):
        try:
            return original(self)
        except ValueError:
            if self.device.type != "openreg":
                raise
        from torch.utils.dlpack import DLDeviceType

        return DLDeviceType.kDLExtDev, self.device.index

    return dlpack_device


def _reduce_on_openreg(original, name: str):
    def reduce(obj):
        if obj.device.type != "openreg":
            return original(obj)
        from openreg_runtime import multiprocessing

        return getattr(multiprocessing, name)(obj)

    reduce._openreg_original = original
    return reduce


def _patch_multiprocessing() -> None:
    from multiprocessing.reduction import ForkingPickler

    from torch.multiprocessing import reductions

    ours = {reductions.reduce_tensor: "reduce_tensor", reductions.reduce_storage: "reduce_storage"}
    for cls, reducer in list(ForkingPickler._extra_reducers.items()):
        if reducer in ours:
            ForkingPickler.register(cls, _reduce_on_openreg(reducer, ours[reducer]))


def _new_process_group_helper(original):
    signature = inspect.signature(original)

    def new_process_group_helper(*args, **kwargs):
        result = original(*args, **kwargs)
        import torch.distributed as dist

        pg = result[0]
        backend = signature.bind(*args, **kwargs).arguments.get("backend")
        backends = dist.distributed_c10d.BackendConfig(backend).get_device_backend_map().values()
        if (isinstance(pg, dist.ProcessGroup) and dist.Backend.NCCL not in backends
                and any(str(b).upper() in dist.Backend._plugins for b in backends)):
            pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return result

    return new_process_group_helper


def _patch_distributed() -> None:
    import torch.distributed as dist

    # Releases that pick the default type from the group's backends (2.14) need nothing.
    if dist.is_available() and not hasattr(dist.distributed_c10d, "_get_default_backend_type_for_backend_config"):
        _replace([dist.distributed_c10d], "_new_process_group_helper", _new_process_group_helper)


def _save_rng_state(op, *args, **kwargs):
    return torch.openreg.get_rng_state(), op(*args, **kwargs)


def _run_with_rng_state(rng_state, op, *args, **kwargs):
    current = torch.openreg.get_rng_state()
    torch.openreg.set_rng_state(rng_state.cpu())
    try:
        return op(*args, **kwargs)
    finally:
        torch.openreg.set_rng_state(current)


def _flex_validate_device(original):
    def _validate_device(query, key, value) -> None:
        if query.device.type != "openreg":
            return original(query, key, value)
        if torch.compiler.is_dynamo_compiling() and any(t.requires_grad for t in (query, key, value)):
            raise NotImplementedError(
                "FlexAttention compiles on openreg for inference only, as on the CPU, whose C++ template Inductor "
                "uses for it: set the inputs' requires_grad to False, or call flex_attention without torch.compile "
                "(it then runs torch's dense implementation, backward included)."
            )
        return None

    return _validate_device


def _flex_kernel_options(original):
    def _apply_kernel_options(query, key, value, return_lse, kernel_options, return_aux=None):
        options = original(query, key, value, return_lse, kernel_options, return_aux)
        if query.device.type == "openreg" and torch.compiler.is_dynamo_compiling():
            options["OUTPUT_LOGSUMEXP"] = bool(return_lse or (return_aux is not None and return_aux.lse))
        return options

    return _apply_kernel_options


def _patch_flex_attention(module: ModuleType) -> None:
    _replace([module], "_validate_device", _flex_validate_device)
    _replace([module], "_apply_kernel_options", _flex_kernel_options)


def _patch_flex_lowering(module: ModuleType) -> None:
    from torch._inductor.lowering import lowerings

    hop = torch.ops.higher_order.flex_attention
    original = lowerings[hop]
    if getattr(original, "_openreg_original", None):
        return

    @functools.wraps(original)
    def flex_attention(query, *args, **kwargs):
        lower = module.lower_cpu if query.get_device().type == "openreg" else original
        return lower(query, *args, **kwargs)

    flex_attention._openreg_original = original
    lowerings[hop] = flex_attention


def _patch_rng_prims() -> None:
    from torch._C import DispatchKey
    from torch._higher_order_ops.utils import registered_hop_fake_fns
    from torch._prims import rng_prims

    # Per operator: its openreg implementation, how many leading arguments come before the op's own, and whether
    # its fake implementation asks the device (restoring a state is skipped on fake tensors).
    for hop, impl, skip, fake_asks in ((rng_prims.run_and_save_rng_state, _save_rng_state, 1, True),
                                       (rng_prims.run_with_rng_state, _run_with_rng_state, 2, False)):
        if DispatchKey.PrivateUse1 in hop.py_kernels:
            continue

        def on_openreg(original, impl=impl, skip=skip):
            @functools.wraps(original)
            def select(*args, **kwargs):
                on = rng_prims.get_device(args[skip:], kwargs) == "openreg"
                return (impl if on else original)(*args, **kwargs)

            return select

        original = hop.py_kernels[DispatchKey.BackendSelect]
        selection = on_openreg(original)
        hop.py_impl(DispatchKey.PrivateUse1)(impl)
        hop.py_kernels[DispatchKey.BackendSelect] = selection
        # Its proxy-mode kernel (make_fx, torch.compile's partitioner) calls the original by name, from a closure.
        for kernel in hop.python_key_table.values():
            for cell in getattr(kernel, "__closure__", None) or ():
                if cell.cell_contents is original:
                    cell.cell_contents = selection
        if fake_asks:
            registered_hop_fake_fns[hop] = on_openreg(registered_hop_fake_fns[hop])
        hop._dispatch_cache.clear()


def _fake_conv(original):
    @functools.wraps(original)
    def conv(fake_mode, func, *args, **kwargs):
        on = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        device = getattr(on[0], "fake_device", None) if on else None
        # Tensors on more than one device get the original's error.
        if device is None or device.type != "openreg" or any(getattr(t, "fake_device", None) != device for t in on):
            return original(fake_mode, func, *args, **kwargs)
        for t in on:
            t.fake_device = torch.device("cpu")
        try:
            out = original(fake_mode, func, *args, **kwargs)
        finally:
            for t in on:
                t.fake_device = device

        def back(t):
            if t is None:
                return None
            with fake_mode:
                return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)

        return back(out) if isinstance(out, torch.Tensor) else tuple(back(t) for t in out)

    conv._openreg_original = original
    return conv


def _patch_fake_conv(module: ModuleType) -> None:
    for op, impl in list(module.op_implementations_dict.items()):
        if getattr(impl, "__name__", "") == "conv" and not getattr(impl, "_openreg_original", None):
            module.op_implementations_dict[op] = _fake_conv(impl)


WATCHED: dict[str, Callable[[ModuleType], None]] = {
    "torch._inductor.compile_fx": _patch_compile_fx,
    "torch._inductor.utils": _patch_inductor_utils,
    "torch._inductor.lowering": _patch_lowering,
    "torch._inductor.scheduler": _patch_scheduler,
    "torch._inductor.codecache": _patch_codecache,
    "torch.export.pt2_archive._package": _patch_pt2_archive,
    "torch._dynamo": dynamo_ready,
    "torch._dynamo.device_interface": _patch_device_interface,
    "torch.nn.attention.flex_attention": _patch_flex_attention,
    "torch._inductor.kernel.flex.flex_attention": _patch_flex_lowering,
    "torch._subclasses.fake_impls": _patch_fake_conv,
}


class _Watcher:
    """A sys.meta_path finder that runs WATCHED[name](module) right after module `name` is first imported.
    (Not an importlib.abc.MetaPathFinder: importing importlib.abc would cost `import torch` milliseconds.)"""

    def find_spec(self, name, path, target=None):
        if name not in WATCHED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            WATCHED[name](module)

        spec.loader.exec_module = exec_and_patch  # this spec's own loader instance
        return spec


def install(load_layers: Callable[[], None]) -> None:
    """Installs the patches (idempotent); cheap: nothing of Dynamo or Inductor is imported, the device not started.
    `load_layers` loads openreg's layers (patch 7 needs them before an openreg package loads)."""
    global _load_layers
    with _lock:
        _load_layers = load_layers
        _patch_compile_options()
        _patch_shallow_copy()
        _replace([torch.UntypedStorage], "_byteswap", _byteswap)
        _replace([torch.Tensor], "__dlpack_device__", _dlpack_device)
        _patch_multiprocessing()
        _patch_distributed()
        _patch_rng_prims()
        if not any(isinstance(finder, _Watcher) for finder in sys.meta_path):
            sys.meta_path.insert(0, _Watcher())
        for name, patch in WATCHED.items():
            if name in sys.modules:  # imported before openreg was
                patch(sys.modules[name])


def hand_over_device_module(stand_in: ModuleType, adopt: Callable[[ModuleType], None]) -> None:
    """Patch 11: for as long as `stand_in` is `torch.openreg`, registering another module for the device replaces
    it (the runtime registers its own when imported, and torch refuses a second module for a device); `adopt`
    then gets the new module."""
    original = torch._register_device_module
    if getattr(original, "_openreg_original", None):
        return

    def _register_device_module(device_type, module):
        current = torch.__dict__.get("openreg")
        if current is stand_in and module is not stand_in and torch.device(device_type).type == "openreg":
            del torch.openreg
            sys.modules.pop("torch.openreg", None)
            torch._register_device_module = original
            original(device_type, module)
            adopt(module)
        else:
            original(device_type, module)

    _register_device_module._openreg_original = original
    _register_device_module.__doc__ = original.__doc__
    torch._register_device_module = _register_device_module
