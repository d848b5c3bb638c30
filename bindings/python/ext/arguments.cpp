// SPDX-License-Identifier: Apache-2.0
// The launch path: Python objects to kernel arguments, dims and a stream, then one checked launch.
//
// Each argument's type is classified once (a small cache by type object) and then converted by
// that kind's fast path, so that a launch allocates nothing and asks Python only what it must: a
// tensor's address. Everything here runs holding the GIL, which also guards the caches.
#include <Python.h>
#include <nanobind/stl/string.h>

#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"

namespace kcache::python {
namespace {

// DLPack's C structures (dlpack.h, version 0.x, as a "dltensor" capsule holds them).
struct DLDevice {
    std::int32_t device_type;
    std::int32_t device_id;
};
struct DLDataType {
    std::uint8_t code, bits;
    std::uint16_t lanes;
};
struct DLTensor {
    void* data;
    DLDevice device;
    std::int32_t ndim;
    DLDataType dtype;
    std::int64_t* shape;
    std::int64_t* strides;
    std::uint64_t byte_offset;
};
struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(DLManagedTensor*);
};
// Device types a kernel can address: CUDA, pinned host (mapped), managed.
constexpr std::int32_t kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

enum class ArgKind : std::uint8_t {
    kNumpyScalar,     // numpy.float32(...): its value at a fixed offset in the object
    kTorch,           // torch.Tensor: is_cuda, data_ptr()
    kCupy,            // cupy.ndarray: data.ptr
    kArrayInterface,  // __cuda_array_interface__["data"][0]
    kDlpack,          // __dlpack_device__(), __dlpack__()
    kBytes,           // bytes: passed by value, as a struct
    kPythonInt,       // refused: no C type
    kPythonFloat,     // refused: no C type
    kUnsupported,
};

struct TypeKind {
    PyTypeObject* type = nullptr;  // a strong reference, so that the address is never reused
    ArgKind kind = ArgKind::kUnsupported;
    std::uint8_t size = 0;     // kNumpyScalar
    std::uint16_t offset = 0;  // kNumpyScalar
};

// Programs pass few distinct types; past the cache's size a type is classified at every call.
std::array<TypeKind, 32> g_kinds;
std::size_t g_kind_count = 0;
PyTypeObject* g_scalar_type = nullptr;

std::string describe_type(nb::handle object) {
    nb::handle type = reinterpret_cast<PyObject*>(Py_TYPE(object.ptr()));
    nb::object module = nb::getattr(type, "__module__", nb::none());
    std::string name = nb::cast<std::string>(nb::str(nb::getattr(type, "__qualname__")));
    if (nb::isinstance<nb::str>(module) && nb::cast<std::string>(module) != "builtins") {
        return nb::cast<std::string>(module) + "." + name;
    }
    return name;
}

// The class `module_name.attr` when that module is already imported (never imports it).
nb::object loaded_class(const char* module_name, const char* attr) {
    PyObject* modules = PySys_GetObject("modules");  // borrowed
    if (modules == nullptr) return nb::none();
    PyObject* module = PyDict_GetItemString(modules, module_name);  // borrowed
    if (module == nullptr) return nb::none();
    return nb::getattr(nb::handle(module), attr, nb::none());
}

bool is_subclass(nb::handle type, const nb::object& base) {
    if (base.is_none()) return false;
    int result = PyObject_IsSubclass(type.ptr(), base.ptr());
    if (result < 0) PyErr_Clear();
    return result == 1;
}

TypeKind classify(nb::handle object) {
    PyTypeObject* type = Py_TYPE(object.ptr());
    nb::handle type_object = reinterpret_cast<PyObject*>(type);
    TypeKind kind;
    kind.type = type;
    if (PyBool_Check(object.ptr()) || PyLong_CheckExact(object.ptr())) {
        kind.kind = ArgKind::kPythonInt;
    } else if (PyFloat_CheckExact(object.ptr())) {  // numpy.float64 is a subclass: not here
        kind.kind = ArgKind::kPythonFloat;
    } else if (is_subclass(type_object, loaded_class("numpy", "number")) ||
               is_subclass(type_object, loaded_class("numpy", "bool_"))) {
        // Numbers and bools only: a numpy.void's value lives outside the object.
        // A numpy scalar (numpy.float32(1.0), ...) gives a zero-dimensional buffer that points
        // into the object itself, at an offset its type fixes: read there from now on.
        Py_buffer view;
        if (PyObject_GetBuffer(object.ptr(), &view, PyBUF_SIMPLE) == 0) {
            const auto offset =
                static_cast<const char*>(view.buf) - reinterpret_cast<const char*>(object.ptr());
            if (offset > 0 && offset < 256 && view.len > 0 && view.len <= 8) {
                kind.kind = ArgKind::kNumpyScalar;
                kind.offset = static_cast<std::uint16_t>(offset);
                kind.size = static_cast<std::uint8_t>(view.len);
            }
            PyBuffer_Release(&view);
        } else {
            PyErr_Clear();
        }
    } else if (is_subclass(type_object, loaded_class("torch", "Tensor"))) {
        kind.kind = ArgKind::kTorch;
    } else if (is_subclass(type_object, loaded_class("cupy", "ndarray"))) {
        kind.kind = ArgKind::kCupy;
    } else if (nb::hasattr(object, "__cuda_array_interface__")) {
        // Asked of the object: the interface may be an instance attribute.
        kind.kind = ArgKind::kArrayInterface;
    } else if (nb::hasattr(object, "__dlpack__") && nb::hasattr(object, "__dlpack_device__")) {
        kind.kind = ArgKind::kDlpack;
    } else if (PyBytes_CheckExact(object.ptr())) {
        kind.kind = ArgKind::kBytes;
    }
    return kind;
}

// A copy: converting an argument may call Python code that launches (and classifies) too.
TypeKind kind_of(nb::handle object) {
    PyTypeObject* type = Py_TYPE(object.ptr());
    for (std::size_t i = 0; i < g_kind_count; ++i) {
        if (g_kinds[i].type == type) return g_kinds[i];
    }
    const TypeKind kind = classify(object);
    // A refused type is not kept: another instance may have the interface as an attribute.
    if (kind.kind != ArgKind::kUnsupported && g_kind_count < g_kinds.size()) {
        Py_INCREF(reinterpret_cast<PyObject*>(type));
        g_kinds[g_kind_count++] = kind;
    }
    return kind;
}

[[noreturn]] void type_error(const std::string& message) {
    PyErr_SetString(PyExc_TypeError, message.c_str());
    throw nb::python_error();
}

// Which argument, for messages: built on error paths only, so that a launch allocates nothing.
struct Which {
    std::size_t index = static_cast<std::size_t>(-1);  // none: kcache.ptr()'s own argument
    const char* text = nullptr;                        // else this
    std::string name() const {
        if (text != nullptr) return text;
        if (index == static_cast<std::size_t>(-1)) return "the buffer";
        return "launch argument " + std::to_string(index);
    }
};

std::uint64_t address_of(nb::handle value, Which which) {
    unsigned long long address = PyLong_AsUnsignedLongLong(value.ptr());
    if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyErr_Clear();
        type_error(which.name() + " is not an address (a non-negative int)");
    }
    return address;
}

