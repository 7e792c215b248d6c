"""The legacy typed storage classes, ``torch.openreg.FloatStorage`` and the rest, as ``torch.cuda`` has them:
what ``tensor.storage_type()`` returns for an openreg tensor, what ``isinstance(t.storage(), ...)`` checks against,
and a way to make an openreg storage of a dtype (``torch.openreg.FloatStorage(3)``)."""

import torch
from torch._utils import classproperty
from torch.storage import _dtype_to_storage_type_map, _LegacyStorage, _warn_typed_storage_removal


class _OpenRegLegacyStorage(_LegacyStorage):
    """What CUDA's legacy storages refuse, openreg's refuse too: device memory is neither a buffer nor a file."""

    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for openreg storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: Not available for openreg storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: Not available for openreg storage")


def _storage_class(name: str, dtype: torch.dtype) -> type:
    def public_dtype(cls):
        _warn_typed_storage_removal()
        return dtype

    # torch finds a legacy storage's device from the last part of its module's name.
    return type(name, (_OpenRegLegacyStorage,), {"__module__": "torch.openreg", "__qualname__": name,
                                                  "dtype": classproperty(public_dtype),
                                                  "_dtype": classproperty(lambda cls: dtype)})


# CUDA's set: the quantized dtypes have none.
STORAGE_CLASSES = {name: _storage_class(name, dtype) for dtype, name in _dtype_to_storage_type_map().items()
                   if not name.startswith("Q")}
torch._storage_classes.update(STORAGE_CLASSES.values())
