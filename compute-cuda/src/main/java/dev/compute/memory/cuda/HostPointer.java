package dev.compute.memory.cuda;

import jcuda.Pointer;

/** A JCuda {@code Pointer} for a raw host address (a pinned staging slot), and the address JCuda filled in. */
final class HostPointer extends Pointer {

    /** An empty pointer for JCuda to fill ({@code cuMemHostAlloc}). */
    HostPointer() {}

    HostPointer(long address) {
        super(address);
    }

    long address() {
        return getNativePointer() + getByteOffset();
    }
}
