/*
 * The delivery sink: where scan() (_cscan.c) puts a continuous pull's messages, built and batched in C.
 *
 * A consume's IO-thread work for one message used to be three Python calls (the engine's _on_message, its
 * _make_msg, Msg.__init__ with its eleven assignments): at 128 B about half of what the IO thread does for a
 * message once the parser was compiled. A DeliverySink stands in the subscription's handler slot for such an
 * engine (ContinuousPull, _delivery/_pull.py). For each JetStream delivery (its reply subject starts with the
 * ack prefix) it builds the Msg itself and appends it to a batch; scan() hands the batch to the engine's
 * deliver(msgs, size) in one call before it calls any other Python (so a subscription's messages keep their
 * order) and before it returns. Everything else (statuses and heartbeats, which have no ack subject; messages
 * with headers when the engine must read them, pinned priority groups; a subject that is not UTF-8) goes to the
 * engine's slow handler, the same method the pure-Python path calls for every message. Calling the sink from
 * Python calls that slow handler too, so the Python parser can treat it as any handler.
 *
 * The Msg is built as Msg.__init__ builds it, minus the call: allocated by its type and its slots written
 * through their offsets, which the constructor reads from the type's member descriptors (and refuses a type
 * whose slots are not plain object slots). _codec and _value stay unset, as __init__ leaves them.
 * tests/unit/runtime/test_delivery_sink.py compares every slot of a sink's Msg with Msg.__init__'s.
 */
#include "_cscan.h"

#include <string.h>
#include <structmember.h>

enum {
    S_SUBJECT,
    S_REPLY,
    S_DATA,
    S_HEADER_BLOCK,
    S_HEADERS,
    S_METADATA,
    S_SENDER,
    S_ACKED,
    S_ACK_UNCONFIRMED,
    S_IN_PROGRESS,
    S_SIZE,
    N_SLOTS
};

static const char *const slot_names[N_SLOTS] = {
    "subject", "reply",   "data",         "_header_block", "_headers", "_metadata",
    "_sender", "_acked", "_ack_unconfirmed", "_in_progress", "size",
};

typedef struct {
    PyObject_HEAD
    PyTypeObject *msg_type;
    PyObject *slow;     /* the engine's per-message handler: subject, reply, data, headers (bytes) */
    PyObject *deliver;  /* the engine's batch handler: deliver(msgs: list[Msg], size: int) */
    PyObject *sender;   /* each Msg's _sender (the engine's acks) */
    PyObject *ack_none; /* each Msg's _acked: True on an AckNone consumer */
    PyObject *prefix;   /* bytes: the reply subjects taken here start with it ($JS.ACK.) */
    int headers_fast;   /* messages with headers are taken here too */
    Py_ssize_t offsets[N_SLOTS];
    PyObject *pending; /* the batch (a list), or NULL */
    Py_ssize_t pending_size;
} DeliverySink;

/* the offset of msg_type's object slot ``name``; -1 with an error set when it has no such writable slot */
static Py_ssize_t slot_offset(PyTypeObject *msg_type, const char *name) {
    PyObject *descr = PyObject_GetAttrString((PyObject *)msg_type, name);
    Py_ssize_t offset = -1;
    if (descr == NULL) {
        return -1;
    }
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY) &&
            PyType_IsSubtype(msg_type, PyDescr_TYPE(descr))) {
            offset = member->offset;
        }
    }
    Py_DECREF(descr);
    if (offset < 0) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a writable object slot", msg_type->tp_name, name);
    }
    return offset;
}

