package dev.compute.memory;

/**
 * Where a buffer's valid data is. On memory the host and the device share (the CPU backend, and
 * host-accessible locations on every backend) there is one copy: a buffer goes from
 * {@link #UNINITIALIZED} to {@link #SYNCHRONIZED} on its first write and stays there.
 */
public enum BufferState {
    /** Nothing written yet. */
    UNINITIALIZED,
    /** Only the host mirror holds data; the device copy was never written. */
    HOST_ONLY,
    /** Only the device copy holds data; there is no host mirror yet. */
    DEVICE_ONLY,
    /** Host mirror and device copy are equal. */
    SYNCHRONIZED,
    /** The host mirror is newer than the device copy. */
    HOST_DIRTY,
    /** The device copy is newer than the host mirror. */
    DEVICE_DIRTY;

    /** True when the host holds data the device does not have yet. */
    public boolean hostIsNewer() {
        return this == HOST_ONLY || this == HOST_DIRTY;
    }

    /** True when the device holds data the host mirror does not have yet. */
    public boolean deviceIsNewer() {
        return this == DEVICE_ONLY || this == DEVICE_DIRTY;
    }
}
