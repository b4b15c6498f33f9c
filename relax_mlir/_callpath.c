/* The common call of a compiled function with static shapes, in one native call: for each argument, check that
 * it is exactly a NumPy array of the parameter's dtype and shape, C-contiguous, writable and aligned, and write
 * its data pointer into the function's descriptor buffer. Any argument that does not fit makes the whole call
 * answer False and the caller takes the general (Python) route, which converts or refuses it with the full error.
 * Preallocated results (``out=``) are checked the same way against the results' dtypes and shapes, and must share
 * no byte with any argument or with each other (compiled code reads its arguments while it writes its results).
 *
 * Also here, for the Trainer's per-step checks: ``all_finite(arrays)``, whether every floating value a step wrote
 * (bfloat16 included) is finite (training/nan_policy.py; a large scan split across the compiled kernels' OpenMP
 * threads);
 * ``call_into``, the Trainer's step in one call (the checks above, the compiled function, then the scan of what
 * it wrote: 4.5 us of an 81 us tutorial-MLP step saved against three calls from Python); and
 * ``labels_in_range(y, lo, hi)``, whether class labels name a class; one pass over each array, no Python work per
 * element.
 *
 * An argument's dtype, flags, shape and data pointer are read with NumPy's C API accessors (PyArray_DESCR, ...:
 * a few nanoseconds an array, where the buffer protocol and the dtype attribute took tens: the tutorial MLP's
 * 25 arrays are checked and written in 0.3 us, and the call with them took 2.9 us before, 2.0 after, in
 * benchmarks/trainer_overhead.py); the scans read through the buffer protocol, once a call. Python side:
 * relax_mlir/backend/callpath.py (the same checks, written in Python, are the route when this module is not
 * built). Built at install by setup.py (against NumPy's headers), as an optional extension.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#define PLAN_NAME "relax_mlir.callpath.plan"
#define MAX_RANK 16

typedef struct {
    Py_ssize_t base;        /* the descriptor's first slot in the buffer; the aligned pointer goes to base + 1 */
    PyObject *dtype;        /* the parameter's numpy.dtype (a new reference) */
    uintptr_t align_mask;   /* dtype.alignment - 1 */
    int ndim;
    int scan_width;         /* a result's bytes per float that call_into scans (2, 4, 8), or 0: not scanned */
    Py_ssize_t shape[MAX_RANK];
} Param;

typedef struct {
    Py_ssize_t n;           /* parameters: params[0 .. n) */
    Py_ssize_t n_results;   /* results: params[n .. n + n_results) */
    PyObject *ndarray;      /* numpy.ndarray (a new reference): the exact class every argument must have */
    Param params[];
} Plan;

static void plan_free(PyObject *capsule) {
    Plan *plan = (Plan *)PyCapsule_GetPointer(capsule, PLAN_NAME);
    if (plan == NULL) {
        PyErr_Clear();
        return;
    }
    for (Py_ssize_t i = 0; i < plan->n + plan->n_results; i++)
        Py_XDECREF(plan->params[i].dtype);
    Py_XDECREF(plan->ndarray);
    PyMem_Free(plan);
}

/* Reads one (base, dtype, align_mask, shape_tuple[, scan_width]) entry into p; 0 on success, -1 with an error
 * set. */