std::uint64_t address_of(nb::handle value, const char* what) {
    return address_of(value, Which{static_cast<std::size_t>(-1), what});
}

nb::object call_method(nb::handle object, PyObject* name) {
    PyObject* result = PyObject_CallMethodObjArgs(object.ptr(), name, nullptr);
    if (result == nullptr) throw nb::python_error();
    return nb::steal(result);
}

struct Names {
    PyObject* is_cuda = PyUnicode_InternFromString("is_cuda");
    PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
    PyObject* data = PyUnicode_InternFromString("data");
    PyObject* ptr = PyUnicode_InternFromString("ptr");
    PyObject* array_interface = PyUnicode_InternFromString("__cuda_array_interface__");
    PyObject* dlpack = PyUnicode_InternFromString("__dlpack__");
    PyObject* dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    PyObject* cuda_stream = PyUnicode_InternFromString("cuda_stream");
    PyObject* cuda_stream_protocol = PyUnicode_InternFromString("__cuda_stream__");
};
const Names& names() {
    static const Names* interned = new Names();  // never freed: used until the process ends
    return *interned;
}

std::uint64_t dlpack_pointer(nb::handle object, Which what) {
    nb::object device = call_method(object, names().dlpack_device);
    if (!nb::isinstance<nb::tuple>(device) || nb::len(device) < 1) {
        type_error(what.name() + ": " + describe_type(object) +
                   ".__dlpack_device__() did not return a tuple");
    }
    const int device_type = nb::cast<int>(device[0]);
    if (device_type != kDLCUDA && device_type != kDLCUDAHost && device_type != kDLCUDAManaged) {
        type_error(what.name() + " (" + describe_type(object) +
                   ") is not in device memory "
                   "(DLPack device type " +
                   std::to_string(device_type) + ", not CUDA)");
    }
    // stream=-1: the producer synchronizes nothing; the launch's stream is the caller's to order.
    nb::object capsule;
    try {
        capsule = nb::handle(object).attr(names().dlpack)(nb::arg("stream") = -1);
    } catch (nb::python_error&) {
        capsule = call_method(object, names().dlpack);
    }
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (managed == nullptr) {
        PyErr_Clear();
        type_error(what.name() + ": " + describe_type(object) +
                   ".__dlpack__() did not return a \"dltensor\" capsule");
    }
    // The capsule is dropped unconsumed, so it calls the deleter; the object keeps the memory.
    return reinterpret_cast<std::uint64_t>(managed->dl_tensor.data) +
           managed->dl_tensor.byte_offset;
}

