/**
 * The CUDA backend: {@link dev.compute.memory.cuda.CudaBackendProvider} probes the driver through the FFM API,
 * {@link dev.compute.memory.cuda.CudaBackend} runs on a device's primary context through JCuda, with page
 * mapping for expandable segments ({@link dev.compute.memory.cuda.CudaVirtualMemory}) as FFM downcalls into
 * {@code libcuda.so.1}, copies from pageable memory staged through pinned buffers
 * ({@link dev.compute.memory.cuda.StagingBuffers}), the op set as PTX kernels ({@link dev.compute.memory.cuda.CudaKernelOps}),
 * and the pointer and stream for one's own kernels on pooled memory ({@link dev.compute.memory.cuda.CudaDeviceHandle}).
 */
@NullMarked
package dev.compute.memory.cuda;

import org.jspecify.annotations.NullMarked;
