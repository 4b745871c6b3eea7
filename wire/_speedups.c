/* samsa.wire._speedups: the generated message layouts, interpreted in C.
 *
 * tools/gen_messages.py writes beside each message's pure-Python codec its layouts as field programs
 * (format and opcodes in wire/program.py). compile() turns them into Layout objects; decode, decode_from
 * and encode walk them, building exactly the objects the pure decoders build (same classes, lists,
 * str, bytes, memoryview slices of the input, uuid.UUID) and writing exactly the bytes the pure
 * encoders write. wire/codec.py installs these as Message.decode, decode_from and encode.
 *
 * Safety: every read is checked against the end of the input; an array count is checked against the
 * bytes left before anything is allocated (every element takes at least one byte); a struct is read
 * through slot offsets only when the object's type is the layout's class, by attribute otherwise.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* Opcodes: the same numbers as wire/program.py (codec.py refuses a build whose OPCODES differ). */
enum {
    OP_INT8 = 1, OP_INT16, OP_UINT16, OP_INT32, OP_UINT32, OP_INT64, OP_FLOAT64, OP_BOOL, OP_UUID,
    OP_STRING, OP_BYTES, OP_RECORDS, OP_STRUCT,
};
#define OP_BASE 0x0f
#define F_ARRAY 0x10
#define F_COMPACT 0x20
#define F_NULLABLE 0x40
#define F_ZERO_COPY 0x80

static const Py_ssize_t FIXED_SIZE[] = {0, 1, 2, 2, 4, 4, 8, 8, 1, 16};
#define IS_FIXED(base) ((base) >= OP_INT8 && (base) <= OP_UUID)

/* Bytes-like values at least this long are copied once, straight into the output buffer. */
#define CHUNK_MIN 2048

/* Bytes-like records at least this long are referenced by a FrameBuffer, not copied: codec.REFERENCE_MIN. */
static Py_ssize_t reference_min = PY_SSIZE_T_MAX;

enum { DEF_CONST, DEF_NONE, DEF_LIST, DEF_STRUCT };

typedef struct Layout Layout;

typedef struct {
    int op;
    Py_ssize_t offset;   /* the slot in the layout's class */
    PyObject *attr;      /* attribute name */
    PyObject *what;      /* "Struct.attr", for error messages */
    Layout *sub;         /* the element layout of a struct or struct array (owned by Layout.subs) */
    int64_t tag;         /* tagged fields */
    int dkind;           /* tagged and absent fields: their default */
    PyObject *deflt;     /* DEF_CONST: the value; DEF_STRUCT: a private default instance */
    int must_match;      /* absent fields: a non-default value cannot be encoded */
} Field;

struct Layout {
    PyObject_HEAD
    PyTypeObject *cls;
    PyObject *name;
    int flexible;
    Py_ssize_t unknown_offset;
    Py_ssize_t nfields, ntagged, nabsent;
    Field *fields, *tagged, *absent;
    PyObject *subs;      /* list: the layouts this one refers to */
};

typedef struct {
    PyObject_HEAD
    PyObject *name;
    long lo;
    Py_ssize_t n;
    PyObject *layouts;   /* tuple of Layout, by version - lo */
} MessageCodec;

static PyTypeObject LayoutType;
static PyTypeObject MessageCodecType;

/* Set by configure(). */
static PyObject *CodecError, *UnsupportedVersionError, *UuidUnknown;
static PyTypeObject *UuidType, *FrameBufferType, *StructType;
static Py_ssize_t uuid_int_offset, uuid_safe_offset;

static PyObject *s_accel, *s_holes, *s_size, *s_read_bytes, *s_bytes, *s_pure_encode,
    *s_unknown_tagged;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

static inline void set_slot(PyObject *o, Py_ssize_t off, PyObject *v) /* steals v */
{
    PyObject **slot = &SLOT(o, off);
    PyObject *old = *slot;
    *slot = v;
    Py_XDECREF(old);
}

/* ============================================================================================ */
/* Instances of the generated classes                                                           */
/* ============================================================================================ */

/* Decoding a message makes one object per struct, and dropping it frees them all: for the small
 * messages CPython's generic path for a class with __slots__ (PyType_GenericAlloc, subtype_dealloc,
 * the allocator behind them) costs more than reading the fields. adopt() gives each generated class
 * its own tp_alloc and tp_dealloc, which keep a freed instance's memory on a free list by size and
 * reuse it, as CPython does for tuples and lists. A subclass keeps CPython's own (its tp_dealloc,
 * subtype_dealloc, calls struct_dealloc for the slots it inherits, which then frees it). */

#define FREE_SLOTS 32   /* instances with up to this many slots are kept when freed... */
#define FREE_KEEP 1024  /* ...this many of each size */

static PyObject *free_list[FREE_SLOTS + 1]; /* linked through each block's first slot */
static int free_count[FREE_SLOTS + 1];
static destructor generic_dealloc; /* subtype_dealloc: what a Python class has (Struct's) */

static inline Py_ssize_t slot_count(PyTypeObject *t)
{
    return (t->tp_basicsize - (Py_ssize_t)sizeof(PyObject)) / (Py_ssize_t)sizeof(PyObject *);
}

#define FIRST_SLOT(o) SLOT(o, sizeof(PyObject))

static void struct_dealloc(PyObject *o);

static PyObject *struct_alloc(PyTypeObject *t, Py_ssize_t nitems)
{
    Py_ssize_t n = slot_count(t);
    if (t->tp_dealloc != struct_dealloc || n > FREE_SLOTS || free_list[n] == NULL)
        return PyType_GenericAlloc(t, nitems);
    PyObject *o = free_list[n];
    free_list[n] = FIRST_SLOT(o);
    free_count[n]--;
    memset(&FIRST_SLOT(o), 0, n * sizeof(PyObject *));
    Py_SET_TYPE(o, (PyTypeObject *)Py_NewRef(t));
    _Py_NewReference(o);
    PyObject_GC_Track(o);
    return o;
}

static void struct_dealloc(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    PyObject_GC_UnTrack(o);
    Py_TRASHCAN_BEGIN(o, struct_dealloc)
    PyTypeObject *adopted = t; /* t, or the generated class a subclass derives from */
    while (adopted->tp_dealloc != struct_dealloc)
        adopted = adopted->tp_base;
    Py_ssize_t n = slot_count(adopted); /* its slots come first, and are all it has */
    for (PyObject **slot = &FIRST_SLOT(o), **end = slot + n; slot < end; slot++)
        Py_CLEAR(*slot);
    if (adopted == t && n <= FREE_SLOTS && free_count[n] < FREE_KEEP) {
        FIRST_SLOT(o) = free_list[n];
        free_list[n] = o;
        free_count[n]++;
    }
    else
        t->tp_free(o);
    Py_DECREF(t);
    Py_TRASHCAN_END
}

/* Give a generated class struct_alloc and struct_dealloc when it is what they assume: a Python class
 * whose instances hold nothing but its own __slots__ (no __dict__, no weak references, no __del__,
 * bases that add no slots), as the generator writes them. Anything else keeps CPython's own. */
