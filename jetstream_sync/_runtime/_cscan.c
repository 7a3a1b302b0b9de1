/*
 * The compiled fast path of the protocol parser (jetstream_sync/_runtime/_parser.py): optional, built where a
 * C compiler and Python's headers exist (setup.py declares it optional=True), skipped silently where not.
 *
 * It does one thing: from a position in a received chunk, it parses the consecutive MSG/HMSG frames that are
 * well formed, complete, within the size limit and addressed to a subscription with a fast handler, calls the
 * handler of each, and returns the position of the first operation it did not take. Everything else (control
 * lines, messages for nats-py's own subscriptions, incomplete frames, anything unusual or malformed) is left to
 * the pure-Python parser, which stays the reference: it takes that one operation and calls this again. So the
 * two paths cannot differ in what they accept or in the errors they raise; tests/unit/runtime/
 * test_parser_paths.py feeds both the same streams cut at every byte and compares everything they hand on.
 *
 * The GIL is held throughout: every step creates or calls Python objects, and the only long step, copying a
 * payload, is a memcpy of at most max_payload bytes that costs less than a GIL hand-over would (dropping the
 * GIL on the IO thread lets a consumer's thread take it for up to the switch interval, 5 ms).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_ARGS 6
#define MAX_DIGITS 18

static int is_space(char c) {
    /* what bytes.split() splits on */
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

/* digits only (as int() takes them, without sign, underscores or spaces), at most MAX_DIGITS; -1 otherwise */
static long long parse_count(const char *s, Py_ssize_t n) {
    long long value = 0;
    if (n < 1 || n > MAX_DIGITS) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        value = value * 10 + (s[i] - '0');
    }
    return value;
}

/* the position of the first CRLF in [from, end), or -1 (bytes.find(b"\r\n", from)) */
static Py_ssize_t find_crlf(const char *data, Py_ssize_t from, Py_ssize_t end) {
    while (from < end - 1) {
        const char *cr = memchr(data + from, '\r', (size_t)(end - 1 - from));
        if (cr == NULL) {
            return -1;
        }
        from = cr - data;
        if (data[from + 1] == '\n') {
            return from;
        }
        from++;
    }
    return -1;
}

static PyObject *slice(PyObject *buf, const char *data, Py_ssize_t start, Py_ssize_t length, Py_ssize_t end) {
    if (start == 0 && length == end) {
        Py_INCREF(buf);
        return buf;
    }
    return PyBytes_FromStringAndSize(data + start, length);
}

/* stats[key] += amount */
static int add_stat(PyObject *stats, const char *key, long long amount) {
    PyObject *old = PyDict_GetItemString(stats, key); /* borrowed */
    PyObject *delta = PyLong_FromLongLong(amount);
    PyObject *sum;
    int failed;
    if (delta == NULL) {
        return -1;
    }
    if (old == NULL) {
        sum = delta;
        Py_INCREF(sum);
    } else {
        sum = PyNumber_Add(old, delta);
    }
    Py_DECREF(delta);
    if (sum == NULL) {
        return -1;
    }
    failed = PyDict_SetItemString(stats, key, sum);
    Py_DECREF(sum);
    return failed;
}

/* the handler raised: an Exception goes to on_error (which logs it) and the message is dropped; 0 then.
 * Anything else (KeyboardInterrupt, SystemExit) stays raised, as it does in the pure-Python path; -1. */
static int handler_failed(PyObject *on_error) {
    PyObject *type, *value, *traceback, *result;
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        return -1;
    }
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL && value != NULL) {
        PyException_SetTraceback(value, traceback);
    }
    result = PyObject_CallOneArg(on_error, value != NULL ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    if (result == NULL) {
        return -1;
    }
    Py_DECREF(result);
    return 0;
}

PyDoc_STRVAR(scan_doc,
             "scan(buf, pos, handlers, limit, stats, on_error) -> int\n\n"
             "Dispatch the fast-handler messages from buf[pos:] to their handlers; the position of the first\n"
             "operation not taken. stats['in_msgs'] and stats['in_bytes'] count what was dispatched; a\n"
             "handler's Exception goes to on_error(exc).");