// A device buffer's address, for the kinds that are one.
std::uint64_t buffer_pointer(nb::handle object, ArgKind kind, Which what) {
    switch (kind) {
        case ArgKind::kTorch: {
            nb::object is_cuda = nb::steal(PyObject_GetAttr(object.ptr(), names().is_cuda));
            if (!is_cuda.is_valid()) throw nb::python_error();
            if (is_cuda.ptr() != Py_True) {
                type_error(what.name() +
                           " is a torch tensor on the CPU; a kernel needs "
                           "device memory (tensor.cuda())");
            }
            return address_of(call_method(object, names().data_ptr), what);
        }
        case ArgKind::kCupy: {
            nb::object data = nb::steal(PyObject_GetAttr(object.ptr(), names().data));
            if (!data.is_valid()) throw nb::python_error();
            nb::object ptr = nb::steal(PyObject_GetAttr(data.ptr(), names().ptr));
            if (!ptr.is_valid()) throw nb::python_error();
            return address_of(ptr, what);
        }
        case ArgKind::kArrayInterface: {
            nb::object interface =
                nb::steal(PyObject_GetAttr(object.ptr(), names().array_interface));
            if (!interface.is_valid()) throw nb::python_error();
            PyObject* data = PyDict_Check(interface.ptr())
                                 ? PyDict_GetItemString(interface.ptr(), "data")
                                 : nullptr;  // borrowed
            if (data == nullptr || !PyTuple_Check(data) || PyTuple_Size(data) < 1) {
                type_error(what.name() + ": __cuda_array_interface__ has no \"data\" tuple");
            }
            return address_of(PyTuple_GetItem(data, 0), what);
        }
        case ArgKind::kDlpack:
            return dlpack_pointer(object, what);
        default:
            return 0;
    }
}

[[noreturn]] void unsupported_argument(nb::handle object, ArgKind kind, std::size_t index) {
    const std::string which = "launch argument " + std::to_string(index);
    if (kind == ArgKind::kPythonInt) {
        type_error(which + " is a Python int, which has no C type: say which, e.g. kcache.i32(" +
                   nb::cast<std::string>(nb::str(object)) +
                   "), kcache.u32, kcache.u64, numpy.int32(...), or kcache.ptr(address)");
    }
    if (kind == ArgKind::kPythonFloat) {
        type_error(which + " is a Python float, which has no C type: say which, e.g. kcache.f32(" +
                   nb::cast<std::string>(nb::str(object)) + ") or numpy.float64(...)");
    }
    type_error(which + " has type " + describe_type(object) +
               ", which kcache cannot pass: give a typed scalar (kcache.f32, kcache.i32, ..., "
               "a numpy scalar), a device buffer (torch CUDA tensor, CuPy array, an object with "
               "__cuda_array_interface__ or __dlpack__), kcache.ptr(address) or bytes (a struct "
               "by value)");
}

// Room for the usual argument lists without allocating.
constexpr std::size_t kInlineArguments = 24;