static void adopt(PyTypeObject *t)
{
    if (t->tp_dealloc != generic_dealloc || !(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || !PyType_IS_GC(t) ||
        t->tp_alloc != PyType_GenericAlloc || t->tp_free != PyObject_GC_Del || t->tp_itemsize != 0 ||
        t->tp_dictoffset != 0 || t->tp_weaklistoffset != 0 || t->tp_finalize != NULL || t->tp_del != NULL ||
        slot_count(t) < 1 || slot_count(t) != Py_SIZE(t))
        return;
    for (PyTypeObject *k = t->tp_base; k != &PyBaseObject_Type; k = k->tp_base)
        if (k == NULL || k->tp_basicsize != (Py_ssize_t)sizeof(PyObject) || k->tp_dictoffset != 0 ||
            k->tp_weaklistoffset != 0 || k->tp_finalize != NULL || k->tp_del != NULL)
            return;
    t->tp_alloc = struct_alloc;
    t->tp_dealloc = struct_dealloc;
}

/* ============================================================================================ */
/* Defaults                                                                                     */
/* ============================================================================================ */

/* A fresh copy of a default instance: lists are new (they are empty there), nested structs copied. */
static PyObject *clone_default(PyObject *proto)
{
    PyTypeObject *t = Py_TYPE(proto);
    PyObject *o = t->tp_alloc(t, 0);
    if (o == NULL)
        return NULL;
    for (PyTypeObject *k = t; k != NULL && k != StructType; k = k->tp_base) {
        for (PyMemberDef *m = k->tp_members; m != NULL && m->name != NULL; m++) {
            if (m->type != T_OBJECT_EX)
                continue;
            PyObject *v = SLOT(proto, m->offset), *copy;
            if (v == NULL)
                continue;
            if (PyList_CheckExact(v))
                copy = PyList_New(0);
            else if (PyObject_TypeCheck(v, StructType))
                copy = clone_default(v);
            else
                copy = Py_NewRef(v);
            if (copy == NULL) {
                Py_DECREF(o);
                return NULL;
            }
            set_slot(o, m->offset, copy);
        }
    }
    return o;
}

static PyObject *fresh_default(const Field *f)
{
    switch (f->dkind) {
    case DEF_NONE:
        Py_RETURN_NONE;
    case DEF_LIST:
        return PyList_New(0);
    case DEF_STRUCT:
        return clone_default(f->deflt);
    default:
        return Py_NewRef(f->deflt);
    }
}

/* Struct equality as Struct.__eq__ has it: same type, equal fields (unknown tags left out). */
static int struct_equal(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    PyTypeObject *t = Py_TYPE(a);
    if (t != Py_TYPE(b) || !PyType_IsSubtype(t, StructType))
        return PyObject_RichCompareBool(a, b, Py_EQ);
    for (PyTypeObject *k = t; k != NULL && k != StructType; k = k->tp_base) {
        for (PyMemberDef *m = k->tp_members; m != NULL && m->name != NULL; m++) {
            if (m->type != T_OBJECT_EX || strcmp(m->name, "_unknown_tagged") == 0)
                continue;
            PyObject *x = SLOT(a, m->offset), *y = SLOT(b, m->offset);
            if (x == NULL || y == NULL) {
                PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute '%s'", t->tp_name, m->name);
                return -1;
            }
            Py_INCREF(x);
            Py_INCREF(y);
            int eq = (Py_TYPE(x) == Py_TYPE(y) && PyObject_TypeCheck(x, StructType))
                         ? struct_equal(x, y) : PyObject_RichCompareBool(x, y, Py_EQ);
            Py_DECREF(x);
            Py_DECREF(y);
            if (eq <= 0)
                return eq;
        }
    }
    return 1;
}

/* 1 if `v` differs from the field's default (so a tag is written, or an absent field refused). */
static int differs_from_default(const Field *f, PyObject *v)
{
    switch (f->dkind) {
    case DEF_NONE:
        return v != Py_None;
    case DEF_LIST:
        return PyObject_IsTrue(v);
    case DEF_STRUCT:
        if (Py_TYPE(v) == Py_TYPE(f->deflt)) {
            int eq = struct_equal(v, f->deflt);
            return eq < 0 ? -1 : !eq;
        }
        return PyObject_RichCompareBool(v, f->deflt, Py_NE);
    default:
        return PyObject_RichCompareBool(v, f->deflt, Py_NE);
    }
}

/* ============================================================================================ */
/* Decoding                                                                                     */
/* ============================================================================================ */

typedef struct {
    const unsigned char *p;
    Py_ssize_t len;
    PyObject *source;    /* what the caller passed */
    PyObject *view;      /* a memoryview on the source's buffer, made on first use: slices copy it */
} Reader;

static PyObject *decode_struct(Layout *L, Reader *r, Py_ssize_t *pos);

static PyObject *past_end(const char *kind, long long n)
{
    return PyErr_Format(CodecError, "%s %lld runs past the end of the data", kind, n);
}

static PyObject *null_error(PyObject *what)
{
    return PyErr_Format(CodecError, "non-nullable field %U was serialized as null", what);
}

static int read_uvarint(Reader *r, Py_ssize_t *pos, int64_t *out)
{
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= r->len) {
            PyErr_SetString(CodecError, "an unsigned varint runs past the end of the data");
            return -1;
        }
        unsigned b = r->p[p++];
        result |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 28) {
            PyErr_SetString(CodecError, "unsigned varint is longer than 5 bytes");
            return -1;
        }
    }
    *pos = p;
    *out = (int64_t)result;
    return 0;
}

/* CPython's own small ints (-5 to 256), held here to skip PyLong_FromLong's call for the values
 * most fields hold: error codes, partition indexes, broker ids, replica lists. */
#define SMALL_MIN (-5)
#define SMALL_MAX 256
static PyObject *small_ints[SMALL_MAX - SMALL_MIN + 1];

static inline PyObject *new_int(long v)
{
    if (v >= SMALL_MIN && v <= SMALL_MAX)
        return Py_NewRef(small_ints[v - SMALL_MIN]);
    return PyLong_FromLong(v);
}

static inline uint16_t be16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t be64(const unsigned char *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }

/* The length or count of a variable-size value (negative: null). Non-flexible strings have an int16
 * length, everything else an int32; flexible ones an unsigned varint of n + 1. */
static inline int read_length(Reader *r, Py_ssize_t *pos, int op, int64_t *n)
{
    if (op & F_COMPACT) {
        if (*pos < r->len && r->p[*pos] < 0x80) { /* one byte: lengths and counts below 127 */
            *n = (int64_t)r->p[(*pos)++] - 1;
            return 0;
        }
        if (read_uvarint(r, pos, n) < 0)
            return -1;
        *n -= 1;
        return 0;
    }
    if ((op & OP_BASE) == OP_STRING && !(op & F_ARRAY)) {
        if (r->len - *pos < 2)
            goto short_read;
        *n = (int16_t)be16(r->p + *pos);
        *pos += 2;
        return 0;
    }
    if (r->len - *pos < 4)
        goto short_read;
    *n = (int32_t)be32(r->p + *pos);
    *pos += 4;
    return 0;
short_read:
    PyErr_SetString(CodecError, "a length runs past the end of the data");
    return -1;
}

static PyObject *make_uuid(const unsigned char *p)
{
    PyObject *value = _PyLong_FromByteArray(p, 16, 0, 0);
    if (value == NULL)
        return NULL;
    PyObject *u = UuidType->tp_alloc(UuidType, 0);
    if (u == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    set_slot(u, uuid_int_offset, value);
    set_slot(u, uuid_safe_offset, Py_NewRef(UuidUnknown));
    return u;
}

static inline PyObject *read_fixed(int base, const unsigned char *p)
{
    switch (base) {
    case OP_INT8:
        return new_int((int8_t)p[0]);
    case OP_INT16:
        return new_int((int16_t)be16(p));
    case OP_UINT16:
        return new_int(be16(p));
    case OP_INT32:
        return new_int((int32_t)be32(p));
    case OP_UINT32:
        return PyLong_FromUnsignedLong(be32(p));
    case OP_INT64:
        return PyLong_FromLongLong((int64_t)be64(p));
    case OP_FLOAT64: {
        double d = PyFloat_Unpack8((const char *)p, 0);
        if (d == -1.0 && PyErr_Occurred())
            return NULL;
        return PyFloat_FromDouble(d);
    }
    case OP_BOOL:
        return Py_NewRef(p[0] ? Py_True : Py_False);
    default:
        return make_uuid(p);
    }
}

/* A one-dimensional view of bytes, which a slice can be made from by moving its start and length. */
static int plain_bytes_view(PyObject *mv)
{
    Py_buffer *b = PyMemoryView_GET_BUFFER(mv);
    return b->ndim == 1 && b->itemsize == 1 && b->shape != NULL && (b->strides == NULL || b->strides[0] == 1) &&
           b->suboffsets == NULL && (b->format == NULL || strcmp(b->format, "B") == 0);
}

/* source[start:end] as a memoryview (what the pure decoder's buf[pos:end] gives). The first slice is
 * made from the source; later ones are new views on the same managed buffer with their start and
 * length set, as memoryview's own slicing does, without a slice object or a base view to slice. */
static PyObject *memoryview_slice(Reader *r, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *sliced = PyMemoryView_FromObject(r->view != NULL ? r->view : r->source);
    if (sliced == NULL)
        return NULL;
    if (!plain_bytes_view(sliced)) {
        Py_DECREF(sliced);
        if (r->view == NULL && (r->view = PyMemoryView_FromObject(r->source)) == NULL)
            return NULL;
        return PySequence_GetSlice(r->view, start, end);
    }
    if (r->view == NULL)
        r->view = Py_NewRef(sliced);
    Py_buffer *b = PyMemoryView_GET_BUFFER(sliced);
    b->buf = (char *)r->p + start;
    b->len = b->shape[0] = end - start;
    return sliced;
}

/* The short ASCII strings decoded last, by a hash of their bytes: the same few names (topics, clients,
 * groups, hosts) come in request after request, and a str is immutable, so one can serve them all. */
#define STRING_CACHE_SIZE 512 /* a power of 2 */
#define STRING_CACHE_MAX 64   /* bytes */
static PyObject *string_cache[STRING_CACHE_SIZE];

static PyObject *read_string(const unsigned char *p, Py_ssize_t n)
{
    if (n > STRING_CACHE_MAX)
        return PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    uint32_t h = 2166136261u; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    PyObject **entry = &string_cache[h & (STRING_CACHE_SIZE - 1)];
    PyObject *s = *entry;
    /* A cached string is ASCII: its characters are its UTF-8 bytes. */
    if (s != NULL && PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_DATA(s), p, n) == 0)
        return Py_NewRef(s);
    s = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    if (s != NULL && PyUnicode_IS_ASCII(s))
        Py_XSETREF(*entry, Py_NewRef(s));
    return s;
}

