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
#include "_cscan.h"

#include <string.h>

/* what _scan.py expects of this build (it falls back to the Python path, saying why, when they differ): raised
 * whenever the module's functions or types change what they take or give */
#define REVISION 2

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

PyObject *slice_of(PyObject *buf, Py_ssize_t start, Py_ssize_t length) {
    if (start == 0 && length == PyBytes_GET_SIZE(buf)) {
        Py_INCREF(buf);
        return buf;
    }
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(buf) + start, length);
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

/* hand the batch of the sink in *pending to it (_csink.c) and drop the reference; its deliver's Exception goes to
 * on_error (the batch is dropped, as a handler's message is); -1 for anything else */
static int flush_pending(PyObject **pending, PyObject *on_error) {
    PyObject *sink = *pending;
    int result = 0;
    if (sink == NULL) {
        return 0;
    }
    *pending = NULL;
    if (sink_flush(sink) < 0 && handler_failed(on_error) < 0) {
        result = -1;
    }
    Py_DECREF(sink);
    return result;
}

PyDoc_STRVAR(scan_doc,
             "scan(buf, pos, handlers, limit, stats, on_error) -> int\n\n"
             "Dispatch the fast-handler messages from buf[pos:] to their handlers; the position of the first\n"
             "operation not taken. stats['in_msgs'] and stats['in_bytes'] count what was dispatched; a\n"
             "handler's Exception goes to on_error(exc). A DeliverySink handler batches what it takes; the\n"
             "batch is delivered before any other handler is called and before scan returns.");