static int read_spec(PyObject *entry, Param *p) {
    PyObject *dtype, *shape;
    Py_ssize_t base, mask;
    int scan_width = 0;
    if (!PyArg_ParseTuple(entry, "nOnO!|i", &base, &dtype, &mask, &PyTuple_Type, &shape, &scan_width))
        return -1;
    if (scan_width != 0 && scan_width != 2 && scan_width != 4 && scan_width != 8) {
        PyErr_Format(PyExc_ValueError, "make_plan: scan width %d is not 0, 2, 4 or 8", scan_width);
        return -1;
    }
    p->base = base;
    p->scan_width = scan_width;
    p->align_mask = (uintptr_t)mask;
    p->ndim = (int)PyTuple_GET_SIZE(shape);
    if (p->ndim > MAX_RANK) {
        PyErr_Format(PyExc_ValueError, "make_plan: rank %d is above %d", p->ndim, MAX_RANK);
        return -1;
    }
    for (int d = 0; d < p->ndim; d++) {
        p->shape[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        if (p->shape[d] == -1 && PyErr_Occurred())
            return -1;
    }
    Py_INCREF(dtype);
    p->dtype = dtype;
    return 0;
}

/* make_plan(ndarray_type, params, results=()) -> capsule; each entry (base, dtype, align_mask, shape_tuple) */
static PyObject *make_plan(PyObject *self, PyObject *args) {
    PyObject *ndarray, *specs, *result_specs = NULL;
    if (!PyArg_ParseTuple(args, "OO|O", &ndarray, &specs, &result_specs))
        return NULL;
    PyObject *seq = PySequence_Fast(specs, "make_plan: the parameters must be a sequence");
    if (seq == NULL)
        return NULL;
    PyObject *rseq = result_specs ? PySequence_Fast(result_specs, "make_plan: the results must be a sequence")
                                  : PyTuple_New(0);
    if (rseq == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), m = PySequence_Fast_GET_SIZE(rseq);
    Plan *plan = (Plan *)PyMem_Calloc(1, sizeof(Plan) + (size_t)(n + m) * sizeof(Param));
    if (plan == NULL) {
        Py_DECREF(seq);
        Py_DECREF(rseq);
        return PyErr_NoMemory();
    }
    Py_INCREF(ndarray);
    plan->ndarray = ndarray;
    /* plan->n and n_results count what is read so far, so that plan_free releases exactly those dtypes */
    for (Py_ssize_t i = 0; i < n; i++, plan->n++)
        if (read_spec(PySequence_Fast_GET_ITEM(seq, i), &plan->params[i]) < 0)
            goto fail;
    for (Py_ssize_t i = 0; i < m; i++, plan->n_results++)
        if (read_spec(PySequence_Fast_GET_ITEM(rseq, i), &plan->params[n + i]) < 0)
            goto fail;
    Py_DECREF(seq);
    Py_DECREF(rseq);
    PyObject *capsule = PyCapsule_New(plan, PLAN_NAME, plan_free);
    if (capsule == NULL)
        goto free_plan;
    return capsule;
fail:
    Py_DECREF(seq);
    Py_DECREF(rseq);
free_plan:
    for (Py_ssize_t i = 0; i < plan->n + plan->n_results; i++)
        Py_XDECREF(plan->params[i].dtype);
    Py_DECREF(plan->ndarray);
    PyMem_Free(plan);
    return NULL;
}

/* One argument: 1 written, 0 not fitting (the general route), -1 an error set. The span of its bytes goes to
 * span[0..1] when span is not NULL. */
static int write_one(const Param *p, PyObject *ndarray, PyObject *a, int64_t *buf, uintptr_t *span) {
    if ((PyObject *)Py_TYPE(a) != ndarray)
        return 0;
    PyArrayObject *arr = (PyArrayObject *)a;
    PyObject *dtype = (PyObject *)PyArray_DESCR(arr);
    if (dtype != p->dtype) {
        int same = PyObject_RichCompareBool(dtype, p->dtype, Py_EQ);
        if (same <= 0) {
            if (same < 0)
                PyErr_Clear();
            return 0;
        }
    }
    /* C-contiguous and writable, or the general route (which copies what must be copied) */
    int wanted = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_WRITEABLE;
    if ((PyArray_FLAGS(arr) & wanted) != wanted || PyArray_NDIM(arr) != p->ndim)
        return 0;
    const npy_intp *dims = PyArray_DIMS(arr);
    for (int d = 0; d < p->ndim; d++)
        if (dims[d] != p->shape[d])
            return 0;
    uintptr_t data = (uintptr_t)PyArray_DATA(arr);
    if (data == 0 || (data & p->align_mask) != 0)
        return 0;
    buf[p->base + 1] = (int64_t)data;
    if (span != NULL) {
        span[0] = data;
        span[1] = data + (uintptr_t)PyArray_NBYTES(arr);
    }
    return 1;
}

/* Checks every argument (and every out, when outs is not NULL) against the plan and writes its descriptor:
 * 1 all fitted, 0 some did not (nothing in the buffer to trust then). outs must not overlap the arguments or each
 * other; spans receives [lo, hi) of every argument, then of every out (room for 2 * (n + n_results)). */
static int fit_args(const Plan *plan, PyObject *argtuple, int64_t *buf, PyObject *outs, uintptr_t *spans) {
    if (PyTuple_GET_SIZE(argtuple) != plan->n || (outs != NULL && PyTuple_GET_SIZE(outs) != plan->n_results))
        return 0;
    int ok = 1;
    for (Py_ssize_t i = 0; ok == 1 && i < plan->n; i++)
        ok = write_one(&plan->params[i], plan->ndarray, PyTuple_GET_ITEM(argtuple, i), buf,
                       spans ? spans + 2 * i : NULL);
    for (Py_ssize_t j = 0; ok == 1 && outs != NULL && j < plan->n_results; j++) {
        Py_ssize_t k = plan->n + j;
        uintptr_t *span = spans + 2 * k;
        ok = write_one(&plan->params[k], plan->ndarray, PyTuple_GET_ITEM(outs, j), buf, span);
        for (Py_ssize_t i = 0; ok == 1 && i < k; i++)  /* empty arrays share no byte with anything */
            if (span[0] < span[1] && spans[2 * i] < spans[2 * i + 1] && span[0] < spans[2 * i + 1] &&
                spans[2 * i] < span[1])
                ok = 0;
    }
    return ok;
}

/* The plan and buffer of write_args/call_into's first arguments; NULL with an error set. */
static Plan *plan_and_buffer(PyObject *const *args, int64_t **buf) {
    Plan *plan = (Plan *)PyCapsule_GetPointer(args[0], PLAN_NAME);
    if (plan == NULL)
        return NULL;
    *buf = (int64_t *)PyLong_AsVoidPtr(args[2]);
    if (*buf == NULL && PyErr_Occurred())
        return NULL;
    return plan;
}

/* write_args(plan, args: tuple, buffer_address[, outs: tuple]) -> bool: every argument (and every out= array)
 * fitted and its descriptor is written; outs must not overlap the arguments or each other. */
static PyObject *write_args(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 3 && nargs != 4) || !PyTuple_Check(args[1]) || (nargs == 4 && !PyTuple_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError, "write_args(plan, args: tuple, buffer_address: int[, outs: tuple])");
        return NULL;
    }
    int64_t *buf;
    Plan *plan = plan_and_buffer(args, &buf);
    if (plan == NULL)
        return NULL;
    PyObject *outs = nargs == 4 ? args[3] : NULL;
    uintptr_t *spans = NULL;
    if (outs != NULL) {
        spans = (uintptr_t *)PyMem_Malloc(sizeof(uintptr_t) * 2 * (size_t)(plan->n + plan->n_results + 1));
        if (spans == NULL)
            return PyErr_NoMemory();
    }
    int ok = fit_args(plan, args[1], buf, outs, spans);
    PyMem_Free(spans);
    return PyBool_FromLong(ok);
}