/* A string, bytes or records value of n bytes at pos (already checked to be there). */
static PyObject *read_slice(Reader *r, int op, Py_ssize_t pos, Py_ssize_t n)
{
    switch (op & OP_BASE) {
    case OP_STRING:
        return read_string(r->p + pos, n);
    case OP_BYTES:
        if (!(op & F_ZERO_COPY))
            return PyBytes_FromStringAndSize((const char *)r->p + pos, n);
        /* fall through */
    default:
        return memoryview_slice(r, pos, pos + n);
    }
}

/* The length or count of a value into n: 1 when a value follows, 0 for null where the field is
 * nullable, -1 with an error set. */
static int read_presence(Reader *r, Py_ssize_t *pos, int op, PyObject *what, int64_t *n)
{
    if (read_length(r, pos, op, n) < 0)
        return -1;
    if (*n >= 0)
        return 1;
    if (op & F_NULLABLE)
        return 0;
    null_error(what);
    return -1;
}

/* A list of the n int32s at p (checked to be there): replica lists, the most common array. */
static PyObject *int32_list(const unsigned char *p, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = new_int((int32_t)be32(p + 4 * i));
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *read_array(Reader *r, Py_ssize_t *pos, int op, Layout *sub, PyObject *what)
{
    int64_t n;
    int present = read_presence(r, pos, op, what, &n);
    if (present <= 0)
        return present < 0 ? NULL : Py_NewRef(Py_None);
    int base = op & OP_BASE;
    Py_ssize_t left = r->len - *pos;
    if (IS_FIXED(base) ? n * FIXED_SIZE[base] > left : n > left) /* n < 2**35: no overflow */
        return PyErr_Format(CodecError, "%U: array length %lld exceeds the remaining %zd bytes", what,
                            (long long)n, left);
    if (base == OP_INT32) { /* without a call per element */
        PyObject *list = int32_list(r->p + *pos, (Py_ssize_t)n);
        *pos += 4 * (Py_ssize_t)n;
        return list;
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list == NULL)
        return NULL;
    int element_op = (op & ~(F_ARRAY | F_NULLABLE));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item;
        if (IS_FIXED(base)) {
            item = read_fixed(base, r->p + *pos);
            *pos += FIXED_SIZE[base];
        }
        else if (base == OP_STRUCT) {
            item = decode_struct(sub, r, pos);
        }
        else {
            int64_t m;
            if (read_length(r, pos, element_op, &m) < 0)
                goto error;
            if (m < 0) {
                null_error(what);
                goto error;
            }
            if (m > r->len - *pos) {
                past_end("field length", m);
                goto error;
            }
            item = read_slice(r, element_op, *pos, (Py_ssize_t)m);
            *pos += (Py_ssize_t)m;
        }
        if (item == NULL)
            goto error;
        PyList_SET_ITEM(list, i, item);
    }
    return list;
error:
    Py_DECREF(list);
    return NULL;
}

/* One field's value at pos, by its op; advances pos. */
static PyObject *read_value(Reader *r, Py_ssize_t *pos, int op, Layout *sub, PyObject *what)
{
    int base = op & OP_BASE;
    if (op & F_ARRAY)
        return read_array(r, pos, op, sub, what);
    if (IS_FIXED(base)) {
        Py_ssize_t size = FIXED_SIZE[base];
        if (r->len - *pos < size)
            return PyErr_Format(CodecError, "%U runs past the end of the data", what);
        PyObject *v = read_fixed(base, r->p + *pos);
        *pos += size;
        return v;
    }
    if (base == OP_STRUCT) {
        if (op & F_NULLABLE) {
            /* Kafka marks a nullable struct with an int8: -1 null, 1 present. */
            if (*pos >= r->len)
                return PyErr_Format(CodecError, "%U runs past the end of the data", what);
            int8_t marker = (int8_t)r->p[(*pos)++];
            if (marker < 0)
                Py_RETURN_NONE;
        }
        return decode_struct(sub, r, pos);
    }
    int64_t n;
    int present = read_presence(r, pos, op, what, &n);
    if (present <= 0)
        return present < 0 ? NULL : Py_NewRef(Py_None);
    if (n > r->len - *pos)
        return past_end("field length", n);
    PyObject *v = read_slice(r, op, *pos, (Py_ssize_t)n);
    *pos += (Py_ssize_t)n;
    return v;
}

static const Field *find_tag(Layout *L, int64_t tag)
{
    for (Py_ssize_t i = 0; i < L->ntagged; i++)
        if (L->tagged[i].tag == tag)
            return &L->tagged[i];
    return NULL;
}

/* The tagged-field section of a flexible struct: known tags into their slots, the rest kept in
 * _unknown_tagged as (tag, bytes), as the pure decoder does. */
static int read_tags(Layout *L, Reader *r, Py_ssize_t *pos, PyObject *o)
{
    int64_t count;
    PyObject *unknown = NULL;
    if (read_uvarint(r, pos, &count) < 0)
        return -1;
    for (int64_t i = 0; i < count; i++) {
        int64_t tag, size;
        if (read_uvarint(r, pos, &tag) < 0 || read_uvarint(r, pos, &size) < 0)
            goto error;
        if (size > r->len - *pos) {
            past_end("field length", size);
            goto error;
        }
        Py_ssize_t tag_end = *pos + (Py_ssize_t)size;
        const Field *f = find_tag(L, tag);
        if (f != NULL) {
            PyObject *v = read_value(r, pos, f->op, f->sub, f->what);
            if (v == NULL)
                goto error;
            set_slot(o, f->offset, v);
            if (*pos > tag_end) {
                PyErr_Format(CodecError, "tagged field %U runs past the size its tag gives it", f->what);
                goto error;
            }
        }
        else {
            if (unknown == NULL && (unknown = PyList_New(0)) == NULL)
                goto error;
            PyObject *entry = Py_BuildValue("(Ly#)", (long long)tag, r->p + *pos, (Py_ssize_t)size);
            if (entry == NULL)
                goto error;
            int failed = PyList_Append(unknown, entry);
            Py_DECREF(entry);
            if (failed)
                goto error;
        }
        *pos = tag_end;
    }
    set_slot(o, L->unknown_offset, unknown != NULL ? unknown : Py_NewRef(Py_None));
    return 0;
error:
    Py_XDECREF(unknown);
    return -1;
}

