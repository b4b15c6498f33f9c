/* The common call of a compiled function with static shapes, in one native call: for each argument, check that
 * it is exactly a NumPy array of the parameter's dtype and shape, C-contiguous, writable and aligned, and write
 * its data pointer into the function's descriptor buffer. Any argument that does not fit makes the whole call
 * answer False and the caller takes the general (Python) route, which converts or refuses it with the full error.
 *
 * The data pointer is read through the buffer protocol (PyObject_GetBuffer), the documented interface; nothing
 * reads an object's layout. Python side: relax_mlir/backend/callpath.py (the same checks, written in Python, are
 * the route when this module is not built). Built at install by setup.py, as an optional extension.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define PLAN_NAME "relax_mlir.callpath.plan"
#define MAX_RANK 16

typedef struct {
    Py_ssize_t base;        /* the descriptor's first slot in the buffer; the aligned pointer goes to base + 1 */
    PyObject *dtype;        /* the parameter's numpy.dtype (a new reference) */
    uintptr_t align_mask;   /* dtype.alignment - 1 */
    int ndim;
    Py_ssize_t shape[MAX_RANK];
} Param;

typedef struct {
    Py_ssize_t n;
    PyObject *ndarray;      /* numpy.ndarray (a new reference): the exact class every argument must have */
    Param params[];
} Plan;

static PyObject *dtype_name;  /* interned "dtype" */

static void plan_free(PyObject *capsule) {
    Plan *plan = (Plan *)PyCapsule_GetPointer(capsule, PLAN_NAME);
    if (plan == NULL) {
        PyErr_Clear();
        return;
    }
    for (Py_ssize_t i = 0; i < plan->n; i++)
        Py_XDECREF(plan->params[i].dtype);
    Py_XDECREF(plan->ndarray);
    PyMem_Free(plan);
}

/* make_plan(ndarray_type, [(base, dtype, align_mask, shape_tuple), ...]) -> capsule */
static PyObject *make_plan(PyObject *self, PyObject *args) {
    PyObject *ndarray, *specs;
    if (!PyArg_ParseTuple(args, "OO", &ndarray, &specs))
        return NULL;
    PyObject *seq = PySequence_Fast(specs, "make_plan: the parameters must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Plan *plan = (Plan *)PyMem_Calloc(1, sizeof(Plan) + (size_t)n * sizeof(Param));
    if (plan == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    Py_INCREF(ndarray);
    plan->ndarray = ndarray;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *dtype, *shape;
        Py_ssize_t base, mask;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "nOnO!", &base, &dtype, &mask, &PyTuple_Type,
                              &shape))
            goto fail;
        Param *p = &plan->params[i];
        p->base = base;
        p->align_mask = (uintptr_t)mask;
        p->ndim = (int)PyTuple_GET_SIZE(shape);
        if (p->ndim > MAX_RANK) {
            PyErr_Format(PyExc_ValueError, "make_plan: rank %d is above %d", p->ndim, MAX_RANK);
            goto fail;
        }
        for (int d = 0; d < p->ndim; d++) {
            p->shape[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
            if (p->shape[d] == -1 && PyErr_Occurred())
                goto fail;
        }
        Py_INCREF(dtype);
        p->dtype = dtype;
        plan->n = i + 1;
    }
    plan->n = n;
    Py_DECREF(seq);
    PyObject *capsule = PyCapsule_New(plan, PLAN_NAME, plan_free);
    if (capsule == NULL)
        goto free_plan;
    return capsule;
fail:
    Py_DECREF(seq);
free_plan:
    for (Py_ssize_t i = 0; i < plan->n; i++)
        Py_XDECREF(plan->params[i].dtype);
    Py_DECREF(plan->ndarray);
    PyMem_Free(plan);
    return NULL;
}

/* One argument: 1 written, 0 not fitting (the general route), -1 an error set. */
static int write_one(const Param *p, PyObject *ndarray, PyObject *a, int64_t *buf) {
    if ((PyObject *)Py_TYPE(a) != ndarray)
        return 0;
    PyObject *dtype = PyObject_GetAttr(a, dtype_name);
    if (dtype == NULL) {
        PyErr_Clear();
        return 0;
    }
    int same = dtype == p->dtype;
    if (!same) {
        same = PyObject_RichCompareBool(dtype, p->dtype, Py_EQ);
        if (same < 0) {
            PyErr_Clear();
            same = 0;
        }
    }
    Py_DECREF(dtype);
    if (!same)
        return 0;
    Py_buffer view;
    /* C-contiguous and writable, or the general route (which copies what must be copied) */
    if (PyObject_GetBuffer(a, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    int ok = view.ndim == p->ndim && view.buf != NULL && ((uintptr_t)view.buf & p->align_mask) == 0;
    for (int d = 0; ok && d < p->ndim; d++)
        ok = view.shape[d] == p->shape[d];
    if (ok)
        buf[p->base + 1] = (int64_t)(intptr_t)view.buf;
    PyBuffer_Release(&view);
    return ok;
}

/* write_args(plan, args_tuple, buffer_address) -> bool */
static PyObject *write_args(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "write_args(plan, args: tuple, buffer_address: int)");
        return NULL;
    }
    Plan *plan = (Plan *)PyCapsule_GetPointer(args[0], PLAN_NAME);
    if (plan == NULL)
        return NULL;
    int64_t *buf = (int64_t *)PyLong_AsVoidPtr(args[2]);
    if (buf == NULL && PyErr_Occurred())
        return NULL;
    if (PyTuple_GET_SIZE(args[1]) != plan->n)
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < plan->n; i++) {
        int r = write_one(&plan->params[i], plan->ndarray, PyTuple_GET_ITEM(args[1], i), buf);
        if (r < 0)
            return NULL;
        if (r == 0)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"make_plan", make_plan, METH_VARARGS, "make_plan(ndarray, [(base, dtype, align_mask, shape), ...]) -> plan"},
    {"write_args", (PyCFunction)(void (*)(void))write_args, METH_FASTCALL,
     "write_args(plan, args, buffer_address) -> whether every argument fitted (descriptors written)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "relax_mlir._callpath",
                                    "The common call's argument checks, native (see callpath.py).", -1, methods};

PyMODINIT_FUNC PyInit__callpath(void) {
    dtype_name = PyUnicode_InternFromString("dtype");
    if (dtype_name == NULL)
        return NULL;
    return PyModule_Create(&module);
}