static PyObject *sink_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"msg_type", "slow", "deliver", "sender", "ack_none", "prefix", "headers_fast", NULL};
    PyObject *msg_type, *slow, *deliver, *sender, *prefix;
    int ack_none, headers_fast;
    DeliverySink *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOOpO!p:DeliverySink", keywords, &PyType_Type, &msg_type,
                                     &slow, &deliver, &sender, &ack_none, &PyBytes_Type, &prefix, &headers_fast)) {
        return NULL;
    }
    if (!PyCallable_Check(slow) || !PyCallable_Check(deliver)) {
        PyErr_SetString(PyExc_TypeError, "DeliverySink: slow and deliver must be callable");
        return NULL;
    }
    if (((PyTypeObject *)msg_type)->tp_itemsize != 0) {
        PyErr_SetString(PyExc_TypeError, "DeliverySink: the message type must be of fixed size");
        return NULL;
    }
    self = (DeliverySink *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    for (int i = 0; i < N_SLOTS; i++) {
        self->offsets[i] = slot_offset((PyTypeObject *)msg_type, slot_names[i]);
        if (self->offsets[i] < 0) {
            Py_DECREF(self);
            return NULL;
        }
    }
    Py_INCREF(msg_type);
    self->msg_type = (PyTypeObject *)msg_type;
    Py_INCREF(slow);
    self->slow = slow;
    Py_INCREF(deliver);
    self->deliver = deliver;
    Py_INCREF(sender);
    self->sender = sender;
    self->ack_none = PyBool_FromLong(ack_none);
    Py_INCREF(prefix);
    self->prefix = prefix;
    self->headers_fast = headers_fast;
    return (PyObject *)self;
}

static int sink_traverse(DeliverySink *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->msg_type);
    Py_VISIT(self->slow);
    Py_VISIT(self->deliver);
    Py_VISIT(self->sender);
    Py_VISIT(self->pending);
    return 0;
}

static int sink_clear(DeliverySink *self) {
    Py_CLEAR(self->msg_type);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->deliver);
    Py_CLEAR(self->sender);
    Py_CLEAR(self->ack_none);
    Py_CLEAR(self->prefix);
    Py_CLEAR(self->pending);
    return 0;
}

static void sink_dealloc(DeliverySink *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    sink_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type); /* a heap type: its instances hold a reference */
}

/* calling the sink (the Python parser does, for a frame scan() left to it) calls the slow handler */
static PyObject *sink_call(DeliverySink *self, PyObject *args, PyObject *kwargs) {
    if (self->slow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "DeliverySink: cleared");
        return NULL;
    }
    return PyObject_Call(self->slow, args, kwargs);
}

/* text of a subject; NULL without an error set when it is not UTF-8 (the slow handler then says so, as the
 * pure-Python path does), NULL with one when out of memory */
static PyObject *subject_text(const char *data, Py_ssize_t length) {
    PyObject *text = PyUnicode_DecodeUTF8(data, length, NULL);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
    }
    return text;
}

