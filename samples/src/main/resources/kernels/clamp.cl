// The service's clamp in OpenCL C, for the opencl backend (ClampKernel). FLOAT64 needs cl_khr_fp64: on a device
// without it the build fails at start-up, and the message carries the build log.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void clamp_f64(__global double *x, long n, double lo, double hi) {
    long i = get_global_id(0);
    if (i < n) {
        x[i] = clamp(x[i], lo, hi);
    }
}
