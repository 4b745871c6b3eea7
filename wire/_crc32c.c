/* samsa.wire._crc32c: CRC-32C (Castagnoli) of record batches, folded 256 bytes at a time with
 * VPCLMULQDQ (AVX-512) where the CPU has it.
 *
 * Every produced batch's CRC is checked before it is appended (Kafka's LogValidator does the same),
 * so it is paid on every byte a producer sends: the `crc32c` package's three-way `crc32` loop takes
 * 32 us per MiB on the bench machine (bench/README.md, "Where a Produce request's CPU goes"), this
 * 16 us.
 *
 * The method is the carry-less-multiply folding of Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ": four 512-bit accumulators each folded forward by 2048 bits, reduced
 * to one 128-bit remainder, whose CRC (and that of the bytes under 16 left over) the SSE4.2 `crc32`
 * instruction finishes. A fold by D bits multiplies a 128-bit lane's low and high halves by
 * x^(D+32) and x^(D-32) mod P, bit-reflected and shifted left by one (tools/crc32c_constants.py
 * derives them and checks them against the bitwise CRC).
 *
 * FAST is 1 when this CPU can run it; otherwise crc32c() must not be called (wire/records.py then
 * uses the `crc32c` package).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_FOLD 1
#define TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))

/* (x^(D+32), x^(D-32)) mod P, reflected and shifted: the low and high 64 bits of each lane's factor. */
#define K2048_LO 0xdcb17aa4ULL
#define K2048_HI 0xb9e02b86ULL
#define K512_LO 0x740eef02ULL
#define K512_HI 0x9e4addf8ULL
#define K384_LO 0x1c291d04ULL
#define K384_HI 0x1d82c63daULL
#define K256_LO 0x1384aa63aULL
#define K256_HI 0xba4fc28eULL
#define K128_LO 0xf20c0dfeULL
#define K128_HI 0x14cd00bd6ULL

TARGET static uint32_t crc_bytes(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}

TARGET static inline __m512i fold512(__m512i x, __m512i k, __m512i next)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                     next, 0x96);
}

TARGET static inline __m128i fold128(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* The CRC register after `n` bytes from register `crc` (no inversions). */
TARGET static uint32_t crc_fold(uint32_t crc, const uint8_t *p, size_t n)
{
    if (n < 256)
        return crc_bytes(crc, p, n);
    const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(K2048_HI, K2048_LO));
    const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x(K512_HI, K512_LO));
    /* The register enters as the first 32 bits of the message. */
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_castsi128_si512(_mm_cvtsi32_si128((int)crc)));
    __m512i x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128), x3 = _mm512_loadu_si512(p + 192);
    p += 256;
    n -= 256;
    for (; n >= 256; p += 256, n -= 256) {
        x0 = fold512(x0, k2048, _mm512_loadu_si512(p));
        x1 = fold512(x1, k2048, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, k2048, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, k2048, _mm512_loadu_si512(p + 192));
    }
    x1 = fold512(x0, k512, x1);
    x2 = fold512(x1, k512, x2);
    x3 = fold512(x2, k512, x3);
    for (; n >= 64; p += 64, n -= 64)
        x3 = fold512(x3, k512, _mm512_loadu_si512(p));
    __m128i r = _mm512_extracti32x4_epi32(x3, 3);
    r = _mm_xor_si128(r, fold128(_mm512_extracti32x4_epi32(x3, 2), _mm_set_epi64x(K128_HI, K128_LO)));
    r = _mm_xor_si128(r, fold128(_mm512_extracti32x4_epi32(x3, 1), _mm_set_epi64x(K256_HI, K256_LO)));
    r = _mm_xor_si128(r, fold128(_mm512_extracti32x4_epi32(x3, 0), _mm_set_epi64x(K384_HI, K384_LO)));
    const __m128i k128 = _mm_set_epi64x(K128_HI, K128_LO);
    for (; n >= 16; p += 16, n -= 16)
        r = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), fold128(r, k128));
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
    c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(r, 1));
    return crc_bytes((uint32_t)c, p, n);
}

static int cpu_can_fold(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul") &&
           __builtin_cpu_supports("sse4.2");
}
#else
#define HAVE_FOLD 0
#endif

static int fast;
#define RELEASE_GIL_FROM (32 * 1024) /* bytes; about 0.5 us of folding */

static PyObject *crc32c(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned long value = 0;
    Py_buffer view;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32c(data, value=0)");
        return NULL;
    }
    if (nargs == 2) {
        value = PyLong_AsUnsignedLong(args[1]);
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
    }
    if (!fast) {
        PyErr_SetString(PyExc_RuntimeError, "this CPU cannot fold CRC-32C (FAST is 0)");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = 0;
#if HAVE_FOLD
    if (view.len < RELEASE_GIL_FROM) {  /* a small batch: releasing the GIL would cost more than the CRC */
        crc = ~crc_fold(~(uint32_t)value, (const uint8_t *)view.buf, (size_t)view.len);
    } else {
        Py_BEGIN_ALLOW_THREADS
        crc = ~crc_fold(~(uint32_t)value, (const uint8_t *)view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    }
#endif
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"crc32c", (PyCFunction)(void (*)(void))crc32c, METH_FASTCALL,
     "crc32c(data, value=0): the CRC-32C of data, continuing from value (as the crc32c package's)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_crc32c", "CRC-32C folded with VPCLMULQDQ (see wire/_crc32c.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__crc32c(void)
{
#if HAVE_FOLD
    fast = cpu_can_fold();
#endif
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && PyModule_AddIntConstant(m, "FAST", fast) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
