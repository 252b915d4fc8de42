package dev.compute.memory.spi;

/**
 * What a backend gives code that builds its own native work on the manager's device
 * ({@link dev.compute.memory.UnifiedMemoryManager#nativeDevice(Class)}): the OpenCL context, device and queue
 * ({@code OpenClNativeDevice}), the CUDA context, device and the calling thread's stream ({@code CudaNativeDevice}).
 * Each backend documents its own type. Valid until the manager closes; what one makes with it (programs, modules,
 * queues) is one's own to release, before the manager closes.
 */
public interface NativeDevice {
}