struct ArgumentList {
    std::array<void*, kInlineArguments> inline_pointers;
    std::array<std::size_t, kInlineArguments> inline_sizes;
    alignas(8) std::array<std::uint64_t, kInlineArguments> inline_values;
    std::vector<void*> more_pointers;
    std::vector<std::size_t> more_sizes;
    std::vector<std::uint64_t> more_values;
    void** pointers = inline_pointers.data();
    std::size_t* sizes = inline_sizes.data();
    std::uint64_t* values = inline_values.data();

    void reserve(std::size_t count) {
        if (count <= kInlineArguments) return;
        more_pointers.resize(count);
        more_sizes.resize(count);
        more_values.resize(count);
        pointers = more_pointers.data();
        sizes = more_sizes.data();
        values = more_values.data();
    }
};

// One argument into slot i: the value (or, for bytes, the object's own storage) and its size.
void convert(nb::handle object, std::size_t i, ArgumentList& list) {
    if (Py_TYPE(object.ptr()) == g_scalar_type) {  // kcache's typed scalars: no lookup
        const auto* scalar = nb::inst_ptr<Scalar>(object);
        std::memcpy(&list.values[i], scalar->bytes, sizeof scalar->bytes);
        list.pointers[i] = &list.values[i];
        list.sizes[i] = scalar->size;
        return;
    }
    const TypeKind kind = kind_of(object);
    switch (kind.kind) {
        case ArgKind::kNumpyScalar:
            list.values[i] = 0;
            std::memcpy(&list.values[i], reinterpret_cast<const char*>(object.ptr()) + kind.offset,
                        kind.size);
            list.pointers[i] = &list.values[i];
            list.sizes[i] = kind.size;
            return;
        case ArgKind::kBytes: {
            // The bytes object lives in the caller's argument list through the launch.
            list.pointers[i] = PyBytes_AsString(object.ptr());
            list.sizes[i] = static_cast<std::size_t>(PyBytes_Size(object.ptr()));
            return;
        }
        case ArgKind::kTorch:
        case ArgKind::kCupy:
        case ArgKind::kArrayInterface:
        case ArgKind::kDlpack: {
            list.values[i] = buffer_pointer(object, kind.kind, Which{i});
            list.pointers[i] = &list.values[i];
            list.sizes[i] = sizeof(std::uint64_t);
            return;
        }
        default:
            unsupported_argument(object, kind.kind, i);
    }
}

std::uint32_t dimension(PyObject* value, const char* what) {
    const unsigned long n = PyLong_AsUnsignedLong(value);
    if ((n == static_cast<unsigned long>(-1) && PyErr_Occurred()) ||
        n > std::numeric_limits<std::uint32_t>::max()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: each dimension must be an int in [1, 2^32)", what);
        throw nb::python_error();
    }
    return static_cast<std::uint32_t>(n);
}

Dim3 dims(nb::handle value, const char* what) {
    Dim3 out;
    PyObject* object = value.ptr();
    if (PyLong_Check(object)) {
        out.x = dimension(object, what);
        return out;
    }
    if (PyTuple_Check(object) || PyList_Check(object)) {
        const Py_ssize_t n = PySequence_Size(object);
        if (n >= 1 && n <= 3) {
            std::uint32_t* fields[] = {&out.x, &out.y, &out.z};
            for (Py_ssize_t i = 0; i < n; ++i) {
                nb::object item = nb::steal(PySequence_GetItem(object, i));
                if (!item.is_valid()) throw nb::python_error();
                if (!PyLong_Check(item.ptr())) break;
                *fields[i] = dimension(item.ptr(), what);
                if (i == n - 1) return out;
            }
        }
    }
    PyErr_Format(PyExc_TypeError, "%s must be an int or a tuple of 1 to 3 ints", what);
    throw nb::python_error();
}

// A cluster shape (an int or 1 to 3 ints, each at least 1) that divides the grid. The driver
// would refuse a grid it does not divide with a bare error code; this says which dimension.
Dim3 cluster_dims(nb::handle value, const Dim3& grid) {
    const Dim3 c = dims(value, "cluster");
    if (c.x == 0 || c.y == 0 || c.z == 0) {
        PyErr_SetString(PyExc_ValueError, "cluster: each dimension must be at least 1");
        throw nb::python_error();
    }
    if (grid.x % c.x != 0 || grid.y % c.y != 0 || grid.z % c.z != 0) {
        auto shape = [](const Dim3& d) {
            return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
                   std::to_string(d.z) + ")";
        };
        raise_error(Error(Errc::kInvalidArgument, "the grid " + shape(grid) +
                                                      " is not a multiple of the cluster " +
                                                      shape(c) + " in every dimension"));
    }
    return c;
}

