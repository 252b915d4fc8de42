// Test-only kernels for the CUDA backend's tests. The generated PTX is committed
// (src/test/resources/dev/compute/memory/cuda/test-kernels.ptx); regenerate it from the project root with:
//
//   P=compute-cuda/src/test/resources/dev/compute/memory/cuda/test-kernels.ptx
//   /usr/local/cuda/bin/nvcc -ptx -arch=compute_80 -o $P compute-cuda/src/test/cuda/test-kernels.cu
//   sed -i 's/^\.version .*/.version 8.0/' $P
//
// (as for ops.cu: PTX ISA 8.0 so that CUDA 12 drivers load it)

extern "C" {

// Keeps one thread busy for at least `cycles` clock cycles and touches no memory: work queued behind it on the
// same stream waits that long, which is how the in-flight test holds a buffer's kernel open.
__global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

// x[i] = scale * x[i] + i for i < n, in a grid-stride loop: each result names its own index, so a launch at the
// wrong address, offset or length shows. The handle tests launch it on pooled buffers and slices.
__global__ void scale_add_index(float* x, unsigned long long n, float scale) {
    unsigned long long stride = (unsigned long long) gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        x[i] = scale * x[i] + (float) i;
    }
}

}
