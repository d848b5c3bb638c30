// SPDX-License-Identifier: Apache-2.0
// kcache::Error as Python exceptions: the classes live in kcache/_errors.py, one per code.
#include <Python.h>

#include "bindings.hpp"

namespace kcache::python {

nb::object error_object(const Error& error, nb::handle cause) {
    nb::object errors = nb::module_::import_("kcache._errors");
    nb::object type = errors.attr("error_class")(errc_name(error.code()));
    nb::object instance = type(nb::str(error.message().c_str(), error.message().size()),
                               nb::str(error.log().c_str(), error.log().size()));
    if (cause.is_valid() && !cause.is_none()) {
        // PyException_SetCause steals its argument.
        PyException_SetCause(instance.ptr(), nb::borrow(cause).release().ptr());
    }
    return instance;
}

void raise_error(const Error& error, nb::handle cause) {
    if (cause.is_valid() && !cause.is_none() &&
        !PyObject_IsInstance(cause.ptr(), PyExc_Exception)) {
        // An interrupt or exit inside a generator stays what it was.
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(cause.ptr())), cause.ptr());
        throw nb::python_error();
    }
    nb::object instance = error_object(error, cause);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
    throw nb::python_error();
}

}  // namespace kcache::python