enum class StreamKind : std::uint8_t { kTorch, kProtocol, kCupy, kUnsupported };

StreamKind classify_stream(nb::handle stream) {
    // torch.cuda.Stream: cuda_stream; the CUDA stream protocol; CuPy's Stream: ptr.
    if (nb::hasattr(stream, "cuda_stream")) return StreamKind::kTorch;
    if (nb::hasattr(stream, "__cuda_stream__")) return StreamKind::kProtocol;
    if (nb::hasattr(stream, "ptr")) return StreamKind::kCupy;
    return StreamKind::kUnsupported;
}

// Kept per type, as the arguments' kinds, so that a stream costs one attribute read.
std::array<std::pair<PyTypeObject*, StreamKind>, 8> g_stream_kinds;
std::size_t g_stream_kind_count = 0;

StreamKind stream_kind(nb::handle stream) {
    PyTypeObject* type = Py_TYPE(stream.ptr());
    for (std::size_t i = 0; i < g_stream_kind_count; ++i) {
        if (g_stream_kinds[i].first == type) return g_stream_kinds[i].second;
    }
    const StreamKind kind = classify_stream(stream);
    if (kind != StreamKind::kUnsupported && g_stream_kind_count < g_stream_kinds.size()) {
        Py_INCREF(reinterpret_cast<PyObject*>(type));
        g_stream_kinds[g_stream_kind_count++] = {type, kind};
    }
    return kind;
}

void* stream_handle(nb::handle stream) {
    PyObject* object = stream.ptr();
    if (object == Py_None) return nullptr;
    if (PyLong_Check(object)) return reinterpret_cast<void*>(address_of(stream, "stream"));
    switch (stream_kind(stream)) {
        case StreamKind::kTorch: {
            nb::object handle = nb::steal(PyObject_GetAttr(object, names().cuda_stream));
            if (!handle.is_valid()) throw nb::python_error();
            return reinterpret_cast<void*>(address_of(handle, "stream.cuda_stream"));
        }
        case StreamKind::kProtocol: {
            nb::object pair = call_method(stream, names().cuda_stream_protocol);
            if (!nb::isinstance<nb::tuple>(pair) || nb::len(pair) != 2) {
                type_error("stream.__cuda_stream__() did not return (version, handle)");
            }
            return reinterpret_cast<void*>(address_of(pair[1], "stream.__cuda_stream__()[1]"));
        }
        case StreamKind::kCupy: {
            nb::object handle = nb::steal(PyObject_GetAttr(object, names().ptr));
            if (!handle.is_valid()) throw nb::python_error();
            return reinterpret_cast<void*>(address_of(handle, "stream.ptr"));
        }
        default:
            type_error(
                "stream must be None, an int (a CUstream), a torch.cuda.Stream, a CuPy "
                "stream or an object with __cuda_stream__; got " +
                describe_type(stream));
    }
}

}  // namespace

std::uint64_t device_pointer(nb::handle object) {
    if (PyLong_Check(object.ptr())) return address_of(object, "the address");
    const TypeKind kind = kind_of(object);
    switch (kind.kind) {
        case ArgKind::kTorch:
        case ArgKind::kCupy:
        case ArgKind::kArrayInterface:
        case ArgKind::kDlpack:
            return buffer_pointer(object, kind.kind, Which{});
        default:
            type_error(
                "kcache.ptr() takes an int address or a device buffer (torch CUDA tensor, "
                "CuPy array, __cuda_array_interface__, DLPack), not a " +
                describe_type(object));
    }
}

nb::list packed_arguments(nb::handle args) {
    if (!PyTuple_Check(args.ptr())) type_error("args must be a tuple");
    const auto count = static_cast<std::size_t>(PyTuple_Size(args.ptr()));
    ArgumentList list;
    list.reserve(count);
    nb::list out;
    for (std::size_t i = 0; i < count; ++i) {
        convert(PyTuple_GetItem(args.ptr(), static_cast<Py_ssize_t>(i)), i, list);
        out.append(nb::bytes(list.pointers[i], list.sizes[i]));
    }
    return out;
}

