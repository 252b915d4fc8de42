// The service's clamp in CUDA C++, for the cuda backend (ClampKernel). The backend loads PTX, so the PTX is committed
// (src/main/resources/kernels/clamp.ptx); regenerate it from the project root with:
//
//   P=samples/src/main/resources/kernels/clamp.ptx
//   /usr/local/cuda/bin/nvcc -ptx -arch=compute_80 -o $P samples/src/main/cuda/clamp.cu
//   sed -i 's/^\.version .*/.version 8.0/' $P
//
// (PTX ISA 8.0, so that CUDA 12 drivers load it)

extern "C" __global__ void clamp_f64(double* x, long long n, double lo, double hi) {
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = fmin(fmax(x[i], lo), hi);
    }
}
