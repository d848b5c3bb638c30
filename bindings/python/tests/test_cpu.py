# SPDX-License-Identifier: Apache-2.0
"""Tests that need no GPU: prebuilds (nvJitLink, NVRTC), statistics, errors, argument checks."""

import ctypes
import glob
import os
import sys
import threading
import types

import pytest

import kcache
import kernels

np = pytest.importorskip("numpy")


def driver_present():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def entries(directory):
    return glob.glob(os.path.join(directory, "**", "*.kc"), recursive=True)


def ptx(text):
    return lambda: kcache.Source.ptx(text)


def axpy_source():
    return kcache.Source.cuda(kernels.AXPY_CUDA, options=["-DOFFSET=1"],
                              name_expressions=[kernels.AXPY_NAME],
                              headers={"fma_of.h": kernels.AXPY_HEADER})


def test_the_version_is_the_librarys():
    header = open(os.path.join(os.path.dirname(__file__), "../../../include/kcache/version.hpp")).read()
    assert f'#define KCACHE_VERSION "{kcache.__version__}"' in header


def test_a_ptx_prebuild_compiles_once_and_a_new_cache_finds_it_on_disk(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    assert cache.prebuild("residual", ptx(kernels.RESIDUAL_ADD_PTX), 90) == kcache.Provenance.COMPILED
    assert cache.prebuild("residual", ptx(kernels.RESIDUAL_ADD_PTX), 90) == kcache.Provenance.MEMORY_TIER
    assert len(entries(disk)) == 1
    stats = cache.stats()
    assert (stats.prebuilds, stats.prebuild_compiles, stats.disk_writes) == (2, 1, 1)
    assert stats.disk_enabled and not stats.disk_read_only

    again = kcache.KernelCache(disk_directory=disk)
    assert again.prebuild("residual", ptx(kernels.RESIDUAL_ADD_PTX), 90) == kcache.Provenance.DISK_TIER
    assert again.stats().prebuild_compiles == 0


def test_a_cuda_prebuild_with_headers_options_and_a_template_compiles(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    assert cache.prebuild("axpy", axpy_source, 80) == kcache.Provenance.COMPILED
    assert cache.prebuild("axpy", axpy_source, 90) == kcache.Provenance.COMPILED
    assert len(entries(disk)) == 2
    # Another option is another fingerprint.
    other = lambda: kcache.Source.cuda(kernels.AXPY_CUDA, options=["-DOFFSET=2"],
                                       name_expressions=[kernels.AXPY_NAME],
                                       headers={"fma_of.h": kernels.AXPY_HEADER})
    assert cache.prebuild("axpy", other, 90) == kcache.Provenance.COMPILED
    assert cache.stats().prebuild_compiles == 3


def test_a_binary_source_has_nothing_to_compile(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    assert cache.prebuild("bin", lambda: kcache.Source.cubin(b"\x7fELF"), 90) == kcache.Provenance.BINARY
    assert entries(disk) == []


def test_bad_ptx_is_a_compile_error_with_the_log_and_nothing_cached(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    with pytest.raises(kcache.CompileError) as raised:
        cache.prebuild("bad", ptx(kernels.BAD_PTX), 90)
    error = raised.value
    assert error.code == "compile-failed"
    assert "bad" in error.message
    assert error.log.strip()
    assert error.log.strip() in str(error)
    assert entries(disk) == []
    assert cache.stats().compile_failures == 1
    # Failures are not cached: the same call compiles (and fails) again.
    with pytest.raises(kcache.CompileError):
        cache.prebuild("bad", ptx(kernels.BAD_PTX), 90)
    assert cache.stats().compile_failures == 2


def test_bad_cuda_is_a_compile_error_carrying_nvrtcs_log(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    with pytest.raises(kcache.CompileError) as raised:
        cache.prebuild("bad", lambda: kcache.Source.cuda(kernels.BAD_CUDA), 90)
    assert "undeclared_identifier" in raised.value.log


def test_a_make_that_raises_is_a_source_error_with_its_exception_and_nothing_is_cached(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    calls = []

    def make():
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("the generator broke")
        return kcache.Source.ptx(kernels.SCALE_PTX)

    with pytest.raises(kcache.SourceError) as raised:
        cache.prebuild("scale", make, 90)
    assert "ValueError: the generator broke" in str(raised.value)
    assert isinstance(raised.value.__cause__, ValueError)
    assert entries(disk) == []
    assert cache.prebuild("scale", make, 90) == kcache.Provenance.COMPILED
    assert len(calls) == 2


def test_a_make_that_returns_no_source_is_a_source_error(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    with pytest.raises(kcache.SourceError, match="not a kcache.Source"):
        cache.prebuild("str", lambda: kernels.SCALE_PTX, 90)


def test_an_interrupt_inside_make_stays_an_interrupt(disk):
    cache = kcache.KernelCache(disk_directory=disk)

    def make():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.prebuild("interrupted", make, 90)


def test_an_arch_no_compiler_takes_is_an_invalid_argument(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    with pytest.raises(kcache.InvalidArgumentError) as raised:
        cache.prebuild("k", ptx(kernels.SCALE_PTX), 12)
    assert isinstance(raised.value, ValueError)
    assert raised.value.code == "invalid-argument"


def test_generators_run_from_many_python_threads_at_once(disk):
    # Each prebuild releases the GIL while compiling and takes it back to call make.
    cache = kcache.KernelCache(disk_directory=disk)
    results, errors = {}, []

    def work(i):
        try:
            source = kernels.SCALE_PTX.replace("scale_kernel", f"scale_kernel_{i % 4}")
            results[i] = cache.prebuild(f"scale:{i % 4}", lambda: kcache.Source.ptx(source), 90)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(results) == 8
    assert len(entries(disk)) == 4
    assert cache.stats().prebuild_compiles == 4


def test_stats_have_every_field_as_attributes_and_as_a_dict(disk):
    stats = kcache.KernelCache(disk_directory=disk).stats()
    fields = stats.as_dict()
    assert len(fields) >= 40
    for name in ("hits", "misses", "compiles", "disk_hits", "remote_hits", "remote_enabled"):
        assert name in fields
    for name, value in fields.items():
        assert getattr(stats, name) == value
    assert "hits=0" in repr(stats)


@pytest.mark.skipif(driver_present(), reason="a CUDA driver is installed here")
def test_a_lookup_without_a_gpu_names_the_missing_driver(disk):
    cache = kcache.KernelCache(disk_directory=disk)
    with pytest.raises(kcache.NoDriverError) as raised:
        cache.kernel("scale", ptx(kernels.SCALE_PTX), "scale_kernel")
    assert "libcuda" in str(raised.value)
    assert raised.value.code == "no-driver"


@pytest.mark.skipif(driver_present(), reason="a CUDA driver is installed here")
def test_warm_up_returns_a_status_per_item_without_raising(disk):
    cache = kcache.KernelCache(disk_directory=disk)

    def boom():
        raise RuntimeError("never mind")

    items = [("a", ptx(kernels.SCALE_PTX), "scale_kernel"), ("b", boom, "x"),
             ("c", ptx(kernels.BAD_PTX), "broken")]
    results = cache.warm_up(items, threads=2)
    assert len(results) == 3
    assert all(isinstance(result, kcache.NoDriverError) for result in results)


def test_warm_up_refuses_items_that_are_not_triples(disk):
    with pytest.raises(TypeError, match="key, make, kernel_name"):
        kcache.KernelCache(disk_directory=disk).warm_up([("a", ptx(kernels.SCALE_PTX))])


def test_from_env_reads_kcache_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("KCACHE_DIR", str(tmp_path / "from-env"))
    assert kcache.KernelCache.from_env().disk_directory == str(tmp_path / "from-env")
    monkeypatch.setenv("KCACHE_MAX_SIZE", "not a size")
    with pytest.raises(kcache.InvalidArgumentError, match="KCACHE_MAX_SIZE|max_size"):
        kcache.KernelCache.from_env()


def test_options_out_of_range_are_refused():
    with pytest.raises(kcache.InvalidArgumentError, match="compile_workers"):
        kcache.KernelCache(compile_workers=100000)


def test_the_global_cache_is_one_object():
    assert kcache.global_cache() is kcache.global_cache()
    assert isinstance(kcache.global_cache().stats(), kcache.CacheStats)


def test_sources_keep_what_they_were_given():
    source = axpy_source()
    assert source.kind == "cuda"
    assert source.options == ["-DOFFSET=1"]
    assert source.name_expressions == [kernels.AXPY_NAME]
    assert source.headers == {"fma_of.h": kernels.AXPY_HEADER}
    assert kcache.Source.ptx("x").data == b"x"
    assert kcache.Source.fatbin(b"\x00\x01").kind == "fatbin"


# ---- launch arguments, as a launch packs them (no GPU needed) ----

pack = kcache._kcache._packed_arguments
shape = kcache._kcache._launch_shape


def test_typed_scalars_pack_to_their_c_bytes():
    packed = pack((kcache.f32(1.5), kcache.f64(-2.0), kcache.i8(-1), kcache.u16(65535),
                   kcache.i32(-3), kcache.u32(7), kcache.i64(-4), kcache.u64(2**64 - 1),
                   kcache.ptr(0x1000)))
    assert packed == [np.float32(1.5).tobytes(), np.float64(-2.0).tobytes(), b"\xff", b"\xff\xff",
                      np.int32(-3).tobytes(), np.uint32(7).tobytes(), np.int64(-4).tobytes(),
                      b"\xff" * 8, np.uint64(0x1000).tobytes()]


def test_numpy_scalars_pack_to_their_own_bytes_every_time():
    values = (np.float32(2.5), np.int32(-7), np.uint64(9), np.float64(0.1), np.int8(3),
              np.float16(1.0), np.bool_(True))
    for _ in range(3):  # the first classifies each type, the others take the fast path
        assert pack(values) == [v.tobytes() for v in values]
    assert pack((np.float32(-1.0),)) == [np.float32(-1.0).tobytes()]


def test_bytes_pass_as_a_struct_by_value():
    assert pack((b"\x01\x02\x03",)) == [b"\x01\x02\x03"]


class FakeDeviceArray:
    """Only the CUDA array interface, as Numba's and others' arrays have it."""

    def __init__(self, address):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (address, False),
                                         "version": 3}


def test_an_object_with_the_cuda_array_interface_passes_its_address():
    assert pack((FakeDeviceArray(0xABC0),)) == [np.uint64(0xABC0).tobytes()]
    assert kcache.ptr(FakeDeviceArray(0x10)).size == 8


@pytest.mark.parametrize("value, words", [(1, "kcache.i32(1)"), (2.5, "kcache.f32(2.5)"),
                                          (True, "Python int")])
def test_a_bare_python_number_is_a_type_error_asking_for_its_type(value, words):
    with pytest.raises(TypeError, match="no C type") as raised:
        pack((kcache.f32(1.0), value))
    assert words in str(raised.value)
    assert "argument 1" in str(raised.value)


def test_host_memory_and_unknown_objects_are_type_errors():
    with pytest.raises(TypeError, match="not in device memory"):
        pack((np.zeros(4, dtype=np.float32),))
    with pytest.raises(TypeError, match="cannot pass"):
        pack((object(),))
    with pytest.raises(TypeError, match="cannot pass"):
        pack((None,))
    with pytest.raises(TypeError):
        kcache.ptr("0x10")


def test_typed_scalars_refuse_values_that_do_not_fit():
    with pytest.raises(OverflowError):
        kcache.i32(2**31)
    with pytest.raises(OverflowError):
        kcache.u32(-1)
    with pytest.raises(OverflowError):
        kcache.u8(256)
    with pytest.raises(TypeError):
        kcache.i32(1.5)
    with pytest.raises(TypeError):
        kcache.f32("1.0")
    assert repr(kcache.i16(-5)) == "kcache.i16(-5)"
    assert kcache.u64(1).size == 8 and kcache.u64(1).type == "u64"


def test_grid_block_and_stream_are_read_from_ints_tuples_and_stream_objects():
    assert shape(5, (2, 3), None) == ((5, 1, 1), (2, 3, 1), 0)
    assert shape([1, 2, 3], 256, 0x1234) == ((1, 2, 3), (256, 1, 1), 0x1234)

    class TorchLike:
        cuda_stream = 0x55

    class CupyLike:
        ptr = 0x66

    class Protocol:
        def __cuda_stream__(self):
            return (0, 0x77)

    assert shape(1, 1, TorchLike())[2] == 0x55
    assert shape(1, 1, CupyLike())[2] == 0x66
    assert shape(1, 1, Protocol())[2] == 0x77
    with pytest.raises(TypeError, match="stream"):
        shape(1, 1, "default")
    with pytest.raises(TypeError, match="grid"):
        shape((1, 2, 3, 4), 1, None)
    with pytest.raises(ValueError, match="block"):
        shape(1, -1, None)



# ---- the launch features: cluster shapes, kernel attributes, globals (no GPU needed) ----

cluster_shape = kcache._kcache._cluster_shape


def test_a_cluster_is_an_int_or_up_to_three_ints_that_divide_the_grid():
    assert cluster_shape(8, 2) == (2, 1, 1)
    assert cluster_shape((4, 6), (2, 3)) == (2, 3, 1)
    assert cluster_shape([2, 2, 4], (1, 1, 4)) == (1, 1, 4)
    with pytest.raises(ValueError, match="at least 1"):
        cluster_shape(8, 0)
    with pytest.raises(ValueError, match="at least 1"):
        cluster_shape((8, 8), (2, 0))
    with pytest.raises(TypeError, match="cluster"):
        cluster_shape(8, (1, 1, 1, 1))
    with pytest.raises(TypeError, match="cluster"):
        cluster_shape(8, 2.0)
    with pytest.raises(kcache.InvalidArgumentError, match="not a multiple of the cluster"):
        cluster_shape(6, 4)
    with pytest.raises(kcache.InvalidArgumentError, match=r"\(4, 3, 1\)"):
        cluster_shape((4, 3), (2, 2))


def test_launch_takes_cluster_cooperative_and_pdl_by_keyword_only():
    kernel = kcache._kcache._empty_kernel()
    for call in (kernel.launch, kernel):
        # Checked before the launch: the empty kernel is never reached.
        with pytest.raises(kcache.InvalidArgumentError, match="not a multiple"):
            call(3, 1, (), cluster=2)
        with pytest.raises(TypeError):
            call(4, 1, (), 0, None, 2)  # cluster is keyword-only
        with pytest.raises(TypeError):
            call(4, 1, (), cooperative=1)  # a bool, not a truthy value
        for options in ({}, {"cluster": 2}, {"cooperative": True}, {"pdl": True}):
            with pytest.raises(kcache.InvalidArgumentError, match="empty KernelHandle"):
                call(4, 1, (), **options)


def test_kernel_attributes_and_cache_configs_mirror_the_cpp_enums_in_order():
    assert [(a.name, a.value) for a in kcache.KernelAttribute] == [
        ("MAX_DYNAMIC_SHARED_BYTES", 0), ("PREFERRED_SHARED_CARVEOUT", 1),
        ("REQUIRED_CLUSTER_WIDTH", 2), ("REQUIRED_CLUSTER_HEIGHT", 3),
        ("REQUIRED_CLUSTER_DEPTH", 4), ("NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 5),
        ("CLUSTER_SCHEDULING_POLICY_PREFERENCE", 6)]
    assert [(c.name, c.value) for c in kcache.CacheConfig] == [
        ("PREFER_NONE", 0), ("PREFER_SHARED", 1), ("PREFER_L1", 2), ("PREFER_EQUAL", 3)]


def test_a_kernel_with_no_code_behind_it_answers_every_new_call_with_an_invalid_argument():
    kernel = kcache._kcache._empty_kernel()
    with pytest.raises(kcache.InvalidArgumentError, match="empty KernelHandle"):
        kernel.set_attribute(kcache.KernelAttribute.MAX_DYNAMIC_SHARED_BYTES, 200 * 1024)
    with pytest.raises(kcache.InvalidArgumentError, match="empty KernelHandle"):
        kernel.set_cache_config(kcache.CacheConfig.PREFER_SHARED)
    with pytest.raises(kcache.InvalidArgumentError, match="empty KernelHandle"):
        kernel.native_function
    with pytest.raises(kcache.InvalidArgumentError, match="empty KernelHandle"):
        kernel.native_kernel
    with pytest.raises(kcache.InvalidArgumentError, match="empty ModuleHandle"):
        kernel.module_global("table")
    # A member's number converts to it (nanobind's rule); anything else is refused.
    with pytest.raises(kcache.InvalidArgumentError, match="empty KernelHandle"):
        kernel.set_attribute(0, 1024)
    for attribute in (99, "MAX_DYNAMIC_SHARED_BYTES", kcache.CacheConfig.PREFER_L1):
        with pytest.raises(TypeError):
            kernel.set_attribute(attribute, 1024)
    with pytest.raises(TypeError):
        kernel.set_cache_config("PREFER_SHARED")


def test_a_device_global_has_its_address_and_size_and_unpacks_as_a_pair():
    found = kcache.DeviceGlobal(0x7F0000001000, 256)
    address, size = found
    assert (found.address, found.size) == (address, size) == (0x7F0000001000, 256)
    assert repr(found) == "kcache.DeviceGlobal(address=0x7f0000001000, size=256)"
    assert "DeviceGlobal" in kcache.__all__ and "KernelAttribute" in kcache.__all__

# ---- device buffers, through stand-ins with the same attributes (no GPU needed) ----

def address_bytes(address):
    return np.uint64(address).tobytes()


def test_torch_tensors_pass_their_data_ptr_and_a_cpu_tensor_is_refused(monkeypatch):
    torch = types.ModuleType("torch")

    class Tensor:
        def __init__(self, address, is_cuda):
            self.address, self.is_cuda = address, is_cuda

        def data_ptr(self):
            return self.address

    torch.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert pack((Tensor(0x7000, True), kcache.u32(1))) == [address_bytes(0x7000),
                                                          np.uint32(1).tobytes()]
    with pytest.raises(TypeError, match="on the CPU"):
        pack((Tensor(0x7000, False),))


def test_cupy_arrays_pass_their_data_pointer(monkeypatch):
    cupy = types.ModuleType("cupy")

    class MemoryPointer:
        def __init__(self, ptr):
            self.ptr = ptr

    class ndarray:  # noqa: N801 - CuPy's name
        def __init__(self, address):
            self.data = MemoryPointer(address)

    cupy.ndarray = ndarray
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    assert pack((ndarray(0x8000), ndarray(0x9000))) == [address_bytes(0x8000),
                                                        address_bytes(0x9000)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class FakeDlpack:
    """A DLPack producer whose capsule says device memory at `address` + `offset`."""

    def __init__(self, address, offset, device_type=2):
        self.tensor = DLManagedTensor()
        self.tensor.dl_tensor.data = address
        self.tensor.dl_tensor.byte_offset = offset
        self.tensor.dl_tensor.device = DLDevice(device_type, 0)
        self.device_type = device_type
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new_capsule(ctypes.addressof(self.tensor), b"dltensor", None)

    def __dlpack_device__(self):
        return (self.device_type, 0)


def test_a_dlpack_tensor_passes_its_data_plus_byte_offset_without_a_sync():
    producer = FakeDlpack(0xA000, 0x40)
    assert pack((producer,)) == [address_bytes(0xA040)]
    assert producer.streams == [-1]  # -1: the producer must not synchronize anything
    assert pack((FakeDlpack(0xB000, 0, device_type=13),)) == [address_bytes(0xB000)]
    with pytest.raises(TypeError, match="not in device memory"):
        pack((FakeDlpack(0xA000, 0, device_type=1),))