nb::tuple launch_shape(nb::handle grid, nb::handle block, nb::handle stream) {
    const Dim3 g = dims(grid, "grid"), b = dims(block, "block");
    return nb::make_tuple(nb::make_tuple(g.x, g.y, g.z), nb::make_tuple(b.x, b.y, b.z),
                          reinterpret_cast<std::uintptr_t>(stream_handle(stream)));
}

nb::tuple cluster_shape(nb::handle grid, nb::handle cluster) {
    const Dim3 c = cluster_dims(cluster, dims(grid, "grid"));
    return nb::make_tuple(c.x, c.y, c.z);
}

void launch(const Kernel& kernel, nb::handle grid, nb::handle block, nb::handle args,
            std::uint32_t shared_mem, nb::handle stream, nb::handle cluster, bool cooperative,
            bool pdl) {
    LaunchConfig config;
    config.grid = dims(grid, "grid");
    config.block = dims(block, "block");
    config.shared_bytes = shared_mem;
    config.stream = stream_handle(stream);
    // Left at their defaults, the extended options cost a comparison each.
    if (!cluster.is_none()) config.cluster = cluster_dims(cluster, config.grid);
    config.cooperative = cooperative;
    config.programmatic_dependent_launch = pdl;

    // A list may change under a callback (a __dlpack__); a tuple cannot.
    nb::object tuple;
    if (PyTuple_Check(args.ptr())) {
        tuple = nb::borrow(args);
    } else if (PyList_Check(args.ptr())) {
        tuple = nb::steal(PyList_AsTuple(args.ptr()));
    } else {
        type_error("args must be a tuple or a list of kernel arguments, not a " +
                   describe_type(args));
    }
    const auto count = static_cast<std::size_t>(PyTuple_Size(tuple.ptr()));
    ArgumentList list;
    list.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        convert(PyTuple_GetItem(tuple.ptr(), static_cast<Py_ssize_t>(i)), i, list);
    }
    auto launched = kernel.handle.launch(config, std::span<void* const>(list.pointers, count),
                                         std::span<const std::size_t>(list.sizes, count));
    if (!launched) raise_error(launched.error());
}

// ---- the typed scalars ----
namespace {

template <class T>
Scalar make_scalar(T value, const char* name) {
    Scalar scalar;
    std::memcpy(scalar.bytes, &value, sizeof value);
    scalar.size = sizeof value;
    scalar.type_name = name;
    return scalar;
}

template <class T>
Scalar integer(nb::handle value, const char* name) {
    if (!PyLong_Check(value.ptr()) && !PyIndex_Check(value.ptr())) {
        type_error(std::string("kcache.") + name + "() takes an int, not a " +
                   describe_type(value));
    }
    nb::object index = nb::steal(PyNumber_Index(value.ptr()));
    if (!index.is_valid()) throw nb::python_error();
    if constexpr (std::is_signed_v<T>) {
        const long long n = PyLong_AsLongLong(index.ptr());
        if ((n == -1 && PyErr_Occurred()) || n < std::numeric_limits<T>::min() ||
            n > std::numeric_limits<T>::max()) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "%S does not fit kcache.%s", index.ptr(), name);
            throw nb::python_error();
        }
        return make_scalar(static_cast<T>(n), name);
    } else {
        const unsigned long long n = PyLong_AsUnsignedLongLong(index.ptr());
        if ((n == static_cast<unsigned long long>(-1) && PyErr_Occurred()) ||
            n > std::numeric_limits<T>::max()) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "%S does not fit kcache.%s", index.ptr(), name);
            throw nb::python_error();
        }
        return make_scalar(static_cast<T>(n), name);
    }
}

template <class T>
Scalar floating(nb::handle value, const char* name) {
    const double x = PyFloat_AsDouble(value.ptr());
    if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        type_error(std::string("kcache.") + name + "() takes a real number, not a " +
                   describe_type(value));
    }
    return make_scalar(static_cast<T>(x), name);
}