/* Whether every element of a contiguous float buffer is finite: a value is NaN or infinite exactly when its
 * exponent bits are all ones (bfloat16 is a float32's high half: its exponent is float32's 8 bits). The loop ORs
 * one comparison per element (no early exit: it vectorizes), a block at a time so that a non-finite value stops
 * the scan at the end of its block. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
/* chosen at load from the CPU; all_finite of the tutorial MLP's 26k results: AVX2 3.4 us a call, AVX-512 2.6 */
#define WIDE_VECTORS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WIDE_VECTORS
#endif
#define FINITE_SCAN(NAME, UINT, EXPONENT)                                                                \
    WIDE_VECTORS static int NAME(const UINT *x, Py_ssize_t n) {                                                         \
        for (Py_ssize_t start = 0; start < n; start += 4096) {                                             \
            Py_ssize_t end = n - start < 4096 ? n : start + 4096;                                          \
            int bad = 0;                                                                                   \
            for (Py_ssize_t i = start; i < end; i++)                                                       \
                bad |= (x[i] & (EXPONENT)) == (EXPONENT);                                                  \
            if (bad)                                                                                       \
                return 0;                                                                                  \
        }                                                                                                  \
        return 1;                                                                                          \
    }
FINITE_SCAN(finite16, uint16_t, 0x7c00u)
FINITE_SCAN(finitebf16, uint16_t, 0x7f80u)
FINITE_SCAN(finite32, uint32_t, 0x7f800000u)
FINITE_SCAN(finite64, uint64_t, 0x7ff0000000000000ull)