static PyObject *scan(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    PyObject *buf, *handlers, *stats, *on_error, *pending = NULL; /* pending: the sink holding a batch */
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
        if (is_sink(handler)) {
            Frame frame = {buf,
                           data + arg_at[0],
                           arg_len[0],
                           reply_arg < 0 ? "" : data + arg_at[reply_arg],
                           reply_arg < 0 ? 0 : arg_len[reply_arg],
                           start,
                           (Py_ssize_t)header_size,
                           start + (Py_ssize_t)header_size,
                           (Py_ssize_t)(total - header_size)};
            int took;
            if (pending != NULL && pending != handler && flush_pending(&pending, on_error) < 0) {
                Py_DECREF(handler);
                failed = 1;
                break;
            }
            took = sink_take(handler, &frame);
            if (took < 0) {
                Py_DECREF(handler);
                failed = 1;
                break;
            }
            if (took) {
                pos = stop + 2;
                msgs++;
                nbytes += total - header_size;
                if (pending == NULL) {
                    pending = handler; /* the reference goes with it */
                } else {
                    Py_DECREF(handler);
                }
                continue;
            }
        }
        /* a Python call: the batch goes first, so a subscription's messages keep their order */
        if (flush_pending(&pending, on_error) < 0) {
            Py_DECREF(handler);
            failed = 1;
            break;
        }
        call[0] = PyBytes_FromStringAndSize(data + arg_at[0], arg_len[0]);
        call[1] = reply_arg < 0 ? PyBytes_FromStringAndSize("", 0)
                                : PyBytes_FromStringAndSize(data + arg_at[reply_arg], arg_len[reply_arg]);
        call[2] = slice_of(buf, start + (Py_ssize_t)header_size, (Py_ssize_t)(total - header_size));
        if (header_size) {
            call[3] = slice_of(buf, start, (Py_ssize_t)header_size);
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
    if (pending != NULL) {
        /* what was batched is delivered, failing or not (an error already raised stays the one raised) */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (flush_pending(&pending, on_error) < 0) {
            if (type != NULL) {
                PyErr_WriteUnraisable(on_error);
            } else {
                failed = 1;
            }
        }
        if (type != NULL) {
            PyErr_Restore(type, value, traceback);
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

/* -- publishing: the PUB/HPUB command of _protocol.encode_pub / encode_pub_parts, byte for byte ------------- */

/* Above this payload size a command is (head, payload, CRLF), as _protocol.LARGE_PAYLOAD says (a test checks). */
#define LARGE_PAYLOAD 4096
#define MAX_LEN_DIGITS 20

/* a view of a bytes-like argument: bytes directly, anything else through the buffer protocol (as %b takes it) */
typedef struct {
    const char *data;
    Py_ssize_t len;
    Py_buffer view;
    int held;
} Part;

static int part_get(PyObject *obj, Part *part) {
    part->held = 0;
    if (PyBytes_Check(obj)) {
        part->data = PyBytes_AS_STRING(obj);
        part->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyObject_GetBuffer(obj, &part->view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    part->held = 1;
    part->data = (const char *)part->view.buf;
    part->len = part->view.len;
    return 0;
}

static void part_release(Part *part) {
    if (part->held) {
        PyBuffer_Release(&part->view);
        part->held = 0;
    }
}

/* the decimal digits of n (>= 0) into out; their count */
static Py_ssize_t format_len(Py_ssize_t n, char *out) {
    char tmp[MAX_LEN_DIGITS];
    Py_ssize_t count = 0, i;
    do {
        tmp[count++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    for (i = 0; i < count; i++) {
        out[i] = tmp[count - 1 - i];
    }
    return count;
}

/* "PUB subject [reply] size\r\n" or "HPUB subject [reply] hsize total\r\n", then (when body) headers, payload and
 * CRLF: the whole command, or (body 0) the head of a large one, headers included */
static PyObject *build_pub(Part *subject, Part *reply, Part *headers, Part *payload, int body) {
    char hlen_text[MAX_LEN_DIGITS], total_text[MAX_LEN_DIGITS];
    Py_ssize_t hlen_digits = 0, total_digits, size, hlen = headers != NULL ? headers->len : 0;
    PyObject *out;
    char *at;

    if (headers != NULL) {
        hlen_digits = format_len(hlen, hlen_text);
    }
    total_digits = format_len(hlen + payload->len, total_text);
    size = (headers != NULL ? 5 : 4) + subject->len + 1 + (reply->len ? reply->len + 1 : 0) +
           (headers != NULL ? hlen_digits + 1 : 0) + total_digits + 2 + hlen + (body ? payload->len + 2 : 0);
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) {
        return NULL;
    }
    at = PyBytes_AS_STRING(out);
    if (headers != NULL) {
        memcpy(at, "HPUB ", 5);
        at += 5;
    } else {
        memcpy(at, "PUB ", 4);
        at += 4;
    }
    memcpy(at, subject->data, (size_t)subject->len);
    at += subject->len;
    *at++ = ' ';
    if (reply->len) {
        memcpy(at, reply->data, (size_t)reply->len);
        at += reply->len;
        *at++ = ' ';
    }
    if (headers != NULL) {
        memcpy(at, hlen_text, (size_t)hlen_digits);
        at += hlen_digits;
        *at++ = ' ';
    }
    memcpy(at, total_text, (size_t)total_digits);
    at += total_digits;
    *at++ = '\r';
    *at++ = '\n';
    if (hlen) {
        memcpy(at, headers->data, (size_t)hlen);
        at += hlen;
    }
    if (body) {
        memcpy(at, payload->data, (size_t)payload->len);
        at += payload->len;
        *at++ = '\r';
        *at++ = '\n';
    }
    return out;
}

/* the four arguments as views; the command (whole, or as parts when parts and the payload is large) */
static PyObject *encode(PyObject *const *args, Py_ssize_t nargs, const char *name, int parts) {
    Part subject, reply, headers, payload;
    PyObject *result = NULL, *head, *crlf;
    int with_headers;

    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "%s() takes 4 arguments: subject, reply, headers, payload", name);
        return NULL;
    }
    with_headers = args[2] != Py_None;
    if (part_get(args[0], &subject) < 0) {
        return NULL;
    }
    if (args[1] == Py_None) { /* no reply, as b"" (the reference tests the reply's truth) */
        reply.held = 0;
        reply.len = 0;
        reply.data = "";
    } else if (part_get(args[1], &reply) < 0) {
        part_release(&subject);
        return NULL;
    }
    if (with_headers && part_get(args[2], &headers) < 0) {
        part_release(&subject);
        part_release(&reply);
        return NULL;
    }
    if (part_get(args[3], &payload) < 0) {
        goto done;
    }
    if (!parts || payload.len <= LARGE_PAYLOAD) {
        result = build_pub(&subject, &reply, with_headers ? &headers : NULL, &payload, 1);
    } else {
        head = build_pub(&subject, &reply, with_headers ? &headers : NULL, &payload, 0);
        crlf = head != NULL ? PyBytes_FromStringAndSize("\r\n", 2) : NULL;
        if (crlf != NULL) {
            result = PyTuple_Pack(3, head, args[3], crlf);
        }
        Py_XDECREF(head);
        Py_XDECREF(crlf);
    }
    part_release(&payload);
done:
    part_release(&subject);
    part_release(&reply);
    if (with_headers) {
        part_release(&headers);
    }
    return result;
}

PyDoc_STRVAR(encode_pub_doc,
             "encode_pub(subject, reply, headers, payload) -> bytes\n\n"
             "One PUB (headers None) or HPUB command, as _protocol.encode_pub builds it.");

static PyObject *encode_pub(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    return encode(args, nargs, "encode_pub", 0);
}

PyDoc_STRVAR(encode_pub_parts_doc,
             "encode_pub_parts(subject, reply, headers, payload) -> bytes | tuple[bytes, ...]\n\n"
             "A PUB or HPUB command as _protocol.encode_pub_parts builds it: one bytes, or (head, payload, CRLF)\n"
             "when the payload is larger than LARGE_PAYLOAD.");

static PyObject *encode_pub_parts(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    return encode(args, nargs, "encode_pub_parts", 1);
}

static int module_exec(PyObject *module) {
    PyObject *sink_type = sink_type_new(module);
    if (sink_type == NULL) {
        return -1;
    }
    if (PyModule_AddObject(module, "DeliverySink", sink_type) < 0) {
        Py_DECREF(sink_type);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "REVISION", REVISION) < 0) {
        return -1;
    }
    return PyModule_AddIntConstant(module, "LARGE_PAYLOAD", LARGE_PAYLOAD);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL, scan_doc},
    {"encode_pub", (PyCFunction)(void (*)(void))encode_pub, METH_FASTCALL, encode_pub_doc},
    {"encode_pub_parts", (PyCFunction)(void (*)(void))encode_pub_parts, METH_FASTCALL, encode_pub_parts_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef_Slot slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "jetstream_sync._runtime._cscan",
    "The compiled fast paths of the protocol parser (see _parser.py) and of PUB encoding; optional.",
    0,
    methods,
    slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__cscan(void) { return PyModuleDef_Init(&module_def); }
