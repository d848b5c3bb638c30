# SPDX-License-Identifier: Apache-2.0
"""Launches on a GPU, on PyTorch tensors and CuPy arrays, against references computed by
PyTorch and numpy. Each test skips without its library or a GPU."""

import ctypes
import threading

import pytest

import kcache
import kernels
from cuda_context import driver_or_none

np = pytest.importorskip("numpy")

DRIVER = driver_or_none()
needs_gpu = pytest.mark.skipif(DRIVER is None, reason="no CUDA driver or GPU")


def torch_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    torch.zeros(1, device="cuda")  # makes the primary context current on this thread
    return torch


def cupy_or_skip():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("CuPy sees no GPU")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("CuPy sees no GPU")
    cupy.zeros(1)
    return cupy


def ptx(text):
    return lambda: kcache.Source.ptx(text)


def blocks(n, block=256):
    return (n + block - 1) // block


@pytest.fixture
def cache(disk):
    return kcache.KernelCache(disk_directory=disk)


@needs_gpu
def test_residual_add_on_torch_tensors_matches_torch(cache):
    torch = torch_or_skip()
    n = 1000
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    out = torch.empty_like(a)
    kernel = cache.kernel("residual_add", ptx(kernels.RESIDUAL_ADD_PTX), "residual_add")
    assert (kernel.name, kernel.param_count) == ("residual_add", 4)
    assert kernel.arch >= 70 and kernel.fingerprint
    kernel.launch(blocks(n), 256, (out, a, b, kcache.u32(n)))
    torch.cuda.synchronize()
    assert torch.equal(out, a + b)


@needs_gpu
def test_scale_on_cupy_arrays_with_typed_and_numpy_scalars_matches_numpy(cache):
    cupy = cupy_or_skip()
    n = 4099
    host = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    data = cupy.asarray(host)
    kernel = cache.kernel("scale", ptx(kernels.SCALE_PTX), "scale_kernel")
    # On CuPy's own stream, where asarray's copy runs: the default stream need not wait for it.
    stream = cupy.cuda.get_current_stream()
    kernel.launch(blocks(n), 256, (data, kcache.f32(3.0), kcache.u32(n)), stream=stream)
    kernel((blocks(n),), (256,), (data, np.float32(0.5), np.uint32(n)), stream=stream)
    cupy.cuda.runtime.deviceSynchronize()
    expected = host * np.float32(3.0) * np.float32(0.5)
    np.testing.assert_array_equal(cupy.asnumpy(data), expected)


@needs_gpu
def test_a_cuda_template_with_a_header_runs_on_torch_tensors(cache):
    torch = torch_or_skip()
    n = 3000
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    expected = 2.0 * x + y + 1.0
    make = lambda: kcache.Source.cuda(kernels.AXPY_CUDA, options=["-DOFFSET=1"],
                                      name_expressions=[kernels.AXPY_NAME],
                                      headers={"fma_of.h": kernels.AXPY_HEADER})
    kernel = cache.kernel("axpy<float>", make, kernels.AXPY_NAME)
    kernel.launch(blocks(n), 256, (y, x, np.float32(2.0), np.uint32(n)))
    torch.cuda.synchronize()
    torch.testing.assert_close(y, expected)


@needs_gpu
def test_launches_run_on_torch_and_cupy_streams(cache):
    torch = torch_or_skip()
    n = 2048
    kernel = cache.kernel("scale", ptx(kernels.SCALE_PTX), "scale_kernel")
    data = torch.ones(n, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())  # torch's streams do not wait by themselves
    with torch.cuda.stream(stream):
        kernel.launch(blocks(n), 256, (data, kcache.f32(2.0), kcache.u32(n)), stream=stream)
        kernel.launch(blocks(n), 256, (data, kcache.f32(3.0), kcache.u32(n)),
                      stream=stream.cuda_stream)
    stream.synchronize()
    assert torch.equal(data, torch.full_like(data, 6.0))

    cupy = cupy_or_skip()
    array = cupy.ones(n, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()  # a non-blocking stream does not wait for the default one
    cupy_stream = cupy.cuda.Stream(non_blocking=True)
    kernel.launch(blocks(n), 256, (array, kcache.f32(5.0), kcache.u32(n)), stream=cupy_stream)
    cupy_stream.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(array), np.full(n, 5.0, dtype=np.float32))


class OnlyArrayInterface:
    def __init__(self, array):
        self.__cuda_array_interface__ = array.__cuda_array_interface__


class OnlyDlpack:
    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None, **kwargs):
        return self.tensor.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


