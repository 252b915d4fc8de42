package dev.compute.memory.cpu;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.BytesLedger;

/**
 * The host memory this process's CPU backends hold (allocations and mapped pages), against the machine's memory and
 * swap. Linux charges memory when it is touched, not when it is allocated: under {@code vm.overcommit_memory=0} (the
 * default) it grants every allocation smaller than RAM and swap, however many there are, and memory that is not there
 * is found by the OOM killer, which ends the process on a first touch. Counting here refuses the allocation that would
 * pass the machine's memory instead, with the same exception and message as a refusal of the kernel's. One ledger for
 * the process: every backend (one per manager, every location) takes from the same machine. It counts this process's
 * compute memory only; the heap and other processes may still take what it leaves. Thread-safe.
 */
final class HostMemoryLedger {

    /** The process's ledger, at the machine's (or the container's) memory and swap; no limit where they cannot be read. */
    static final HostMemoryLedger PROCESS = new HostMemoryLedger(LinuxHost.memoryAndSwapBytes());

    private final BytesLedger bytes;

    /** A ledger that refuses nothing: for tests of the kernel's own refusals. */
    static HostMemoryLedger unlimited() {
        return new HostMemoryLedger(Long.MAX_VALUE);
    }

    /** A ledger that refuses past {@code limitBytes}; none where it is not positive. */
    HostMemoryLedger(long limitBytes) {
        this.bytes = new BytesLedger(limitBytes > 0 ? limitBytes : Long.MAX_VALUE);
    }

    /** Counts {@code size} bytes about to be allocated or mapped, or throws the backend's out-of-memory exception. */
    void take(MemoryLocation location, long size) {
        if (!bytes.tryTake(size)) {
            throw CpuBackend.outOfMemory(location, size, "this process's CPU backends hold " + bytes.heldBytes() + " bytes, and "
                    + size + " more would pass the " + bytes.limitBytes() + " bytes of the machine's memory and swap (Linux"
                    + " would grant them and end the process when they are touched)");
        }
    }

    /** Counts {@code size} bytes freed or unmapped, or taken and then not allocated. */
    void giveBack(long size) {
        bytes.giveBack(size);
    }

    long heldBytes() {
        return bytes.heldBytes();
    }

    long limitBytes() {
        return bytes.limitBytes();
    }
}
