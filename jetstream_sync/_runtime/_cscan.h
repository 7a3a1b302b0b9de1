/*
 * What the two sources of the compiled extension (_cscan.c: the scanner and the PUB encoder; _csink.c: the
 * delivery sink) share. See _scan.py for the extension as a whole.
 */
#ifndef JETSTREAM_SYNC_CSCAN_H
#define JETSTREAM_SYNC_CSCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* a new DeliverySink type (_csink.c) for the module (a heap type: one per interpreter), or NULL with an error */
PyObject *sink_type_new(PyObject *module);

/* obj is a DeliverySink (of any interpreter's type) */
int is_sink(PyObject *obj);

/* A message for a sink, as scan() found it in the received chunk: views into it, nothing copied yet. */
typedef struct {
    PyObject *buf; /* the chunk (bytes) */
    const char *subject;
    Py_ssize_t subject_len;
    const char *reply;
    Py_ssize_t reply_len;
    Py_ssize_t header_at; /* offset in buf of the header block; header_len 0: none */
    Py_ssize_t header_len;
    Py_ssize_t payload_at;
    Py_ssize_t payload_len;
} Frame;

/* 1: the sink built the frame's Msg and batched it; 0: not one it takes (its slow handler gets it, after a
 * flush); -1: an error is set (out of memory) */
int sink_take(PyObject *sink, const Frame *frame);

/* hand the sink's batch to its deliver callable (nothing when empty); 0, or -1 with the callable's error set */
int sink_flush(PyObject *sink);

/* the bytes of buf[start:start+length], buf itself when that is all of it */
PyObject *slice_of(PyObject *buf, Py_ssize_t start, Py_ssize_t length);

#endif