@needs_gpu
def test_buffers_through_the_cuda_array_interface_and_dlpack(cache):
    torch = torch_or_skip()
    n = 512
    kernel = cache.kernel("scale", ptx(kernels.SCALE_PTX), "scale_kernel")
    data = torch.ones(n, device="cuda")
    kernel.launch(blocks(n), 256, (OnlyDlpack(data), kcache.f32(2.0), kcache.u32(n)))
    kernel.launch(blocks(n), 256, (OnlyArrayInterface(data), kcache.f32(2.0), kcache.u32(n)))
    kernel.launch(blocks(n), 256, (kcache.ptr(data), kcache.f32(2.0), kcache.u32(n)))
    kernel.launch(blocks(n), 256, (kcache.ptr(data.data_ptr()), kcache.f32(2.0), kcache.u32(n)))
    torch.cuda.synchronize()
    assert torch.equal(data, torch.full_like(data, 16.0))


@needs_gpu
def test_wrong_arguments_are_refused_before_the_driver_sees_them(cache):
    torch = torch_or_skip()
    kernel = cache.kernel("scale", ptx(kernels.SCALE_PTX), "scale_kernel")
    data = torch.ones(16, device="cuda")
    with pytest.raises(kcache.ArgumentMismatchError) as raised:
        kernel.launch(1, 16, (data, kcache.f32(2.0)))
    assert isinstance(raised.value, TypeError)
    with pytest.raises(kcache.ArgumentMismatchError):
        kernel.launch(1, 16, (data, kcache.f64(2.0), kcache.u32(16)))
    with pytest.raises(TypeError, match="no C type"):
        kernel.launch(1, 16, (data, 2.0, kcache.u32(16)))
    with pytest.raises(TypeError, match="on the CPU"):
        kernel.launch(1, 16, (torch.ones(16), kcache.f32(2.0), kcache.u32(16)))
    torch.cuda.synchronize()
    assert torch.equal(data, torch.ones(16, device="cuda"))


@needs_gpu
def test_a_hit_does_not_call_make_and_a_new_cache_reads_the_disk(disk):
    torch_or_skip()
    calls = []

    def make():
        calls.append(1)
        return kcache.Source.ptx(kernels.SCALE_PTX)

    first = kcache.KernelCache(disk_directory=disk)
    first.kernel("scale", make, "scale_kernel")
    first.kernel("scale", make, "scale_kernel")
    assert len(calls) == 1
    assert (first.stats().hits, first.stats().misses, first.stats().compiles) == (1, 1, 1)

    second = kcache.KernelCache(disk_directory=disk)
    second.kernel("scale", make, "scale_kernel")
    assert (second.stats().disk_hits, second.stats().compiles) == (1, 0)


@needs_gpu
def test_an_unknown_kernel_name_is_kernel_not_found(cache):
    torch_or_skip()
    with pytest.raises(kcache.KernelNotFoundError):
        cache.kernel("scale", ptx(kernels.SCALE_PTX), "no_such_kernel")


@needs_gpu
def test_warm_up_gives_kernels_and_errors_in_order(cache):
    torch = torch_or_skip()

    def boom():
        raise RuntimeError("generator down")

    items = [("residual_add", ptx(kernels.RESIDUAL_ADD_PTX), "residual_add"),
             ("empty:cuda", lambda: kcache.Source.cuda(kernels.EMPTY_CUDA), "empty_kernel"),
             ("broken", ptx(kernels.BAD_PTX), "broken"),
             ("boom", boom, "x")]
    seen = []
    results = cache.warm_up(items, threads=4, progress=lambda *report: seen.append(report))
    assert isinstance(results[0], kcache.Kernel) and isinstance(results[1], kcache.Kernel)
    assert isinstance(results[2], kcache.CompileError) and results[2].log
    assert isinstance(results[3], kcache.SourceError)
    assert isinstance(results[3].__cause__, RuntimeError)
    assert len(seen) == 4 and {report[1] for report in seen} == {4}
    results[1].launch(1, 1, ())
    torch.cuda.synchronize()


@needs_gpu
def test_threads_missing_one_key_compile_it_once(cache):
    torch_or_skip()
    calls, errors, kernels_seen = [], [], []
    gate = threading.Barrier(8)

    def make():
        calls.append(1)
        return kcache.Source.ptx(kernels.SCALE_PTX)

    def work():
        try:
            DRIVER.make_primary_context_current()
            gate.wait()
            kernels_seen.append(cache.kernel("scale", make, "scale_kernel"))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(kernels_seen) == 8
    assert len(calls) == 1
    assert cache.stats().compiles == 1


@needs_gpu
def test_a_launch_without_a_current_context_names_it(cache):
    torch_or_skip()
    kernel = cache.kernel("empty", ptx(kernels.EMPTY_PTX), "empty_kernel")
    errors = []

    def work():
        try:
            kernel.launch(1, 1, ())
        except kcache.Error as error:
            errors.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], kcache.NoContextError)


# ---- the launch features: dynamic shared memory, module globals, clusters ----

