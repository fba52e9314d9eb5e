"""A stand-in for the parts of PyTorch that peakline.gpu_torch reads (tests/python/test_gpu.py).

``torch.cuda`` keeps an "allocated" counter and, once ``_record_memory_history`` was called, a
trace in the format of ``torch.cuda.memory._snapshot()["device_traces"]`` (frames innermost
first, as PyTorch records them). ``cuda.alloc(nbytes)`` / ``cuda.free(handle)`` play the caching
allocator; ``cuda.init()`` initialises "CUDA" and runs the ``_lazy_call`` queue like PyTorch.
Set FAKE_TORCH_NO_HISTORY=1 for a torch whose allocation history is unavailable.
"""
from . import cuda  # noqa: F401
