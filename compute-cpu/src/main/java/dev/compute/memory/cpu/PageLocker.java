package dev.compute.memory.cpu;

/**
 * Locks pages into RAM: {@code mlock} in production. A seam so tests can make the kernel's refusal happen on a
 * machine whose memlock limit would allow the lock (and the reverse cannot be faked, so it is tested for real).
 */
@FunctionalInterface
interface PageLocker {

    PageLocker MLOCK = Posix::mlock;

    /** Locks {@code [address, address + length)}; returns 0, or the errno of the refusal. */
    int lock(long address, long length);
}
