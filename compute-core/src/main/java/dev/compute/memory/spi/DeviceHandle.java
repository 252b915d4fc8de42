package dev.compute.memory.spi;

import java.util.concurrent.CompletableFuture;

/**
 * What a backend gives native code for the bytes of one device access ({@link dev.compute.memory.BufferAccess}):
 * a CUDA device pointer and stream, an OpenCL {@code cl_mem} and queue. Each backend documents its own type; users
 * get it with {@link dev.compute.memory.BufferAccess#handle(Class)}. A handle is valid only while its access is
 * open.
 */
public interface DeviceHandle {

    /**
     * Called once, when the access ends: the device work queued on this handle's stream or queue so far (and on
     * anything the user recorded through the handle), as a future that completes when the device is done with it.
     * The buffer's memory is not reused, nor read by the host, before then. Not called when the manager's close
     * ended the access first (the backend may be closed by then).
     */
    CompletableFuture<Void> end();

    /** The handle of a backend that has no native objects for its memory (the CPU: use the access's segment). */
    DeviceHandle NONE = () -> CompletableFuture.completedFuture(null);
}