def cuda(code):
    return lambda: kcache.Source.cuda(code)


@needs_gpu
def test_a_kernel_with_200_kib_of_dynamic_shared_memory_runs_after_set_attribute(cache):
    torch = torch_or_skip()
    shared = 200 * 1024
    n = shared // 4
    data = torch.randn(n, device="cuda")
    out = torch.zeros_like(data)
    kernel = cache.kernel("reverse_shared", cuda(kernels.REVERSE_SHARED_CUDA), "reverse_shared")
    # Above 48 KiB the driver refuses the launch until the kernel is allowed that much.
    with pytest.raises(kcache.DriverError):
        kernel.launch(1, 1024, (data, out, np.uint32(n)), shared_mem=shared)
    torch.cuda.synchronize()
    assert torch.count_nonzero(out).item() == 0

    kernel.set_attribute(kcache.KernelAttribute.MAX_DYNAMIC_SHARED_BYTES, shared)
    kernel.set_cache_config(kcache.CacheConfig.PREFER_SHARED)
    kernel.launch(1, 1024, (data, out, np.uint32(n)), shared_mem=shared)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.flip(data, [0]))

    # The attribute as the driver reports it, through the kernel's CUfunction.
    value = ctypes.c_int()
    DRIVER.check(DRIVER.lib.cuFuncGetAttribute(ctypes.byref(value), 8,  # MAX_DYNAMIC_SHARED
                                               ctypes.c_void_p(kernel.native_function)),
                 "cuFuncGetAttribute")
    assert value.value == shared
    assert kernel.native_kernel != 0
    with pytest.raises(kcache.InvalidArgumentError):
        kernel.set_attribute(kcache.KernelAttribute.MAX_DYNAMIC_SHARED_BYTES, 1 << 30)


@needs_gpu
def test_a_constant_table_written_through_module_global_is_read_by_the_kernel(cache):
    torch = torch_or_skip()
    kernel = cache.kernel("constant_table", cuda(kernels.CONSTANT_TABLE_CUDA), "lookup_table")
    table = np.random.default_rng(7).standard_normal(64).astype(np.float32)
    found = kernel.module_global("table")
    address, size = found
    assert (found.address, found.size) == (address, size) and address != 0
    assert size == table.nbytes
    copy = DRIVER.lib.cuMemcpyHtoD_v2
    copy.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    DRIVER.check(copy(address, table.ctypes.data, table.nbytes), "cuMemcpyHtoD")

    n = 5000
    index = np.random.default_rng(8).integers(0, 1 << 20, n).astype(np.int32)
    index_gpu = torch.from_numpy(index).cuda()
    out = torch.zeros(n, device="cuda")
    kernel.launch(blocks(n), 256, (index_gpu, out, np.uint32(n)))
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), table[index & 63])
    with pytest.raises(kcache.InvalidArgumentError, match="no_such_table"):
        kernel.module_global("no_such_table")


@needs_gpu
def test_a_cluster_launch_on_sm_90_gives_each_block_its_rank_in_the_cluster(cache):
    torch = torch_or_skip()
    major, _ = torch.cuda.get_device_capability()
    if major < 9:
        pytest.skip("thread block clusters need sm_90")
    kernel = cache.kernel("cluster_rank", cuda(kernels.CLUSTER_RANK_CUDA), "cluster_rank")
    out = torch.full((8,), -1, dtype=torch.int32, device="cuda")
    kernel.launch(8, 32, (out,), cluster=2)
    torch.cuda.synchronize()
    assert out.tolist() == [0, 1] * 4
    kernel(8, 32, (out,), cluster=(4, 1, 1))
    torch.cuda.synchronize()
    assert out.tolist() == [0, 1, 2, 3] * 2
    kernel.launch(8, 32, (out,))  # no cluster: each block alone in its own
    torch.cuda.synchronize()
    assert out.tolist() == [0] * 8
    with pytest.raises(kcache.InvalidArgumentError, match="not a multiple"):
        kernel.launch(6, 32, (out,), cluster=4)


@needs_gpu
def test_cooperative_and_pdl_launches_run_like_plain_ones(cache):
    torch = torch_or_skip()
    n = 1024
    kernel = cache.kernel("scale", ptx(kernels.SCALE_PTX), "scale_kernel")
    data = torch.ones(n, device="cuda")
    kernel.launch(blocks(n), 256, (data, kcache.f32(2.0), kcache.u32(n)), cooperative=True)
    kernel.launch(blocks(n), 256, (data, kcache.f32(3.0), kcache.u32(n)), pdl=True)
    kernel(blocks(n), 256, (data, kcache.f32(5.0), kcache.u32(n)), pdl=True)
    torch.cuda.synchronize()
    assert torch.equal(data, torch.full_like(data, 30.0))