static PyObject *scan(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    PyObject *buf, *handlers, *stats, *on_error;
    Py_ssize_t pos, limit, end;
    const char *data;
    long long msgs = 0, nbytes = 0;
    int failed = 0;

    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "scan() takes 6 arguments: buf, pos, handlers, limit, stats, on_error");
        return NULL;
    }
    buf = args[0];
    handlers = args[2];
    stats = args[4];
    on_error = args[5];
    pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyBytes_CheckExact(buf) || !PyDict_CheckExact(handlers) || !PyDict_Check(stats) || pos < 0) {
        return PyLong_FromSsize_t(pos); /* not what it knows (a bytearray from another transport): all to Python */
    }
    limit = PyLong_AsSsize_t(args[3]);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    data = PyBytes_AS_STRING(buf);
    end = PyBytes_GET_SIZE(buf);

    while (pos < end) {
        Py_ssize_t op_end, eol, at, start, stop, count = 0;
        Py_ssize_t arg_at[MAX_ARGS], arg_len[MAX_ARGS];
        long long sid, header_size = 0, total;
        int with_headers, reply_arg = -1;
        PyObject *key, *handler, *call[4], *result;

        if (data[pos] == 'M') {
            with_headers = 0;
            op_end = pos + 4;
            if (op_end > end || memcmp(data + pos, "MSG ", 4) != 0) {
                break;
            }
        } else if (data[pos] == 'H') {
            with_headers = 1;
            op_end = pos + 5;
            if (op_end > end || memcmp(data + pos, "HMSG ", 5) != 0) {
                break;
            }
        } else {
            break;
        }
        eol = find_crlf(data, op_end, end);
        if (eol < 0) {
            break;
        }
        at = op_end;
        while (at < eol) {
            while (at < eol && is_space(data[at])) {
                at++;
            }
            if (at == eol) {
                break;
            }
            if (count == MAX_ARGS) {
                count++; /* too many: the Python path says what is wrong */
                break;
            }
            arg_at[count] = at;
            while (at < eol && !is_space(data[at])) {
                at++;
            }
            arg_len[count] = at - arg_at[count];
            count++;
        }
        /* MSG subject sid [reply] total; HMSG subject sid [reply] header_size total */
        if (count == 4 + with_headers) {
            reply_arg = 2;
        } else if (count != 3 + with_headers) {
            break;
        }
        sid = parse_count(data + arg_at[1], arg_len[1]);
        total = parse_count(data + arg_at[count - 1], arg_len[count - 1]);
        if (with_headers) {
            header_size = parse_count(data + arg_at[count - 2], arg_len[count - 2]);
        }
        if (sid < 0 || total < 0 || header_size < 0 || total < header_size || total > limit) {
            break;
        }
        start = eol + 2;
        stop = start + (Py_ssize_t)total;
        if (stop + 2 > end) {
            break;
        }
        key = PyLong_FromLongLong(sid);
        if (key == NULL) {
            failed = 1;
            break;
        }
        handler = PyDict_GetItemWithError(handlers, key); /* borrowed */
        Py_DECREF(key);
        if (handler == NULL || handler == Py_None) {
            if (handler == NULL && PyErr_Occurred()) {
                failed = 1;
            }
            break; /* nats-py's own subscription (or none): the Python path hands it to _process_msg */
        }
        Py_INCREF(handler); /* the handler may drop itself from the dict */
        call[0] = PyBytes_FromStringAndSize(data + arg_at[0], arg_len[0]);
        call[1] = reply_arg < 0 ? PyBytes_FromStringAndSize("", 0)
                                : PyBytes_FromStringAndSize(data + arg_at[reply_arg], arg_len[reply_arg]);
        call[2] = slice(buf, data, start + (Py_ssize_t)header_size, (Py_ssize_t)(total - header_size), end);
        if (header_size) {
            call[3] = slice(buf, data, start, (Py_ssize_t)header_size, end);
        } else {
            call[3] = Py_None;
            Py_INCREF(Py_None);
        }
        if (call[0] == NULL || call[1] == NULL || call[2] == NULL || call[3] == NULL) {
            Py_XDECREF(call[0]);
            Py_XDECREF(call[1]);
            Py_XDECREF(call[2]);
            Py_XDECREF(call[3]);
            Py_DECREF(handler);
            failed = 1;
            break;
        }
        pos = stop + 2;
        msgs++;
        nbytes += total - header_size;
        result = PyObject_Vectorcall(handler, call, 4, NULL);
        Py_DECREF(handler);
        Py_DECREF(call[0]);
        Py_DECREF(call[1]);
        Py_DECREF(call[2]);
        Py_DECREF(call[3]);
        if (result != NULL) {
            Py_DECREF(result);
        } else if (handler_failed(on_error) < 0) {
            failed = 1;
            break;
        }
    }
    if (msgs) {
        /* counted also when failing, as the Python path's finally: counts what reached a handler */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (add_stat(stats, "in_msgs", msgs) < 0 || add_stat(stats, "in_bytes", nbytes) < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            return NULL;
        }
        PyErr_Restore(type, value, traceback);
    }
    if (failed) {
        return NULL;
    }
    return PyLong_FromSsize_t(pos);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef_Slot slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "jetstream_sync._runtime._cscan",
    "The compiled fast path of the protocol parser (see _parser.py); optional.",
    0,
    methods,
    slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__cscan(void) { return PyModuleDef_Init(&module_def); }
