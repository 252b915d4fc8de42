package dev.compute.memory;

/** Where a buffer's memory lives. */
public enum MemoryLocation {
    /** Accelerator memory (on the CPU backend: ordinary off-heap memory). */
    DEVICE,
    /** Ordinary off-heap host memory. */
    HOST,
    /** Page-locked host memory: the fast path for transfers to and from a device. */
    PINNED,
    /** One address space for host and device: CUDA managed memory, OpenCL SVM, everything on the CPU backend. */
    UNIFIED
}
