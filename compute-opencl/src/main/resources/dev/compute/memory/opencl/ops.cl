// The op set on FLOAT32 and FLOAT64 data, built once per context.
//
// Every kernel takes its buffer with an element offset (`off`) and count (`n`), so it works on a block at any
// offset of a pool segment: sub-buffers would need origins aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN.
// Element-wise kernels loop with the grid's stride, so any global size covers any count.
// HAS_FP64 comes from the host (1 when the device has cl_khr_fp64): double kernels exist only then, and the
// float sum accumulates in double where it can.

#if HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

#define ELEMENTWISE(T, S)                                                                            \
__kernel void fill_##S(__global T* x, ulong off, ulong n, T value) {                               \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {                             \
        x[off + i] = value;                                                                        \
    }                                                                                              \
}                                                                                                  \
__kernel void scale_##S(__global T* x, ulong off, ulong n, T alpha) {                              \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {                             \
        x[off + i] = alpha * x[off + i];                                                           \
    }                                                                                              \
}                                                                                                  \
__kernel void axpy_##S(T alpha, __global const T* x, ulong xoff, __global T* y, ulong yoff, ulong n) { \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {                             \
        y[yoff + i] = alpha * x[xoff + i] + y[yoff + i];                                           \
    }                                                                                              \
}

// One partial sum per work-group: a grid-stride loop per work-item, then a tree in local memory (the local
// size is a power of two). The host adds the partials in double.
#define SUM(T, S)                                                                                  \
__kernel void sum_##S(__global const T* x, ulong off, ulong n, __global acc_t* partial,           \
                      __local acc_t* scratch) {                                                    \
    acc_t acc = 0;                                                                                 \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {                             \
        acc += (acc_t) x[off + i];                                                                 \
    }                                                                                              \
    uint lid = get_local_id(0);                                                                    \
    scratch[lid] = acc;                                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {                                         \
        if (lid < s) {                                                                             \
            scratch[lid] += scratch[lid + s];                                                      \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    }                                                                                              \
    if (lid == 0) {                                                                                \
        partial[get_group_id(0)] = scratch[0];                                                     \
    }                                                                                              \
}

ELEMENTWISE(float, f32)
SUM(float, f32)

#if HAS_FP64
ELEMENTWISE(double, f64)
SUM(double, f64)
#endif