/* A large scan is split across the threads of the OpenMP runtime the compiled kernels run on (its pool is hot
 * after a step, and a thread of our own would compete with its spinning workers for the cores): GOMP_parallel,
 * which LLVM's and Intel's runtimes provide as well, is looked up in the runtime already loaded
 * (use_openmp(path); never loads one). Below PARALLEL_SCAN_BYTES one thread scans: the fork costs more. */
typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
static gomp_parallel_fn gomp_parallel;
static int (*omp_thread_num)(void);
static int (*omp_num_threads)(void);
#define PARALLEL_SCAN_BYTES (4 << 20)
#define MAX_SCAN_THREADS 64

static PyObject *use_openmp(PyObject *self, PyObject *path_obj) {
    const char *path = PyUnicode_AsUTF8(path_obj);
    if (path == NULL)
        return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        Py_RETURN_FALSE;
    void *fork = dlsym(lib, "GOMP_parallel"), *num = dlsym(lib, "omp_get_thread_num");
    void *count = dlsym(lib, "omp_get_num_threads");
    if (fork == NULL || num == NULL || count == NULL) {
        dlclose(lib);
        Py_RETURN_FALSE;
    }
    gomp_parallel = (gomp_parallel_fn)fork;  /* the handle stays open: the runtime is never unloaded under us */
    omp_thread_num = (int (*)(void))num;
    omp_num_threads = (int (*)(void))count;
    Py_RETURN_TRUE;
}

typedef struct {
    const char *data;
    Py_ssize_t n;   /* elements */
    int width;      /* bytes per element: 2, 4 or 8 */
    int bfloat16;   /* width 2: bfloat16, not float16 */
} Span;

typedef struct {
    const Span *spans;
    Py_ssize_t count, total;  /* spans; elements in all of them */
    int bad[MAX_SCAN_THREADS];
} Scan;

static int span_finite(const Span *s, Py_ssize_t lo, Py_ssize_t hi) {
    switch (s->width) {
    case 2: return (s->bfloat16 ? finitebf16 : finite16)((const uint16_t *)s->data + lo, hi - lo);
    case 4: return finite32((const uint32_t *)s->data + lo, hi - lo);
    default: return finite64((const uint64_t *)s->data + lo, hi - lo);
    }
}

/* Elements [lo, hi) of the spans laid end to end. */
static int range_finite(const Scan *scan, Py_ssize_t lo, Py_ssize_t hi) {
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < scan->count && start < hi; start += scan->spans[i].n, i++) {
        Py_ssize_t a = lo > start ? lo - start : 0, b = hi - start < scan->spans[i].n ? hi - start : scan->spans[i].n;
        if (a < b && !span_finite(&scan->spans[i], a, b))
            return 0;
    }
    return 1;
}

