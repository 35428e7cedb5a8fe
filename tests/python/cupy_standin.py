"""A stand-in for the few CuPy calls tests/python/cupy_loop.py makes, for
the emulated device, where CuPy itself cannot start: the CUDA runtime that
CuPy embeds (statically linked into cupy_backends/cuda/api/runtime) asks
the driver for NVIDIA's private export tables before its first call, and
the emulated device hands out none (tests/fakecuda/README.md). Real CuPy
runs the same loop on a GPU (tests/gpu/cupy_loop.py).

It reaches the driver by the route CuPy's embedded runtime takes, as traced
with cupy-cuda13x 14.2.0: dlopen("libcuda.so.1"), dlsym(handle,
"cuGetProcAddress_v2"), then each entry point through cuGetProcAddress_v2
by base name, flags 0, with the CUDA version the runtime passes for it
(cuMemcpyHtoDAsync 3020, cuMemcpyAsync 4000, cuMemHostAlloc 2020, ...).
A preloaded shim therefore sees exactly what it sees under CuPy: the
dlsym on an explicit handle, the look-ups, the calls.

What it offers follows CuPy's documented behaviour for these calls only:
  cuda.Stream(non_blocking), .synchronize(), `with stream:` (current stream)
  cuda.Event(), .record(stream), .synchronize(), cuda.get_elapsed_time(a, b)
  cuda.runtime.getDeviceCount()
  empty(shape, dtype) -> ndarray: .set(host, stream), .get(stream, out, blocking)
  asarray(host) -> ndarray, copied on the current stream without waiting
                   (cuMemcpyAsync; CuPy's default blocking=False)
  empty_pinned(shape, dtype) -> numpy array in page-locked memory
As with CuPy's non-blocking copies, the caller leaves a source unchanged
and a destination unread until the stream has done the copy.
"""
import ctypes
import os
import threading
import weakref

import numpy

uint8 = numpy.uint8

_c = ctypes
_CUdeviceptr = _c.c_uint64
_VP = _c.c_void_p
_PROTOS = {
    # base name: (version the runtime asks with, argument types)
    "cuInit": (2000, [_c.c_uint]),
    "cuDeviceGetCount": (2000, [_c.POINTER(_c.c_int)]),
    "cuDeviceGet": (2000, [_c.POINTER(_c.c_int), _c.c_int]),
    "cuDevicePrimaryCtxRetain": (7000, [_c.POINTER(_VP), _c.c_int]),
    "cuCtxSetCurrent": (4000, [_VP]),
    "cuCtxSynchronize": (2000, []),
    "cuMemAlloc": (3020, [_c.POINTER(_CUdeviceptr), _c.c_size_t]),
    "cuMemFree": (3020, [_CUdeviceptr]),
    "cuMemHostAlloc": (2020, [_c.POINTER(_VP), _c.c_size_t, _c.c_uint]),
    "cuMemFreeHost": (2000, [_VP]),
    "cuStreamCreate": (2000, [_c.POINTER(_VP), _c.c_uint]),
    "cuStreamSynchronize": (2000, [_VP]),
    "cuStreamDestroy": (4000, [_VP]),
    "cuMemcpyHtoDAsync": (3020, [_CUdeviceptr, _VP, _c.c_size_t, _VP]),
    "cuMemcpyDtoHAsync": (3020, [_VP, _CUdeviceptr, _c.c_size_t, _VP]),
    "cuMemcpyAsync": (4000, [_CUdeviceptr, _CUdeviceptr, _c.c_size_t, _VP]),
    "cuEventCreate": (2000, [_c.POINTER(_VP), _c.c_uint]),
    "cuEventRecord": (2000, [_VP, _VP]),
    "cuEventSynchronize": (2000, [_VP]),
    "cuEventElapsedTime": (2000, [_c.POINTER(_c.c_float), _VP, _VP]),
    "cuEventDestroy": (4000, [_VP]),
}


class CUDADriverError(RuntimeError):
    pass


class _Driver:
    """The driver's entry points, found once, and the primary context."""

    def __init__(self):
        lib = _c.CDLL("libcuda.so.1", mode=os.RTLD_NOW)
        gpa = lib.cuGetProcAddress_v2
        gpa.restype = _c.c_int
        gpa.argtypes = [_c.c_char_p, _c.POINTER(_VP), _c.c_int, _c.c_uint64, _c.POINTER(_c.c_int)]
        self.fn = {}
        for name, (version, argtypes) in _PROTOS.items():
            p, status = _VP(), _c.c_int()
            r = gpa(name.encode(), _c.byref(p), version, 0, _c.byref(status))
            if r != 0 or not p.value:
                raise CUDADriverError("cuGetProcAddress_v2(%s, %d): CUresult %d" % (name, version, r))
            f = _c.CFUNCTYPE(_c.c_int, *argtypes)(p.value)
            self.fn[name] = f
        self.call("cuInit", 0)
        dev, ctx = _c.c_int(), _VP()
        self.call("cuDeviceGet", _c.byref(dev), 0)
        self.call("cuDevicePrimaryCtxRetain", _c.byref(ctx), dev)
        self.ctx = ctx
        self.bind()

    def bind(self):
        """Makes the primary context current on this thread (the runtime
        does so at the first call of each thread)."""
        self.call("cuCtxSetCurrent", self.ctx)

    def call(self, name, *args):
        r = self.fn[name](*args)
        if r != 0:
            raise CUDADriverError("%s: CUresult %d" % (name, r))


_drv = None
_lock = threading.Lock()
_tls = threading.local()


def _d():
    global _drv
    with _lock:
        if _drv is None:
            _drv = _Driver()
    if not getattr(_tls, "bound", False):
        _drv.bind()
        _tls.bound = True
    return _drv