int sink_take(PyObject *sink, const Frame *frame) {
    DeliverySink *self = (DeliverySink *)sink;
    Py_ssize_t prefix_len, size;
    PyObject *values[N_SLOTS] = {NULL}, *msg;
    int i;

    if (self->msg_type == NULL) {
        return 0; /* cleared (a cycle being collected): the slow path says so */
    }
    prefix_len = PyBytes_GET_SIZE(self->prefix);
    if (frame->reply_len < prefix_len || memcmp(frame->reply, PyBytes_AS_STRING(self->prefix), prefix_len) != 0 ||
        (frame->header_len && !self->headers_fast)) {
        return 0;
    }
    values[S_SUBJECT] = subject_text(frame->subject, frame->subject_len);
    if (values[S_SUBJECT] == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    values[S_REPLY] = subject_text(frame->reply, frame->reply_len);
    if (values[S_REPLY] == NULL) {
        Py_DECREF(values[S_SUBJECT]);
        return PyErr_Occurred() ? -1 : 0;
    }
    size = frame->subject_len + frame->reply_len + frame->payload_len + frame->header_len;
    values[S_DATA] = slice_of(frame->buf, frame->payload_at, frame->payload_len);
    if (frame->header_len) {
        values[S_HEADER_BLOCK] = slice_of(frame->buf, frame->header_at, frame->header_len);
    } else {
        values[S_HEADER_BLOCK] = Py_NewRef(Py_None);
    }
    values[S_HEADERS] = Py_NewRef(Py_None);
    values[S_METADATA] = Py_NewRef(Py_None);
    values[S_SENDER] = Py_NewRef(self->sender);
    values[S_ACKED] = Py_NewRef(self->ack_none);
    values[S_ACK_UNCONFIRMED] = Py_NewRef(Py_False);
    values[S_IN_PROGRESS] = Py_NewRef(Py_False);
    values[S_SIZE] = PyLong_FromSsize_t(size);
    msg = values[S_DATA] != NULL && values[S_HEADER_BLOCK] != NULL && values[S_SIZE] != NULL
              ? self->msg_type->tp_alloc(self->msg_type, 0)
              : NULL;
    if (msg == NULL) {
        for (i = 0; i < N_SLOTS; i++) {
            Py_XDECREF(values[i]);
        }
        return -1;
    }
    for (i = 0; i < N_SLOTS; i++) {
        *(PyObject **)((char *)msg + self->offsets[i]) = values[i]; /* a fresh object: every slot is NULL */
    }
    if (self->pending == NULL) {
        self->pending = PyList_New(0);
        if (self->pending == NULL) {
            Py_DECREF(msg);
            return -1;
        }
    }
    if (PyList_Append(self->pending, msg) < 0) {
        Py_DECREF(msg);
        return -1;
    }
    Py_DECREF(msg);
    self->pending_size += size;
    return 1;
}

int sink_flush(PyObject *sink) {
    DeliverySink *self = (DeliverySink *)sink;
    PyObject *call[2], *result;

    if (self->pending == NULL) {
        return 0;
    }
    call[0] = self->pending;
    self->pending = NULL;
    call[1] = PyLong_FromSsize_t(self->pending_size);
    self->pending_size = 0;
    if (call[1] == NULL || self->deliver == NULL) {
        if (call[1] != NULL) {
            PyErr_SetString(PyExc_RuntimeError, "DeliverySink: cleared");
        }
        Py_DECREF(call[0]);
        Py_XDECREF(call[1]);
        return -1;
    }
    result = PyObject_Vectorcall(self->deliver, call, 2, NULL);
    Py_DECREF(call[0]);
    Py_DECREF(call[1]);
    if (result == NULL) {
        return -1;
    }
    Py_DECREF(result);
    return 0;
}

static PyMemberDef sink_members[] = {
    {"msg_type", T_OBJECT, offsetof(DeliverySink, msg_type), READONLY, "the type of the messages built"},
    {"headers_fast", T_INT, offsetof(DeliverySink, headers_fast), READONLY,
     "messages with headers are built here too (else they go to the slow handler)"},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(sink_doc,
             "DeliverySink(msg_type, slow, deliver, sender, ack_none, prefix, headers_fast)\n\n"
             "A fast handler for scan(): each message whose reply subject starts with prefix (and has no\n"
             "headers unless headers_fast) is built as a msg_type and batched for deliver(msgs, size); any\n"
             "other goes to slow(subject, reply, data, headers), which calling the sink calls too.");

static PyType_Slot sink_slots[] = {
    {Py_tp_doc, (void *)sink_doc},
    {Py_tp_new, (void *)sink_new},
    {Py_tp_traverse, (void *)sink_traverse},
    {Py_tp_clear, (void *)sink_clear},
    {Py_tp_dealloc, (void *)sink_dealloc},
    {Py_tp_call, (void *)sink_call},
    {Py_tp_members, (void *)sink_members},
    {0, NULL},
};

static PyType_Spec sink_spec = {
    .name = "jetstream_sync._runtime._cscan.DeliverySink",
    .basicsize = sizeof(DeliverySink),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = sink_slots,
};

PyObject *sink_type_new(PyObject *module) { return PyType_FromModuleAndSpec(module, &sink_spec, NULL); }

/* a heap type per interpreter, one tp_call for all of them */
int is_sink(PyObject *obj) { return Py_TYPE(obj)->tp_call == (ternaryfunc)sink_call; }
