// The CUDA backend's op set (fill, scale, axpy, sum) for float and double.
//
// The generated PTX is committed (src/main/resources/dev/compute/memory/cuda/ops.ptx) because CI and users have
// no nvcc. After changing this file, regenerate it from the project root with:
//
//   P=compute-cuda/src/main/resources/dev/compute/memory/cuda/ops.ptx
//   /usr/local/cuda/bin/nvcc -ptx -arch=compute_80 -o $P compute-cuda/src/main/cuda/ops.cu
//   sed -i 's/^\.version .*/.version 8.0/' $P
//
// compute_80 PTX is JIT-compiled by the driver for any newer GPU (Ampere, Hopper, Blackwell). nvcc 13 stamps
// PTX ISA 9.0, which only CUDA 13 drivers accept; these kernels use nothing newer than ISA 8.0 (CUDA 12.0), so
// the sed lets every driver the backend supports (CUDA 12 and later) load them. PtxResourcesTest checks it.
//
// Every kernel takes a 64-bit element count and walks it with a grid-stride loop, so one launch covers any
// length whatever grid the host picks. Launch with 256 threads per block: sum's shared array is sized for it.

#define BLOCK 256

template <typename T>
__device__ void fill(T* x, unsigned long long n, T value) {
    for (unsigned long long i = blockIdx.x * (unsigned long long) blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long) blockDim.x * gridDim.x) {
        x[i] = value;
    }
}

template <typename T>
__device__ void scale(T* x, unsigned long long n, T alpha) {
    for (unsigned long long i = blockIdx.x * (unsigned long long) blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long) blockDim.x * gridDim.x) {
        x[i] = alpha * x[i];
    }
}

// One partial sum per block, accumulated in double; the host adds the partials in block order, so a result
// does not depend on the order in which blocks finish.
template <typename T>
__device__ void sum(const T* x, unsigned long long n, double* partials) {
    __shared__ double cache[BLOCK];
    double acc = 0.0;
    for (unsigned long long i = blockIdx.x * (unsigned long long) blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long) blockDim.x * gridDim.x) {
        acc += (double) x[i];
    }
    cache[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            cache[threadIdx.x] += cache[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = cache[0];
    }
}

extern "C" {

__global__ void fill_f32(float* x, unsigned long long n, float value) { fill(x, n, value); }
__global__ void fill_f64(double* x, unsigned long long n, double value) { fill(x, n, value); }

__global__ void scale_f32(float* x, unsigned long long n, float alpha) { scale(x, n, alpha); }
__global__ void scale_f64(double* x, unsigned long long n, double alpha) { scale(x, n, alpha); }

// y = alpha * x + y with one rounding (fma), which Java's Math.fma reproduces exactly.
__global__ void axpy_f32(const float* x, float* y, unsigned long long n, float alpha) {
    for (unsigned long long i = blockIdx.x * (unsigned long long) blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long) blockDim.x * gridDim.x) {
        y[i] = fmaf(alpha, x[i], y[i]);
    }
}

__global__ void axpy_f64(const double* x, double* y, unsigned long long n, double alpha) {
    for (unsigned long long i = blockIdx.x * (unsigned long long) blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long) blockDim.x * gridDim.x) {
        y[i] = fma(alpha, x[i], y[i]);
    }
}

__global__ void sum_f32(const float* x, unsigned long long n, double* partials) { sum(x, n, partials); }
__global__ void sum_f64(const double* x, unsigned long long n, double* partials) { sum(x, n, partials); }

}
