package dev.compute.sample;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.UnifiedBuffer;

/**
 * The clamp for a backend this service has no kernel for: the Java loop of {@link CpuClampKernel} on a host
 * access. On device memory that costs a copy to the host mirror first and marks the host copy newer, so the
 * next device use copies it back; correct everywhere, fast only where host and device share the memory.
 */
final class HostCopyClampKernel implements ClampKernel {

    @Override
    public void clamp(UnifiedBuffer values, double min, double max) {
        try (BufferAccess access = values.hostAccess(AccessMode.READ_WRITE)) {
            CpuClampKernel.clamp(access.segment(), min, max);
        }
    }
}