static PyObject *decode_struct(Layout *L, Reader *r, Py_ssize_t *pos)
{
    PyObject *o = L->cls->tp_alloc(L->cls, 0);
    if (o == NULL)
        return NULL;
    /* Each slot is written once, here or in read_tags: o is new, its slots are NULL. */
    const Field *f = L->fields, *end = f + L->nfields;
    const unsigned char *p = r->p;
    Py_ssize_t at = *pos, len = r->len; /* in registers: the slot stores below cannot change them */
    for (; f < end; f++) {
        PyObject *v;
        if (f->op < OP_UUID) { /* a number or bool: most fields, read here without a call */
            Py_ssize_t size = FIXED_SIZE[f->op];
            if (len - at < size) {
                PyErr_Format(CodecError, "%U runs past the end of the data", f->what);
                goto error;
            }
            v = read_fixed(f->op, p + at);
            at += size;
        }
        else if (f->op == (OP_INT32 | F_ARRAY | F_COMPACT) && at < len && p[at] > 0 && p[at] < 0x80 &&
                 4 * (p[at] - 1) <= len - at - 1) { /* a short replica list: anything else goes below */
            Py_ssize_t n = p[at] - 1;
            v = int32_list(p + at + 1, n);
            at += 1 + 4 * n;
        }
        else {
            *pos = at;
            v = f->op & F_ARRAY ? read_array(r, pos, f->op, f->sub, f->what)
                                : read_value(r, pos, f->op, f->sub, f->what);
            at = *pos;
        }
        if (v == NULL)
            goto error;
        SLOT(o, f->offset) = v;
    }
    *pos = at;
    for (Py_ssize_t i = 0; i < L->nabsent; i++) {
        PyObject *v = fresh_default(&L->absent[i]);
        if (v == NULL)
            goto error;
        SLOT(o, L->absent[i].offset) = v;
    }
    for (Py_ssize_t i = 0; i < L->ntagged; i++) {
        PyObject *v = fresh_default(&L->tagged[i]);
        if (v == NULL)
            goto error;
        SLOT(o, L->tagged[i].offset) = v;
    }
    if (L->flexible) {
        if (*pos >= r->len) {
            PyErr_SetString(CodecError, "the tagged fields run past the end of the data");
            goto error;
        }
        if (r->p[*pos] == 0) {
            *pos += 1;
            SLOT(o, L->unknown_offset) = Py_NewRef(Py_None);
        }
        else if (read_tags(L, r, pos, o) < 0)
            goto error;
    }
    else
        SLOT(o, L->unknown_offset) = Py_NewRef(Py_None);
    return o;
error:
    Py_DECREF(o);
    return NULL;
}

/* ============================================================================================ */
/* Encoding                                                                                     */
/* ============================================================================================ */

/* A bytes-like value written in place at `at` (view.buf set), or a FrameBuffer hole (view.buf NULL). */
typedef struct {
    PyObject *obj;
    Py_buffer view;
    Py_ssize_t at;
} Chunk;

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    Chunk *chunks;
    Py_ssize_t nchunks, chunks_cap, chunk_bytes;
    int holes;           /* the target is a FrameBuffer: records that are not bytes become holes */
    int inline_only;     /* everything copied into data (tagged values, measured before written) */
    char stack[1024];
} Writer;

static void writer_init(Writer *w, int holes, int inline_only)
{
    w->data = w->stack;
    w->len = 0;
    w->cap = sizeof w->stack;
    w->chunks = NULL;
    w->nchunks = w->chunks_cap = w->chunk_bytes = 0;
    w->holes = holes;
    w->inline_only = inline_only;
}

static void writer_free(Writer *w)
{
    for (Py_ssize_t i = 0; i < w->nchunks; i++) {
        if (w->chunks[i].view.buf != NULL)
            PyBuffer_Release(&w->chunks[i].view);
        Py_XDECREF(w->chunks[i].obj);
    }
    PyMem_Free(w->chunks);
    if (w->data != w->stack)
        PyMem_Free(w->data);
}

static int grow(Writer *w, Py_ssize_t n)
{
    Py_ssize_t cap = w->cap * 2;
    if (cap < w->len + n)
        cap = w->len + n;
    char *data;
    if (w->data == w->stack) {
        data = PyMem_Malloc(cap);
        if (data != NULL)
            memcpy(data, w->stack, w->len);
    }
    else
        data = PyMem_Realloc(w->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->data = data;
    w->cap = cap;
    return 0;
}

#define RESERVE(w, n) do { if ((w)->cap - (w)->len < (n) && grow((w), (n)) < 0) return -1; } while (0)

static int put_u8(Writer *w, unsigned v)
{
    RESERVE(w, 1);
    w->data[w->len++] = (char)v;
    return 0;
}

static int put_be(Writer *w, uint64_t v, int size)
{
    RESERVE(w, size);
    for (int i = size - 1; i >= 0; i--) {
        w->data[w->len + i] = (char)(v & 0xff);
        v >>= 8;
    }
    w->len += size;
    return 0;
}

static int put_uvarint(Writer *w, uint64_t v)
{
    RESERVE(w, 10);
    while (v >= 0x80) {
        w->data[w->len++] = (char)((v & 0x7f) | 0x80);
        v >>= 7;
    }
    w->data[w->len++] = (char)v;
    return 0;
}

static int put_raw(Writer *w, const void *p, Py_ssize_t n)
{
    RESERVE(w, n);
    memcpy(w->data + w->len, p, n);
    w->len += n;
    return 0;
}

static int add_chunk(Writer *w, PyObject *obj, Py_buffer *view)
{
    if (w->nchunks == w->chunks_cap) {
        Py_ssize_t cap = w->chunks_cap ? w->chunks_cap * 2 : 8;
        Chunk *chunks = PyMem_Realloc(w->chunks, cap * sizeof(Chunk));
        if (chunks == NULL) {
            if (view != NULL)
                PyBuffer_Release(view);
            PyErr_NoMemory();
            return -1;
        }
        w->chunks = chunks;
        w->chunks_cap = cap;
    }
    Chunk *c = &w->chunks[w->nchunks++];
    c->obj = Py_NewRef(obj);
    c->at = w->len;
    if (view != NULL) {
        c->view = *view;
        w->chunk_bytes += view->len;
    }
    else
        c->view.buf = NULL;
    return 0;
}

/* The bytes of a bytes-like value: small ones copied now, large ones once, into the output. */
static int put_buffer(Writer *w, PyObject *obj, Py_buffer *view)
{
    if (view->len >= CHUNK_MIN && !w->inline_only)
        return add_chunk(w, obj, view); /* the chunk owns the view now */
    int failed = put_raw(w, view->buf, view->len);
    PyBuffer_Release(view);
    return failed;
}

/* Append everything written to the bytearray `out` (one resize), holes to out.holes. */
static int writer_finish(Writer *w, PyObject *out)
{
    PyObject *holes = NULL;
    for (Py_ssize_t i = 0; i < w->nchunks; i++) {
        if (w->chunks[i].view.buf == NULL) {
            holes = PyObject_GetAttr(out, s_holes);
            if (holes == NULL)
                return -1;
            break;
        }
    }
    Py_ssize_t base = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, base + w->len + w->chunk_bytes) < 0) {
        Py_XDECREF(holes);
        return -1;
    }
    char *start = PyByteArray_AS_STRING(out), *dst = start + base;
    Py_ssize_t from = 0;
    for (Py_ssize_t i = 0; i < w->nchunks; i++) {
        Chunk *c = &w->chunks[i];
        memcpy(dst, w->data + from, c->at - from);
        dst += c->at - from;
        from = c->at;
        if (c->view.buf != NULL) {
            memcpy(dst, c->view.buf, c->view.len);
            dst += c->view.len;
        }
        else {
            PyObject *hole = Py_BuildValue("(nO)", (Py_ssize_t)(dst - start), c->obj);
            if (hole == NULL || PyList_Append(holes, hole) < 0) {
                Py_XDECREF(hole);
                Py_DECREF(holes);
                return -1;
            }
            Py_DECREF(hole);
        }
    }
    memcpy(dst, w->data + from, w->len - from);
    Py_XDECREF(holes);
    return 0;
}

static int encode_struct(Layout *L, PyObject *o, Writer *w);

static int out_of_range(PyObject *v, const char *kind)
{
    PyErr_Format(CodecError, "%R is out of range for %s", v, kind);
    return -1;
}

static int as_long_long(PyObject *v, long long lo, long long hi, const char *kind, long long *out)
{
    int overflow;
    long long x;
    if (PyLong_Check(v))
        x = PyLong_AsLongLongAndOverflow(v, &overflow);
    else {
        PyObject *i = PyNumber_Index(v);
        if (i == NULL)
            return -1;
        x = PyLong_AsLongLongAndOverflow(i, &overflow);
        Py_DECREF(i);
    }
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow || x < lo || x > hi)
        return out_of_range(v, kind);
    *out = x;
    return 0;
}

static int put_uuid(Writer *w, PyObject *v)
{
    unsigned char raw[16];
    if (PyObject_TypeCheck(v, UuidType)) {
        PyObject *i = SLOT(v, uuid_int_offset);
        if (i == NULL || !PyLong_Check(i)) {
            PyErr_SetString(PyExc_TypeError, "a UUID without an int value");
            return -1;
        }
        if (_PyLong_AsByteArray((PyLongObject *)i, raw, 16, 0, 0) < 0)
            return -1;
        return put_raw(w, raw, 16);
    }
    /* Anything else with .bytes, packed as struct's "16s" would: padded or cut to 16 bytes. */
    PyObject *b = PyObject_GetAttr(v, s_bytes);
    if (b == NULL)
        return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(b, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(b);
        return -1;
    }
    memset(raw, 0, 16);
    memcpy(raw, view.buf, view.len < 16 ? view.len : 16);
    PyBuffer_Release(&view);
    Py_DECREF(b);
    return put_raw(w, raw, 16);
}

