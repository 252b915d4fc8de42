/**
 * The OpenCL backend, through JOCL: {@link dev.compute.memory.opencl.OpenClBackendProvider} finds a platform
 * and device by the {@code platform} and {@code device-type} options and the device index;
 * {@link dev.compute.memory.opencl.OpenClBackend} hands out buffers, shared virtual memory and host memory,
 * copies through one in-order command queue and runs the op set as OpenCL C kernels;
 * {@link dev.compute.memory.opencl.OpenClDeviceHandle} gives one's own JOCL code a device access's bytes and
 * {@link dev.compute.memory.opencl.OpenClNativeDevice} the context, device and queue; {@code manager.kernels()} builds
 * and launches OpenCL C kernels through {@code OpenClKernel}.
 */
@NullMarked
package dev.compute.memory.opencl;

import org.jspecify.annotations.NullMarked;
