# SPDX-License-Identifier: Apache-2.0
"""The CUDA driver through ctypes, for tests and benchmarks that run without PyTorch or CuPy: a
current context (kcache uses the caller's), and a raw cuLaunchKernel to compare launches with."""

import ctypes


class Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.check(self.lib.cuInit(0), "cuInit")

    @staticmethod
    def check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed: CUresult {status}")

    def make_primary_context_current(self, ordinal=0):
        """Retains device `ordinal`'s primary context (the one PyTorch and CuPy use) and makes it
        current on the calling thread."""
        device = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
        context = ctypes.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
                   "cuDevicePrimaryCtxRetain")
        self.check(self.lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        return context

    def synchronize(self):
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def load_function(self, ptx_text, name):
        module = ctypes.c_void_p()
        image = ptx_text.encode() + b"\0"
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
        function = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()),
                   "cuModuleGetFunction")
        return function

    def launcher(self, function, grid, block, params, stream=None):
        """A no-argument callable doing one cuLaunchKernel with everything prepared: the floor a
        Python launch can reach through ctypes."""
        launch = self.lib.cuLaunchKernel
        launch.restype = ctypes.c_int
        launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        holders = list(params)
        array = (ctypes.c_void_p * max(1, len(holders)))(
            *[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
        args = (function, grid, 1, 1, block, 1, 1, 0, stream, array, None)

        def call():
            return launch(*args)

        call.keep = (holders, array)
        return call


def driver_or_none():
    try:
        driver = Driver()
        count = ctypes.c_int()
        driver.check(driver.lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        return driver if count.value > 0 else None
    except (OSError, RuntimeError):
        return None