static int put_fixed(Writer *w, int base, PyObject *v)
{
    long long x;
    switch (base) {
    case OP_INT8:
        if (as_long_long(v, -128, 127, "int8", &x) < 0)
            return -1;
        return put_u8(w, (unsigned)(x & 0xff));
    case OP_INT16:
        if (as_long_long(v, -32768, 32767, "int16", &x) < 0)
            return -1;
        return put_be(w, (uint64_t)x, 2);
    case OP_UINT16:
        if (as_long_long(v, 0, 65535, "uint16", &x) < 0)
            return -1;
        return put_be(w, (uint64_t)x, 2);
    case OP_INT32:
        if (as_long_long(v, INT32_MIN, INT32_MAX, "int32", &x) < 0)
            return -1;
        return put_be(w, (uint64_t)x, 4);
    case OP_UINT32:
        if (as_long_long(v, 0, UINT32_MAX, "uint32", &x) < 0)
            return -1;
        return put_be(w, (uint64_t)x, 4);
    case OP_INT64:
        if (as_long_long(v, INT64_MIN, INT64_MAX, "int64", &x) < 0)
            return -1;
        return put_be(w, (uint64_t)x, 8);
    case OP_FLOAT64: {
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        RESERVE(w, 8);
        if (PyFloat_Pack8(d, w->data + w->len, 0) < 0)
            return -1;
        w->len += 8;
        return 0;
    }
    case OP_BOOL: {
        int t = PyObject_IsTrue(v);
        if (t < 0)
            return -1;
        return put_u8(w, (unsigned)t);
    }
    default:
        return put_uuid(w, v);
    }
}

/* The length or count n of a variable-size value (-1: null), in the op's form. */
static int put_length(Writer *w, int op, Py_ssize_t n)
{
    if (op & F_COMPACT)
        return put_uvarint(w, (uint64_t)(n + 1));
    if ((op & OP_BASE) == OP_STRING && !(op & F_ARRAY)) {
        if (n > 32767) {
            PyErr_Format(CodecError, "a string of %zd bytes is too long for an int16 length", n);
            return -1;
        }
        return put_be(w, (uint64_t)n, 2);
    }
    if (n > INT32_MAX) {
        PyErr_Format(CodecError, "%zd is too long for an int32 length", n);
        return -1;
    }
    return put_be(w, (uint64_t)n, 4);
}

/* The null marker of a nullable field; an error for any other. */
static int put_null(Writer *w, int op, PyObject *what)
{
    if (!(op & F_NULLABLE)) {
        null_error(what);
        return -1;
    }
    return put_length(w, op, -1);
}

static int put_string(Writer *w, int op, PyObject *v)
{
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "a string field holds %.100s, not str", Py_TYPE(v)->tp_name);
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL)
        return -1;
    if (put_length(w, op, n) < 0)
        return -1;
    return put_raw(w, s, n);
}

/* The length and bytes of `view`, a buffer of `v`, which this takes over. */
static int put_bytes_view(Writer *w, int op, PyObject *v, Py_buffer *view)
{
    if (put_length(w, op, view->len) < 0) {
        PyBuffer_Release(view);
        return -1;
    }
    return put_buffer(w, v, view);
}

static int put_bytes(Writer *w, int op, PyObject *v)
{
    Py_buffer view;
    if (PyObject_GetBuffer(v, &view, PyBUF_SIMPLE) < 0)
        return -1;
    return put_bytes_view(w, op, v, &view);
}

/* As codec.write_records: bytes-like values are written (into a FrameBuffer, from reference_min bytes
 * on, left out as a hole that refers to them); anything else has a size and is a FrameBuffer hole, or
 * is materialised with read_bytes() for any other target. */
static int put_records(Writer *w, int op, PyObject *v, PyObject *what)
{
    if (v == Py_None)
        return put_null(w, op, what);
    if (PyBytes_Check(v) || PyByteArray_Check(v) || PyMemoryView_Check(v)) {
        Py_buffer view;
        if (PyObject_GetBuffer(v, &view, PyBUF_SIMPLE) < 0)
            return -1;
        if (!w->holes || view.len < reference_min)
            return put_bytes_view(w, op, v, &view);
        Py_ssize_t n = view.len;
        PyBuffer_Release(&view);
        return put_length(w, op, n) < 0 ? -1 : add_chunk(w, v, NULL);
    }
    PyObject *size = PyObject_GetAttr(v, s_size);
    if (size == NULL)
        return -1;
    Py_ssize_t n = PyNumber_AsSsize_t(size, PyExc_OverflowError);
    Py_DECREF(size);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (put_length(w, op, n) < 0)
        return -1;
    if (w->holes)
        return add_chunk(w, v, NULL);
    PyObject *data = PyObject_CallMethodNoArgs(v, s_read_bytes);
    if (data == NULL)
        return -1;
    Py_buffer view;
    int failed = PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0 || put_buffer(w, data, &view) < 0;
    Py_DECREF(data);
    return failed ? -1 : 0;
}

static int put_value(Writer *w, int op, Layout *sub, PyObject *v, PyObject *what);

static int put_array(Writer *w, int op, Layout *sub, PyObject *v, PyObject *what)
{
    if (v == Py_None)
        return put_null(w, op, what);
    PyObject *seq = PySequence_Fast(v, "an array field holds something that is not a sequence");
    if (seq == NULL)
        return -1;
    int element_op = op & ~(F_ARRAY | F_NULLABLE);
    int base = op & OP_BASE;
    int failed = put_length(w, op, PySequence_Fast_GET_SIZE(seq)) < 0;
    /* The size is read again each time round: element code may run Python that changes the list. */
    for (Py_ssize_t i = 0; !failed && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        if (base == OP_STRUCT)
            failed = encode_struct(sub, item, w) < 0;
        else if (item == Py_None && !IS_FIXED(base)) {
            null_error(what);
            failed = 1;
        }
        else
            failed = put_value(w, element_op, sub, item, what) < 0;
        Py_DECREF(item);
    }
    Py_DECREF(seq);
    return failed ? -1 : 0;
}

static int put_value(Writer *w, int op, Layout *sub, PyObject *v, PyObject *what)
{
    int base = op & OP_BASE;
    if (op & F_ARRAY)
        return put_array(w, op, sub, v, what);
    if (IS_FIXED(base))
        return put_fixed(w, base, v);
    if (base == OP_STRUCT) {
        if (op & F_NULLABLE) {
            if (v == Py_None)
                return put_u8(w, 0xff);
            if (put_u8(w, 1) < 0)
                return -1;
        }
        return encode_struct(sub, v, w);
    }
    if (base == OP_RECORDS)
        return put_records(w, op, v, what);
    if (v == Py_None)
        return put_null(w, op, what);
    return base == OP_STRING ? put_string(w, op, v) : put_bytes(w, op, v);
}

static PyObject *get_field(PyObject *o, int by_slot, Py_ssize_t offset, PyObject *attr)
{
    if (!by_slot)
        return PyObject_GetAttr(o, attr);
    PyObject *v = SLOT(o, offset);
    if (v == NULL)
        return PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%U'", Py_TYPE(o)->tp_name,
                            attr);
    return Py_NewRef(v);
}

typedef struct {
    int64_t tag;
    const char *p;
    Py_ssize_t n;
} TagEntry;

/* The tagged-field section: tags whose values differ from their defaults, and the unknown ones,
 * in ascending tag order (a stable sort, as codec.write_tags). */
/* 1 if a tagged field holds other than its default, 0 if none does, -1 on error. */
static int any_tag_set(Layout *L, PyObject *o, int by_slot)
{
    for (Py_ssize_t i = 0; i < L->ntagged; i++) {
        const Field *f = &L->tagged[i];
        PyObject *v = get_field(o, by_slot, f->offset, f->attr);
        if (v == NULL)
            return -1;
        int differs = differs_from_default(f, v);
        Py_DECREF(v);
        if (differs != 0)
            return differs;
    }
    return 0;
}