static void scan_part(void *arg) {
    Scan *scan = arg;
    int t = omp_thread_num(), n = omp_num_threads();
    if (t >= MAX_SCAN_THREADS)
        return;
    if (n > MAX_SCAN_THREADS)
        n = MAX_SCAN_THREADS;
    Py_ssize_t chunk = (scan->total + n - 1) / n, lo = chunk * t, hi = lo + chunk < scan->total ? lo + chunk : scan->total;
    scan->bad[t] = lo < hi && !range_finite(scan, lo, hi);
}

/* Whether every element of the spans is finite; with threads > 1 and the OpenMP runtime known, a scan of
 * PARALLEL_SCAN_BYTES or more is split across that many threads. Called without the GIL. */
static int spans_finite(const Span *spans, Py_ssize_t count, Py_ssize_t total, Py_ssize_t bytes, int threads) {
    if (threads > 1 && gomp_parallel != NULL && bytes >= PARALLEL_SCAN_BYTES) {
        Scan scan = {spans, count, total, {0}};
        gomp_parallel(scan_part, &scan, (unsigned)(threads > MAX_SCAN_THREADS ? MAX_SCAN_THREADS : threads), 0);
        int ok = 1;
        for (int t = 0; t < MAX_SCAN_THREADS; t++)
            ok &= !scan.bad[t];
        return ok;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (!span_finite(&spans[i], 0, spans[i].n))
            return 0;
    return 1;
}

/* Whether ``obj`` is a NumPy array of ``bfloat16`` (the scalar type of ml_dtypes' bfloat16, or NULL): a dtype
 * NumPy's buffer protocol cannot describe (it has no format character), told apart by its scalar type. */
static int is_bfloat16_array(PyObject *obj, PyObject *bfloat16) {
    return bfloat16 != NULL && PyArray_Check(obj) &&
           (PyObject *)PyArray_DESCR((PyArrayObject *)obj)->typeobj == bfloat16;
}

/* all_finite(arrays: tuple | list, threads=1, bfloat16=None) -> True, False, or None when some array is not one
 * this scan reads (a float format other than native float16/32/64 and bfloat16, or a buffer that is not
 * C-contiguous): the caller checks then. ``bfloat16``: the scalar type (ml_dtypes.bfloat16) whose arrays are read
 * as bfloat16. Arrays of integers or booleans are finite. With threads > 1 and the OpenMP runtime known
 * (use_openmp), a scan of PARALLEL_SCAN_BYTES or more is split across that many threads; the GIL is released
 * while it runs. */
static PyObject *all_finite(PyObject *self, PyObject *args) {
    PyObject *arrays, *bfloat16 = NULL;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "O|iO:all_finite", &arrays, &threads, &bfloat16))
        return NULL;
    if (bfloat16 == Py_None)
        bfloat16 = NULL;
    PyObject *seq = PySequence_Fast(arrays, "all_finite: expected a sequence of arrays");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), held = 0, count = 0, total = 0, bytes = 0;
    Py_buffer *views = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    Span *spans = PyMem_Calloc(n ? n : 1, sizeof(Span));
    PyObject *answer = Py_True;
    if (views == NULL || spans == NULL) {
        answer = NULL;
        PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; answer == Py_True && i < n; i++) {
        Py_buffer *view = &views[held];
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        int brain = is_bfloat16_array(item, bfloat16);  /* (its buffer has no format: asked without one) */
        if (PyObject_GetBuffer(item, view, PyBUF_C_CONTIGUOUS | (brain ? 0 : PyBUF_FORMAT)) < 0) {
            PyErr_Clear();
            answer = Py_None;
            break;
        }
        held++;
        const char *f = view->format ? view->format : "B";
        if (f[0] == '@' || f[0] == '=')
            f++;  /* native byte order */
        int width = 0;
        if (brain) {
            if (PyArray_ISNOTSWAPPED((PyArrayObject *)item) && view->itemsize == 2)
                width = 2;
        } else if (f[0] != '\0' && f[1] == '\0' && strchr("bBhHiIlLqQnN?", f[0]) != NULL)
            continue;  /* integers and booleans: always finite */
        else if (strcmp(f, "e") == 0 && view->itemsize == 2)
            width = 2;
        else if (strcmp(f, "f") == 0 && view->itemsize == 4)
            width = 4;
        else if (strcmp(f, "d") == 0 && view->itemsize == 8)
            width = 8;
        if (width == 0) {
            answer = Py_None;  /* long double, complex, byte-swapped, structured: not read here */
            break;
        }
        spans[count].data = view->buf;
        spans[count].n = view->len / width;
        spans[count].width = width;
        spans[count].bfloat16 = brain;
        total += spans[count].n;
        bytes += view->len;
        count++;
    }
    if (answer == Py_True && count > 0) {
        int ok;
        Py_BEGIN_ALLOW_THREADS
        ok = spans_finite(spans, count, total, bytes, threads);
        Py_END_ALLOW_THREADS
        answer = ok ? Py_True : Py_False;
    }
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(spans);
    Py_DECREF(seq);
    Py_XINCREF(answer);
    return answer;
}

