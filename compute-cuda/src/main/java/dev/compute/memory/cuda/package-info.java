/**
 * The CUDA backend: {@link dev.compute.memory.cuda.CudaBackendProvider} probes the driver through the FFM API,
 * {@link dev.compute.memory.cuda.CudaBackend} runs on a device's primary context through JCuda, with page
 * mapping for expandable segments ({@link dev.compute.memory.cuda.CudaVirtualMemory}) as FFM downcalls into
 * {@code libcuda.so.1}, copies from pageable memory staged through pinned buffers
 * ({@link dev.compute.memory.cuda.StagingBuffers}), the op set as PTX kernels ({@link dev.compute.memory.cuda.CudaKernelOps}),
 * the pointer and stream for one's own JCuda code on pooled memory ({@link dev.compute.memory.cuda.CudaDeviceHandle}),
 * the context, device and stream for code that builds its own ({@link dev.compute.memory.cuda.CudaNativeDevice}), and
 * one's own PTX kernels for {@code manager.kernels()} ({@code CudaKernel}).
 */
@NullMarked
package dev.compute.memory.cuda;

import org.jspecify.annotations.NullMarked;