static int put_tags(Layout *L, PyObject *o, int by_slot, Writer *w)
{
    Writer *values = NULL;
    TagEntry *entries = NULL;
    PyObject *unknown = NULL, *useq = NULL, *keep = NULL;
    Py_ssize_t nknown = 0, nunknown = 0;
    int result = -1, has_unknown;

    unknown = get_field(o, by_slot, L->unknown_offset, s_unknown_tagged);
    if (unknown == NULL)
        goto done;
    has_unknown = PyObject_IsTrue(unknown);
    if (has_unknown < 0)
        goto done;
    if (!has_unknown) { /* the usual case: no tags to write, nothing to allocate */
        int any = any_tag_set(L, o, by_slot);
        if (any <= 0) {
            result = any < 0 ? -1 : put_u8(w, 0);
            goto done;
        }
    }
    if (L->ntagged) {
        values = PyMem_Malloc(L->ntagged * sizeof(Writer));
        if (values == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (has_unknown) {
        useq = PySequence_Fast(unknown, "_unknown_tagged is not a sequence");
        if (useq == NULL)
            goto done;
        nunknown = PySequence_Fast_GET_SIZE(useq);
    }
    entries = PyMem_Malloc((L->ntagged + nunknown + 1) * sizeof(TagEntry));
    if (entries == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < L->ntagged; i++) {
        const Field *f = &L->tagged[i];
        PyObject *v = get_field(o, by_slot, f->offset, f->attr);
        if (v == NULL)
            goto done;
        int differs = differs_from_default(f, v);
        if (differs > 0) {
            Writer *t = &values[nknown];
            writer_init(t, 0, 1);
            nknown++;
            int failed = put_value(t, f->op, f->sub, v, f->what) < 0;
            entries[nknown - 1] = (TagEntry){f->tag, t->data, t->len};
            if (failed)
                differs = -1;
        }
        Py_DECREF(v);
        if (differs < 0)
            goto done;
    }
    Py_ssize_t count = nknown;
    for (Py_ssize_t i = 0; i < nunknown; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(useq, i);
        if (!(PyTuple_Check(item) || PyList_Check(item)) || PySequence_Fast_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "an unknown tagged field is not a (tag, bytes) pair");
            goto done;
        }
        long long tag = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(item, 0));
        if (tag == -1 && PyErr_Occurred())
            goto done;
        if (tag < 0) {
            PyErr_Format(CodecError, "unsigned varint cannot hold %lld", tag);
            goto done;
        }
        /* bytes as they are; any other bytes-like value through a copy kept until written */
        PyObject *data = PySequence_Fast_GET_ITEM(item, 1);
        if (!PyBytes_Check(data)) {
            if ((keep == NULL && (keep = PyList_New(0)) == NULL) || (data = PyBytes_FromObject(data)) == NULL)
                goto done;
            int failed = PyList_Append(keep, data);
            Py_DECREF(data);
            if (failed)
                goto done;
        }
        entries[count++] = (TagEntry){tag, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data)};
    }
    if (count == 0) {
        result = put_u8(w, 0);
        goto done;
    }
    for (Py_ssize_t i = 1; i < count; i++) { /* insertion sort: stable, and the lists are short */
        TagEntry e = entries[i];
        Py_ssize_t j = i;
        for (; j > 0 && entries[j - 1].tag > e.tag; j--)
            entries[j] = entries[j - 1];
        entries[j] = e;
    }
    if (put_uvarint(w, (uint64_t)count) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (put_uvarint(w, (uint64_t)entries[i].tag) < 0 || put_uvarint(w, (uint64_t)entries[i].n) < 0 ||
            put_raw(w, entries[i].p, entries[i].n) < 0)
            goto done;
    }
    result = 0;
done:
    for (Py_ssize_t i = 0; i < nknown; i++)
        writer_free(&values[i]);
    PyMem_Free(values);
    PyMem_Free(entries);
    Py_XDECREF(keep);
    Py_XDECREF(useq);
    Py_XDECREF(unknown);
    return result;
}

static int encode_struct(Layout *L, PyObject *o, Writer *w)
{
    /* Slots are read by offset only from the layout's own class (or a subclass): by name otherwise. */
    int by_slot = Py_TYPE(o) == L->cls || PyType_IsSubtype(Py_TYPE(o), L->cls);
    if (Py_EnterRecursiveCall(" while encoding a message"))
        return -1;
    int result = -1;
    for (Py_ssize_t i = 0; i < L->nabsent; i++) {
        const Field *f = &L->absent[i];
        if (!f->must_match)
            continue;
        PyObject *v = get_field(o, by_slot, f->offset, f->attr);
        if (v == NULL)
            goto done;
        int differs = differs_from_default(f, v);
        Py_DECREF(v);
        if (differs < 0)
            goto done;
        if (differs) {
            PyErr_Format(UnsupportedVersionError,
                         "%s cannot carry a non-default %U at this version: the field is not in it",
                         L->cls->tp_name, f->attr);
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < L->nfields; i++) {
        const Field *f = &L->fields[i];
        PyObject *v = get_field(o, by_slot, f->offset, f->attr);
        if (v == NULL)
            goto done;
        int failed = put_value(w, f->op, f->sub, v, f->what) < 0;
        Py_DECREF(v);
        if (failed)
            goto done;
    }
    if (L->flexible && put_tags(L, o, by_slot, w) < 0)
        goto done;
    result = 0;
done:
    Py_LeaveRecursiveCall();
    return result;
}

/* ============================================================================================ */
/* Compiling field programs                                                                     */
/* ============================================================================================ */

static void clear_fields(Field *fields, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(fields[i].attr);
        Py_XDECREF(fields[i].what);
        Py_XDECREF(fields[i].deflt);
    }
    PyMem_Free(fields);
}

static void layout_dealloc(Layout *L)
{
    clear_fields(L->fields, L->nfields);
    clear_fields(L->tagged, L->ntagged);
    clear_fields(L->absent, L->nabsent);
    Py_XDECREF(L->cls);
    Py_XDECREF(L->name);
    Py_XDECREF(L->subs);
    Py_TYPE(L)->tp_free((PyObject *)L);
}

static PyObject *layout_repr(Layout *L)
{
    return PyUnicode_FromFormat("<Layout %U>", L->name);
}

static PyTypeObject LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "samsa.wire._speedups.Layout",
    .tp_basicsize = sizeof(Layout),
    .tp_dealloc = (destructor)layout_dealloc,
    .tp_repr = (reprfunc)layout_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One struct layout (a struct at a version), compiled from its field program.",
};

static Py_ssize_t slot_offset(PyTypeObject *cls, PyObject *attr)
{
    PyObject *descr = PyObject_GetAttr((PyObject *)cls, attr);
    if (descr == NULL)
        return -1;
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type == T_OBJECT_EX && m->offset > 0 && m->offset + (Py_ssize_t)sizeof(PyObject *) <= cls->tp_basicsize)
            offset = m->offset;
    }
    Py_DECREF(descr);
    if (offset < 0)
        PyErr_Format(PyExc_ValueError, "%s.%U is not a slot", cls->tp_name, attr);
    return offset;
}

static int parse_default(PyObject *d, Field *f)
{
    if (d == Py_None)
        f->dkind = DEF_NONE;
    else if (d == (PyObject *)&PyList_Type)
        f->dkind = DEF_LIST;
    else if (PyType_Check(d) && PyType_IsSubtype((PyTypeObject *)d, StructType)) {
        f->dkind = DEF_STRUCT;
        f->deflt = PyObject_CallNoArgs(d);
        return f->deflt == NULL ? -1 : 0;
    }
    else {
        f->dkind = DEF_CONST;
        f->deflt = Py_NewRef(d);
    }
    return 0;
}

static int valid_op(long op)
{
    int base = op & OP_BASE;
    return op >= 0 && op <= 0xff && base >= OP_INT8 && base <= OP_STRUCT;
}

/* One field entry: (attr, op[, layout]) regular, (attr, op, layout or None, tag, default) tagged,
 * (attr, default, must_match) absent. */