/* call_into(plan, args: tuple, buffer_address, outs: tuple, function_address, argv_address, threads) -> None
 * when some argument or out does not fit the plan (nothing was called: the caller takes the general route), else
 * the compiled function is called on them (without the GIL) and the answer is whether every result the plan
 * scans (scan_width) is then finite: one native call for the Trainer's step, the arrays read once for both the
 * call and the scan. threads: as all_finite's; 0 scans nothing (the answer is True). */
static PyObject *call_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyTuple_Check(args[1]) || !PyTuple_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "call_into(plan, args: tuple, buffer_address: int, outs: tuple, "
                                         "function_address: int, argv_address: int, threads: int)");
        return NULL;
    }
    int64_t *buf;
    Plan *plan = plan_and_buffer(args, &buf);
    if (plan == NULL)
        return NULL;
    void (*fn)(void *) = (void (*)(void *))PyLong_AsVoidPtr(args[4]);
    void *argv = PyLong_AsVoidPtr(args[5]);
    long threads = PyLong_AsLong(args[6]);
    if ((fn == NULL || argv == NULL) && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "call_into: null function or argv address");
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t slots = plan->n + plan->n_results;
    uintptr_t *spans = (uintptr_t *)PyMem_Malloc(sizeof(uintptr_t) * 2 * (size_t)(slots + 1));
    Span *scan = (Span *)PyMem_Malloc(sizeof(Span) * (size_t)(plan->n_results + 1));
    if (spans == NULL || scan == NULL) {
        PyMem_Free(spans);
        PyMem_Free(scan);
        return PyErr_NoMemory();
    }
    PyObject *answer = Py_None;
    if (fit_args(plan, args[1], buf, args[3], spans)) {
        Py_ssize_t count = 0, total = 0, bytes = 0;
        for (Py_ssize_t j = 0; threads > 0 && j < plan->n_results; j++) {
            const Param *p = &plan->params[plan->n + j];
            uintptr_t lo = spans[2 * (plan->n + j)], hi = spans[2 * (plan->n + j) + 1];
            if (p->scan_width == 0 || hi <= lo)
                continue;
            scan[count].data = (const char *)lo;
            scan[count].n = (Py_ssize_t)(hi - lo) / p->scan_width;
            scan[count].width = p->scan_width;
            scan[count].bfloat16 = 0;  /* (results of bfloat16 are not scanned here: callpath.py gives them no width) */
            total += scan[count].n;
            bytes += (Py_ssize_t)(hi - lo);
            count++;
        }
        int ok;
        Py_BEGIN_ALLOW_THREADS  /* the outs stay alive: the caller holds them for the whole call */
        fn(argv);
        ok = spans_finite(scan, count, total, bytes, (int)threads);
        Py_END_ALLOW_THREADS
        answer = ok ? Py_True : Py_False;
    }
    PyMem_Free(spans);
    PyMem_Free(scan);
    Py_INCREF(answer);
    return answer;
}