class _Runtime:
    @staticmethod
    def getDeviceCount():
        n = _c.c_int()
        _d().call("cuDeviceGetCount", _c.byref(n))
        return n.value


class Stream:
    """A stream; non_blocking streams do not wait for the legacy stream."""

    def __init__(self, non_blocking=False):
        h = _VP()
        _d().call("cuStreamCreate", _c.byref(h), 1 if non_blocking else 0)
        self.ptr = h.value
        weakref.finalize(self, _release, "cuStreamDestroy", _VP(self.ptr))

    def synchronize(self):
        _d().call("cuStreamSynchronize", _VP(self.ptr))

    def __enter__(self):
        _tls.stack = getattr(_tls, "stack", []) + [self]
        return self

    def __exit__(self, *exc):
        _tls.stack.pop()


class _Legacy:
    ptr = 0

    def synchronize(self):
        _d().call("cuStreamSynchronize", _VP(0))


def get_current_stream():
    stack = getattr(_tls, "stack", [])
    return stack[-1] if stack else _Legacy()


class Event:
    def __init__(self, disable_timing=False):
        h = _VP()
        _d().call("cuEventCreate", _c.byref(h), 2 if disable_timing else 0)
        self.ptr = h.value
        weakref.finalize(self, _release, "cuEventDestroy", _VP(self.ptr))

    def record(self, stream=None):
        s = stream if stream is not None else get_current_stream()
        _d().call("cuEventRecord", _VP(self.ptr), _VP(s.ptr))

    def synchronize(self):
        _d().call("cuEventSynchronize", _VP(self.ptr))


def get_elapsed_time(start, end):
    ms = _c.c_float()
    _d().call("cuEventElapsedTime", _c.byref(ms), _VP(start.ptr), _VP(end.ptr))
    return ms.value


def _release(name, handle):
    # At interpreter exit the driver may already be gone: nothing to do then.
    try:
        _drv.fn[name](handle)
    except Exception:
        pass


class _Cuda:
    Stream = Stream
    Event = Event
    runtime = _Runtime
    get_elapsed_time = staticmethod(get_elapsed_time)
    get_current_stream = staticmethod(get_current_stream)


cuda = _Cuda


def _host_ptr(a):
    if not a.flags["C_CONTIGUOUS"]:
        raise ValueError("the stand-in copies C-contiguous host arrays only")
    return a.ctypes.data


class ndarray:
    """Device memory of one C-contiguous array."""

    def __init__(self, shape, dtype):
        self.shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        self.dtype = numpy.dtype(dtype)
        self.nbytes = int(numpy.prod(self.shape)) * self.dtype.itemsize
        p = _CUdeviceptr()
        _d().call("cuMemAlloc", _c.byref(p), max(self.nbytes, 1))
        self.ptr = p.value
        weakref.finalize(self, _free_device, self.ptr)

    def set(self, arr, stream=None):
        """Copies arr in; asynchronous on stream when one is given, else
        synchronous on the current stream (CuPy's ndarray.set)."""
        if arr.nbytes != self.nbytes:
            raise ValueError("shape mismatch: %d bytes into %d" % (arr.nbytes, self.nbytes))
        s = stream if stream is not None else get_current_stream()
        _d().call("cuMemcpyHtoDAsync", self.ptr, _VP(_host_ptr(arr)), self.nbytes, _VP(s.ptr))
        if stream is None:
            s.synchronize()

    def get(self, stream=None, out=None, blocking=True):
        """Copies the array out (into out when given) on stream, else the
        current stream; waits for it unless blocking is False (CuPy's
        ndarray.get: asynchronous only into pinned memory)."""
        if out is None:
            out = numpy.empty(self.shape, self.dtype)
        if out.nbytes != self.nbytes:
            raise ValueError("shape mismatch: %d bytes into %d" % (self.nbytes, out.nbytes))
        s = stream if stream is not None else get_current_stream()
        _d().call("cuMemcpyDtoHAsync", _VP(_host_ptr(out)), self.ptr, self.nbytes, _VP(s.ptr))
        if blocking:
            s.synchronize()
        return out


def _free_device(ptr):
    # Work still queued may read the memory: let the device finish first.
    try:
        _drv.fn["cuCtxSynchronize"]()
        _drv.fn["cuMemFree"](_CUdeviceptr(ptr))
    except Exception:
        pass


def empty(shape, dtype=numpy.float64):
    return ndarray(shape, dtype)


def asarray(a):
    """A device copy of host array a, made on the current stream with
    cuMemcpyAsync (unified addressing; what cudaMemcpyAsync with
    cudaMemcpyDefault does), not waited for."""
    a = numpy.ascontiguousarray(a)
    d = ndarray(a.shape, a.dtype)
    s = get_current_stream()
    _d().call("cuMemcpyAsync", d.ptr, _host_ptr(a), d.nbytes, _VP(s.ptr))
    d._source = a  # kept alive until the array goes
    return d


def empty_pinned(shape, dtype=numpy.float64):
    """A numpy array in page-locked memory from cuMemHostAlloc (CuPy's
    cupyx.empty_pinned), freed when the last view of it goes."""
    dtype = numpy.dtype(dtype)
    n = int(numpy.prod(shape)) * dtype.itemsize
    p = _VP()
    _d().call("cuMemHostAlloc", _c.byref(p), max(n, 1), 0)
    buf = (_c.c_uint8 * max(n, 1)).from_address(p.value)
    weakref.finalize(buf, _release, "cuMemFreeHost", _VP(p.value))
    return numpy.frombuffer(buf, dtype, count=int(numpy.prod(shape))).reshape(shape)
