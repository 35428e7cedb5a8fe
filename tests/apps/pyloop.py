#!/usr/bin/env python3
"""pyloop: a Python program that copies to the device until it is stopped.

usage: pyloop.py LIBCUDART [--term-handler]

It loads the CUDA runtime with RTLD_GLOBAL (as torch loads its libraries)
and calls cudaMalloc and cudaMemcpy through ctypes.CDLL(None), which
resolves to a preloaded libvrampool.so when there is one. After its first
copy it prints "ready" and copies on until a signal ends it. Ctrl-C
(SIGINT) ends it the Python way: KeyboardInterrupt unwinds, then Python
sets SIGINT back to SIG_DFL and raises it, so the process dies of SIGINT.

--term-handler installs a SIGTERM handler of its own after the first copy
(after the shim took the signal): it prints "own handler ran" and exits
with status 7. It also prints the handler signal.signal reported as the
previous one, which must be SIG_DFL: the shim's is never shown.
"""
import ctypes
import signal
import sys
import time

ROW = 3072
ROWS = 8
HOST_TO_DEVICE = 1


def main():
    ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
    cuda = ctypes.CDLL(None)
    cuda.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    cuda.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    size = ROW * ROWS
    dev = ctypes.c_void_p()
    if cuda.cudaMalloc(ctypes.byref(dev), size) != 0:
        sys.exit("pyloop: cudaMalloc failed")
    host = ctypes.create_string_buffer(bytes(range(256)) * (size // 256))

    def copy():
        if cuda.cudaMemcpy(dev, host, size, HOST_TO_DEVICE) != 0:
            sys.exit("pyloop: cudaMemcpy failed")

    copy()
    if "--term-handler" in sys.argv[2:]:
        def own(sig, frame):
            print("own handler ran", flush=True)
            sys.exit(7)
        previous = signal.signal(signal.SIGTERM, own)
        print("previous SIGTERM handler:", "SIG_DFL" if previous == signal.SIG_DFL else previous)
    print("ready", flush=True)
    while True:
        copy()
        time.sleep(0.001)


if __name__ == "__main__":
    main()
