// The kernels of KernelContractTest (compute-core's test jar), as CUDA C++ for the cuda backend; the same kernels are
// written in OpenCL C and Java in the test itself. The generated PTX is committed
// (src/test/resources/dev/compute/memory/contract/kernel-contract.ptx); regenerate it from the project root with:
//
//   P=compute-core/src/test/resources/dev/compute/memory/contract/kernel-contract.ptx
//   /usr/local/cuda/bin/nvcc -ptx -arch=compute_80 -o $P compute-core/src/test/cuda/kernel-contract.cu
//   sed -i 's/^\.version .*/.version 8.0/' $P
//
// (PTX ISA 8.0, so that CUDA 12 drivers load it, as for compute-cuda's ops.cu)

extern "C" {

// y[i] = x[i] * a + b + c for i < n: one parameter of each scalar type a launch passes (long long, float, double, int).
__global__ void affine(const float* x, float* y, long long n, float a, double b, int c) {
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * a + (float) b + (float) c;
    }
}

// x[i] = x[i] * a for i < n: reads and writes its buffer.
__global__ void scale_in_place(float* x, long long n, float a) {
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = x[i] * a;
    }
}

// out[y * width + x] = y * 1000 + x over a width x height grid: a two-dimensional launch.
__global__ void iota2d(int* out, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        out[y * width + x] = y * 1000 + x;
    }
}

// The README's example: x[i] clamped to [lo, hi] for i < n.
__global__ void clamp_f64(double* x, long long n, double lo, double hi) {
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = fmin(fmax(x[i], lo), hi);
}

}