static int parse_field(Layout *L, PyObject *entry, int kind, PyObject *layouts, Field *f)
{
    static const Py_ssize_t sizes[3][2] = {{2, 3}, {5, 5}, {3, 3}};
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < sizes[kind][0] || PyTuple_GET_SIZE(entry) > sizes[kind][1]) {
        PyErr_Format(PyExc_ValueError, "%U: malformed field entry %R", L->name, entry);
        return -1;
    }
    PyObject *attr = PyTuple_GET_ITEM(entry, 0);
    if (!PyUnicode_Check(attr)) {
        PyErr_Format(PyExc_ValueError, "%U: field name %R is not a str", L->name, attr);
        return -1;
    }
    f->attr = Py_NewRef(attr);
    f->what = PyUnicode_FromFormat("%s.%U", L->cls->tp_name, attr);
    if (f->what == NULL || (f->offset = slot_offset(L->cls, attr)) < 0)
        return -1;
    if (kind == 2) {
        f->must_match = PyObject_IsTrue(PyTuple_GET_ITEM(entry, 2));
        return f->must_match < 0 ? -1 : parse_default(PyTuple_GET_ITEM(entry, 1), f);
    }
    long op = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
    if (op == -1 && PyErr_Occurred())
        return -1;
    if (!valid_op(op)) {
        PyErr_Format(PyExc_ValueError, "%U.%U: unknown op %ld", L->name, attr, op);
        return -1;
    }
    f->op = (int)op;
    PyObject *ref = PyTuple_GET_SIZE(entry) > 2 ? PyTuple_GET_ITEM(entry, 2) : Py_None;
    if ((op & OP_BASE) == OP_STRUCT) {
        PyObject *sub = ref == Py_None ? NULL : PyDict_GetItemWithError(layouts, ref);
        if (sub == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%U.%U: no layout %R", L->name, attr, ref);
            return -1;
        }
        if (PyList_Append(L->subs, sub) < 0)
            return -1;
        f->sub = (Layout *)sub;
    }
    if (kind == 1) {
        f->tag = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 3));
        if (f->tag == -1 && PyErr_Occurred())
            return -1;
        return parse_default(PyTuple_GET_ITEM(entry, 4), f);
    }
    return 0;
}

static int parse_fields(Layout *L, PyObject *entries, int kind, PyObject *layouts, Field **out, Py_ssize_t *n)
{
    if (!PyTuple_Check(entries)) {
        PyErr_Format(PyExc_ValueError, "%U: fields are not a tuple", L->name);
        return -1;
    }
    *n = PyTuple_GET_SIZE(entries);
    *out = PyMem_Calloc(*n ? *n : 1, sizeof(Field));
    if (*out == NULL) {
        *n = 0;
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++)
        if (parse_field(L, PyTuple_GET_ITEM(entries, i), kind, layouts, &(*out)[i]) < 0)
            return -1;
    return 0;
}

static int parse_layout(Layout *L, PyObject *program, PyObject *layouts)
{
    if (!PyTuple_Check(program) || PyTuple_GET_SIZE(program) != 5) {
        PyErr_Format(PyExc_ValueError, "%U: a program is (class, flexible, fields, tagged, absent)", L->name);
        return -1;
    }
    PyObject *cls = PyTuple_GET_ITEM(program, 0);
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, StructType)) {
        PyErr_Format(PyExc_ValueError, "%U: %R is not a Struct class", L->name, cls);
        return -1;
    }
    L->cls = (PyTypeObject *)Py_NewRef(cls);
    adopt(L->cls);
    L->flexible = PyObject_IsTrue(PyTuple_GET_ITEM(program, 1));
    if (L->flexible < 0 || (L->unknown_offset = slot_offset(L->cls, s_unknown_tagged)) < 0)
        return -1;
    if (parse_fields(L, PyTuple_GET_ITEM(program, 2), 0, layouts, &L->fields, &L->nfields) < 0 ||
        parse_fields(L, PyTuple_GET_ITEM(program, 3), 1, layouts, &L->tagged, &L->ntagged) < 0 ||
        parse_fields(L, PyTuple_GET_ITEM(program, 4), 2, layouts, &L->absent, &L->nabsent) < 0)
        return -1;
    return 0;
}

static PyObject *sp_compile(PyObject *module, PyObject *programs)
{
    if (StructType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "call configure() first");
        return NULL;
    }
    if (!PyDict_Check(programs)) {
        PyErr_SetString(PyExc_TypeError, "compile() takes a dict of field programs");
        return NULL;
    }
    PyObject *layouts = PyDict_New(), *name, *program;
    if (layouts == NULL)
        return NULL;
    Py_ssize_t i = 0;
    while (PyDict_Next(programs, &i, &name, &program)) {
        Layout *L = PyObject_New(Layout, &LayoutType);
        if (L == NULL)
            goto error;
        L->cls = NULL;
        L->name = Py_NewRef(name);
        L->fields = L->tagged = L->absent = NULL;
        L->nfields = L->ntagged = L->nabsent = 0;
        L->subs = PyList_New(0);
        int failed = L->subs == NULL || PyDict_SetItem(layouts, name, (PyObject *)L) < 0;
        Py_DECREF(L);
        if (failed)
            goto error;
    }
    i = 0;
    while (PyDict_Next(programs, &i, &name, &program))
        if (parse_layout((Layout *)PyDict_GetItem(layouts, name), program, layouts) < 0)
            goto error;
    return layouts;
error:
    Py_DECREF(layouts);
    return NULL;
}

/* ============================================================================================ */
/* Messages: MessageCodec and the entry points                                                  */
/* ============================================================================================ */

static PyObject *codec_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *name, *layouts;
    long lo;
    if (!PyArg_ParseTuple(args, "UlO!:MessageCodec", &name, &lo, &PyTuple_Type, &layouts))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(layouts); i++)
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(layouts, i), &LayoutType)) {
            PyErr_SetString(PyExc_TypeError, "MessageCodec takes a tuple of layouts");
            return NULL;
        }
    MessageCodec *c = (MessageCodec *)type->tp_alloc(type, 0);
    if (c == NULL)
        return NULL;
    c->name = Py_NewRef(name);
    c->lo = lo;
    c->n = PyTuple_GET_SIZE(layouts);
    c->layouts = Py_NewRef(layouts);
    return (PyObject *)c;
}

static void codec_dealloc(MessageCodec *c)
{
    Py_XDECREF(c->name);
    Py_XDECREF(c->layouts);
    Py_TYPE(c)->tp_free((PyObject *)c);
}


static MessageCodec *codec_of(PyTypeObject *cls)
{
    PyObject *c = _PyType_Lookup(cls, s_accel);
    return c != NULL && Py_IS_TYPE(c, &MessageCodecType) ? (MessageCodec *)c : NULL;
}

/* The layout for a version, or NULL with UnsupportedVersionError as Message.check_version words it. */
static Layout *layout_for(MessageCodec *c, PyObject *version_obj, long *version)
{
    *version = PyLong_AsLong(version_obj);
    if (*version == -1 && PyErr_Occurred())
        return NULL;
    long index = *version - c->lo;
    if (index < 0 || index >= c->n) {
        PyErr_Format(UnsupportedVersionError, "%U has no version %ld (valid: %ld-%ld)", c->name, *version, c->lo,
                     c->lo + (long)c->n - 1);
        return NULL;
    }
    return (Layout *)PyTuple_GET_ITEM(c->layouts, index);
}

/* Exceptions from bad bytes or bad values that are not CodecErrors become CodecErrors, as the pure
 * codec's message boundary turns them (the original as the cause). */
static void as_codec_error(const char *verb, PyObject *name, long version)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL)
        return;
    if (PyErr_GivenExceptionMatches(type, CodecError) ||
        !(PyErr_GivenExceptionMatches(type, PyExc_ValueError) || PyErr_GivenExceptionMatches(type, PyExc_TypeError) ||
          PyErr_GivenExceptionMatches(type, PyExc_IndexError) || PyErr_GivenExceptionMatches(type, PyExc_OverflowError) ||
          PyErr_GivenExceptionMatches(type, PyExc_AttributeError))) {
        PyErr_Restore(type, value, tb);
        return;
    }
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *error = PyObject_CallFunction(CodecError, "N", PyUnicode_FromFormat("cannot %s %U v%ld: %S", verb, name,
                                                                                  version, value));
    if (error != NULL) {
        PyException_SetCause(error, Py_NewRef(value));
        PyException_SetContext(error, Py_NewRef(value));
        PyErr_SetObject(CodecError, error);
        Py_DECREF(error);
    }
    Py_DECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* Positional and keyword arguments into out[] by name. */
static int parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      const char *const *names, Py_ssize_t required, Py_ssize_t max, PyObject **out)
{
    if (nargs > max) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd arguments (%zd given)", fname, max, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < max; i++)
        out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        const char *key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        if (key == NULL)
            return -1;
        Py_ssize_t j = 0;
        while (j < max && strcmp(names[j], key) != 0)
            j++;
        if (j == max || out[j] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected or repeated argument '%s'", fname, key);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < required; i++)
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing argument '%s'", fname, names[i]);
            return -1;
        }
    return 0;
}

/* decode(buf, version, pos=0) and decode_from(...): installed as the message class's own attributes
 * (bound to its codec, so no lookup and no bound method per call). */