/* Whether lo <= x < hi for every element of a contiguous integer array, in one pass (OR of two comparisons per
 * element, vectorized like the finite scan). */
#define RANGE_SCAN(NAME, INT)                                                                            \
    WIDE_VECTORS static int NAME(const INT *x, Py_ssize_t n, long long lo, long long hi) {                \
        int bad = 0;                                                                                       \
        for (Py_ssize_t i = 0; i < n; i++)                                                                 \
            bad |= (x[i] < lo) | (x[i] >= hi);                                                             \
        return !bad;                                                                                       \
    }
RANGE_SCAN(range64, int64_t)
RANGE_SCAN(range32, int32_t)

/* labels_in_range(array, lo, hi) -> True, False, or None when the array is not a C-contiguous native int32 or
 * int64 one (the caller checks it with NumPy). */
static PyObject *labels_in_range(PyObject *self, PyObject *args) {
    PyObject *a;
    long long lo, hi;
    if (!PyArg_ParseTuple(args, "OLL", &a, &lo, &hi))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(a, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const char *f = view.format ? view.format : "B";
    if (f[0] == '@' || f[0] == '=')
        f++;
    int answer = -1;
    if (f[0] != '\0' && f[1] == '\0' && strchr("lqn", f[0]) != NULL && view.itemsize == 8)
        answer = range64((const int64_t *)view.buf, view.len / 8, lo, hi);
    else if (f[0] != '\0' && f[1] == '\0' && strchr("il", f[0]) != NULL && view.itemsize == 4)
        answer = range32((const int32_t *)view.buf, view.len / 4, lo, hi);
    PyBuffer_Release(&view);
    if (answer < 0)
        Py_RETURN_NONE;
    return PyBool_FromLong(answer);
}

static PyMethodDef methods[] = {
    {"make_plan", make_plan, METH_VARARGS,
     "make_plan(ndarray, params, results=()) -> plan; each entry (base, dtype, align_mask, shape)"},
    {"write_args", (PyCFunction)(void (*)(void))write_args, METH_FASTCALL,
     "write_args(plan, args, buffer_address[, outs]) -> whether every argument (and out) fitted, descriptors "
     "written"},
    {"call_into", (PyCFunction)(void (*)(void))call_into, METH_FASTCALL,
     "call_into(plan, args, buffer_address, outs, function_address, argv_address, threads) -> None (did not fit, "
     "not called) or whether every scanned result is finite after the call"},
    {"all_finite", all_finite, METH_VARARGS,
     "all_finite(arrays, threads=1, bfloat16=None) -> whether every float is finite (None: an array this scan does "
     "not read; bfloat16: the scalar type whose arrays are read as bfloat16); "
     "large scans split across the OpenMP runtime's threads once use_openmp(path) found it"},
    {"use_openmp", use_openmp, METH_O,
     "use_openmp(path) -> whether the OpenMP runtime at path is loaded and lends its threads to all_finite"},
    {"labels_in_range", labels_in_range, METH_VARARGS,
     "labels_in_range(array, lo, hi) -> whether lo <= x < hi everywhere (None: not a contiguous int32/int64 array)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "relax_mlir._callpath",
                                    "The common call's argument checks, native (see callpath.py).", -1, methods};

PyMODINIT_FUNC PyInit__callpath(void) {
    import_array();  /* (returns NULL with ImportError when NumPy's C API is not there: the Python route then) */
    return PyModule_Create(&module);
}
