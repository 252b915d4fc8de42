// A kernel of the kernel API's CUDA tests (CudaKernelTest). The generated PTX is committed
// (src/test/resources/dev/compute/memory/cuda/kernel-api-test.ptx); regenerate it from the project root with:
//
//   P=compute-cuda/src/test/resources/dev/compute/memory/cuda/kernel-api-test.ptx
//   /usr/local/cuda/bin/nvcc -ptx -arch=compute_80 -o $P compute-cuda/src/test/cuda/kernel-api-test.cu
//   sed -i 's/^\.version .*/.version 8.0/' $P
//
// (as for ops.cu: PTX ISA 8.0 so that CUDA 12 drivers load it)

extern "C" {

// Each thread waits at least `cycles` clock cycles, then writes v to x[i] for i < n: a kernel still running when its
// buffer is closed, which writes afterwards, so a test sees whether the buffer's memory went to another buffer early.
__global__ void slow_fill(float* x, long long n, float v, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = v;
    }
}

}