static PyObject *decode_impl(MessageCodec *c, const char *fname, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames, int want_end)
{
    static const char *const names[] = {"buf", "version", "pos"};
    PyObject *a[3];
    if (parse_args(fname, args, nargs, kwnames, names, 2, 3, a) < 0)
        return NULL;
    long version;
    Layout *L = layout_for(c, a[1], &version);
    if (L == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    if (a[2] != NULL && (pos = PyNumber_AsSsize_t(a[2], PyExc_OverflowError)) == -1 && PyErr_Occurred())
        return NULL;
    PyObject *buf = a[0];
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Reader r = {view.buf, view.len, buf, PyMemoryView_Check(buf) ? Py_NewRef(buf) : NULL};
    PyObject *message = NULL;
    if (pos < 0 || pos > view.len)
        PyErr_Format(CodecError, "position %zd is outside the %zd bytes of data", pos, view.len);
    else
        message = decode_struct(L, &r, &pos);
    Py_XDECREF(r.view);
    PyBuffer_Release(&view);
    if (message == NULL) {
        as_codec_error("decode", c->name, version);
        return NULL;
    }
    if (!want_end)
        return message;
    return Py_BuildValue("(Nn)", message, pos);
}

static PyObject *codec_decode(MessageCodec *c, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return decode_impl(c, "decode", args, nargs, kwnames, 0);
}

static PyObject *codec_decode_from(MessageCodec *c, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return decode_impl(c, "decode_from", args, nargs, kwnames, 1);
}

static PyMethodDef codec_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))codec_decode, METH_FASTCALL | METH_KEYWORDS,
     "decode(buf, version, pos=0): one message; records fields as memoryviews into buf."},
    {"decode_from", (PyCFunction)(void (*)(void))codec_decode_from, METH_FASTCALL | METH_KEYWORDS,
     "decode_from(buf, version, pos=0): (message, position after it)."},
    {NULL},
};

static PyTypeObject MessageCodecType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "samsa.wire._speedups.MessageCodec",
    .tp_basicsize = sizeof(MessageCodec),
    .tp_dealloc = (destructor)codec_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = codec_new,
    .tp_methods = codec_methods,
    .tp_doc = "MessageCodec(name, lowest version, layouts by version): a message's compiled codec.",
};

/* Message.encode(self, version, out=None) */
static PyObject *message_encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"version", "out"};
    PyObject *a[2];
    if (parse_args("encode", args, nargs, kwnames, names, 1, 2, a) < 0)
        return NULL;
    MessageCodec *c = codec_of(Py_TYPE(self));
    PyObject *out = a[1];
    if (c == NULL || (out != NULL && out != Py_None && !PyByteArray_Check(out)))
        return PyObject_CallMethodObjArgs(self, s_pure_encode, a[0], out ? out : Py_None, NULL);
    long version;
    Layout *L = layout_for(c, a[0], &version);
    if (L == NULL)
        return NULL;
    if (out == NULL || out == Py_None) {
        if ((out = PyByteArray_FromStringAndSize(NULL, 0)) == NULL)
            return NULL;
    }
    else
        Py_INCREF(out);
    Writer w;
    writer_init(&w, PyObject_TypeCheck(out, FrameBufferType), 0);
    int failed = encode_struct(L, self, &w) < 0 || writer_finish(&w, out) < 0;
    writer_free(&w);
    if (!failed)
        return out;
    Py_DECREF(out);
    if (PyErr_ExceptionMatches(UnsupportedVersionError)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_Format(UnsupportedVersionError, "%U v%ld: %S", c->name, version, value);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    else
        as_codec_error("encode", c->name, version);
    return NULL;
}

static PyMethodDef encode_def = {
    "encode", (PyCFunction)(void (*)(void))message_encode, METH_FASTCALL | METH_KEYWORDS,
    "encode(version, out=None): append this message at `version` to `out` (a new bytearray by default) "
    "and return it.",
};

static PyObject *sp_encode_method(PyObject *module, PyObject *type)
{
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "encode_method() takes the Message class");
        return NULL;
    }
    return PyDescr_NewMethod((PyTypeObject *)type, &encode_def);
}

static int member_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *attr = PyUnicode_FromString(name);
    if (attr == NULL)
        return -1;
    *offset = slot_offset(type, attr);
    Py_DECREF(attr);
    return *offset < 0 ? -1 : 0;
}

static PyObject *sp_configure(PyObject *module, PyObject *args)
{
    PyObject *codec_error, *unsupported, *uuid_type, *unknown, *frame_buffer, *struct_type;
    Py_ssize_t reference_from;
    if (!PyArg_ParseTuple(args, "OOO!OO!O!n:configure", &codec_error, &unsupported, &PyType_Type, &uuid_type,
                          &unknown, &PyType_Type, &frame_buffer, &PyType_Type, &struct_type, &reference_from))
        return NULL;
    Py_ssize_t int_offset, safe_offset;
    if (member_offset((PyTypeObject *)uuid_type, "int", &int_offset) < 0 ||
        member_offset((PyTypeObject *)uuid_type, "is_safe", &safe_offset) < 0)
        return NULL;
    Py_XSETREF(CodecError, Py_NewRef(codec_error));
    Py_XSETREF(UnsupportedVersionError, Py_NewRef(unsupported));
    Py_XSETREF(UuidType, (PyTypeObject *)Py_NewRef(uuid_type));
    Py_XSETREF(UuidUnknown, Py_NewRef(unknown));
    Py_XSETREF(FrameBufferType, (PyTypeObject *)Py_NewRef(frame_buffer));
    Py_XSETREF(StructType, (PyTypeObject *)Py_NewRef(struct_type));
    generic_dealloc = StructType->tp_dealloc;
    uuid_int_offset = int_offset;
    uuid_safe_offset = safe_offset;
    reference_min = reference_from;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", sp_configure, METH_VARARGS,
     "configure(CodecError, UnsupportedVersionError, UUID, SafeUUID.unknown, FrameBuffer, Struct, REFERENCE_MIN)"},
    {"compile", sp_compile, METH_O, "compile(programs): {name: Layout} from a module's _PROGRAMS."},
    {"encode_method", sp_encode_method, METH_O, "encode_method(Message): the C encode as a method of Message."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_speedups", "The generated message layouts interpreted in C (see wire/program.py).", -1,
    methods,
};

static int add_opcodes(PyObject *m)
{
    static const struct { const char *name; int value; } opcodes[] = {
        {"INT8", OP_INT8}, {"INT16", OP_INT16}, {"UINT16", OP_UINT16}, {"INT32", OP_INT32}, {"UINT32", OP_UINT32},
        {"INT64", OP_INT64}, {"FLOAT64", OP_FLOAT64}, {"BOOL", OP_BOOL}, {"UUID", OP_UUID}, {"STRING", OP_STRING},
        {"BYTES", OP_BYTES}, {"RECORDS", OP_RECORDS}, {"STRUCT", OP_STRUCT}, {"ARRAY", F_ARRAY},
        {"COMPACT", F_COMPACT}, {"NULLABLE", F_NULLABLE}, {"ZERO_COPY", F_ZERO_COPY},
    };
    PyObject *d = PyDict_New();
    if (d == NULL)
        return -1;
    for (size_t i = 0; i < sizeof opcodes / sizeof opcodes[0]; i++) {
        PyObject *v = PyLong_FromLong(opcodes[i].value);
        if (v == NULL || PyDict_SetItemString(d, opcodes[i].name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return -1;
        }
        Py_DECREF(v);
    }
    return PyModule_AddObject(m, "OPCODES", d) < 0 ? (Py_DECREF(d), -1) : 0;
}

PyMODINIT_FUNC PyInit__speedups(void)
{
    if (PyType_Ready(&LayoutType) < 0 || PyType_Ready(&MessageCodecType) < 0)
        return NULL;
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_accel, "_accel");
    INTERN(s_holes, "holes");
    INTERN(s_size, "size");
    INTERN(s_read_bytes, "read_bytes");
    INTERN(s_bytes, "bytes");
    INTERN(s_pure_encode, "_pure_encode");
    INTERN(s_unknown_tagged, "_unknown_tagged");
#undef INTERN
    for (long i = SMALL_MIN; i <= SMALL_MAX; i++)
        if ((small_ints[i - SMALL_MIN] = PyLong_FromLong(i)) == NULL)
            return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (add_opcodes(m) < 0 || PyModule_AddObjectRef(m, "MessageCodec", (PyObject *)&MessageCodecType) < 0 ||
        PyModule_AddObjectRef(m, "Layout", (PyObject *)&LayoutType) < 0 ||
        PyModule_AddIntConstant(m, "INTERFACE", 2) < 0) { /* codec._INTERFACE */
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