std::string scalar_repr(const Scalar& scalar) {
    std::string name = scalar.type_name;
    std::string value;
    auto read = [&](auto sample) {
        decltype(sample) v;
        std::memcpy(&v, scalar.bytes, sizeof v);
        return v;
    };
    if (name == "f32")
        value = nb::cast<std::string>(nb::repr(nb::float_(read(0.0f))));
    else if (name == "f64")
        value = nb::cast<std::string>(nb::repr(nb::float_(read(0.0))));
    else if (name == "ptr")
        value = "0x" + [&] {
            char b[20];
            std::snprintf(b, sizeof b, "%llx",
                          static_cast<unsigned long long>(read(std::uint64_t{})));
            return std::string(b);
        }();
    else if (name[0] == 'i') {
        long long v = scalar.size == 1   ? read(std::int8_t{})
                      : scalar.size == 2 ? read(std::int16_t{})
                      : scalar.size == 4 ? read(std::int32_t{})
                                         : read(std::int64_t{});
        value = std::to_string(v);
    } else {
        unsigned long long v = scalar.size == 1   ? read(std::uint8_t{})
                               : scalar.size == 2 ? read(std::uint16_t{})
                               : scalar.size == 4 ? read(std::uint32_t{})
                                                  : read(std::uint64_t{});
        value = std::to_string(v);
    }
    return "kcache." + name + "(" + value + ")";
}

}  // namespace

void bind_scalars(nb::module_& m) {
    auto cls =
        nb::class_<Scalar>(m, "Scalar",
                           "A kernel argument with its C type: made by kcache.i32(), "
                           "kcache.f32(), kcache.ptr(), ...")
            .def_prop_ro(
                "size", [](const Scalar& s) { return s.size; }, "The argument's size in bytes.")
            .def_prop_ro(
                "type", [](const Scalar& s) { return s.type_name; },
                "The C type's short name (\"f32\", \"u64\", \"ptr\", ...).")
            .def("__repr__", &scalar_repr);
    g_scalar_type = reinterpret_cast<PyTypeObject*>(cls.ptr());

#define KCACHE_INTEGER(name, type, doc) \
    m.def(                              \
        #name, [](nb::handle v) { return integer<type>(v, #name); }, nb::arg("value"), doc)
    KCACHE_INTEGER(i8, std::int8_t, "A signed 8-bit kernel argument (char, int8_t).");
    KCACHE_INTEGER(u8, std::uint8_t, "An unsigned 8-bit kernel argument (uint8_t, bool).");
    KCACHE_INTEGER(i16, std::int16_t, "A signed 16-bit kernel argument (short, int16_t).");
    KCACHE_INTEGER(u16, std::uint16_t, "An unsigned 16-bit kernel argument (uint16_t).");
    KCACHE_INTEGER(i32, std::int32_t, "A signed 32-bit kernel argument (int, .s32).");
    KCACHE_INTEGER(u32, std::uint32_t, "An unsigned 32-bit kernel argument (unsigned, .u32).");
    KCACHE_INTEGER(i64, std::int64_t, "A signed 64-bit kernel argument (long long, .s64).");
    KCACHE_INTEGER(u64, std::uint64_t, "An unsigned 64-bit kernel argument (size_t, .u64).");
#undef KCACHE_INTEGER
    m.def(
        "f32", [](nb::handle v) { return floating<float>(v, "f32"); }, nb::arg("value"),
        "A 32-bit float kernel argument (float, .f32).");
    m.def(
        "f64", [](nb::handle v) { return floating<double>(v, "f64"); }, nb::arg("value"),
        "A 64-bit float kernel argument (double, .f64).");
    m.def(
        "ptr", [](nb::handle v) { return make_scalar(device_pointer(v), "ptr"); }, nb::arg("value"),
        "A device pointer argument (8 bytes): from an int address or any device buffer kcache "
        "takes (torch CUDA tensor, CuPy array, __cuda_array_interface__, DLPack).");
    // For the tests: what a launch would pass, without a GPU.
    m.def("_packed_arguments", &packed_arguments, "Each argument's bytes as a launch passes them.");
    m.def("_launch_shape", &launch_shape, nb::arg("grid"), nb::arg("block"),
          nb::arg("stream").none(), "(grid, block, stream address) as a launch reads them.");
    m.def("_cluster_shape", &cluster_shape, nb::arg("grid"), nb::arg("cluster"),
          "The cluster shape a launch on `grid` reads from `cluster`.");
}

}  // namespace kcache::python
