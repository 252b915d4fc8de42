package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuMemAlloc;
import static dev.compute.memory.cuda.DriverCalls.cuMemAllocManaged;
import static dev.compute.memory.cuda.DriverCalls.cuMemFree;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntSupplier;
import jcuda.driver.CUmemAttach_flags;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/**
 * The backend's memory at each location: DEVICE from {@code cuMemAlloc}, PINNED from {@code cuMemHostAlloc} (portable,
 * mapped into the device's address space), UNIFIED from {@code cuMemAllocManaged}, HOST from a shared {@link Arena}.
 * It keeps the ranges of its PINNED and UNIFIED allocations, host memory the device reads directly: a copy from or to
 * them needs no staging, and while any is live the primary context must stay, since releasing its last reference
 * would unmap them. The backend checks that the location is offered and that it is open before it calls here.
 */
final class CudaAllocator {

    /** The PINNED and UNIFIED allocations still live: how many, and their bytes in all. */
    record LiveHostMemory(int allocations, long bytes) {}

    private final CudaContext context;
    /** Our PINNED and UNIFIED allocations (base → end): host memory the device reads directly. */
    private final ConcurrentSkipListMap<Long, Long> deviceVisibleHost = new ConcurrentSkipListMap<>();
    /** DEVICE, PINNED and UNIFIED allocations not freed: memory a device handle may reach. */
    private final AtomicInteger liveAllocations = new AtomicInteger();

    CudaAllocator(CudaContext context) {
        this.context = context;
    }

    /** A fresh allocation of {@code sizeBytes} at {@code location}, with the context made current for the driver. */
    NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        context.makeCurrent();
        String where = sizeBytes + " bytes on device " + context.ordinal;
        switch (location) {
            case DEVICE -> {
                DevicePointer pointer = new DevicePointer();
                CudaResults.check(cuMemAlloc(pointer, sizeBytes), "cuMemAlloc(" + where + ")");
                liveAllocations.incrementAndGet();
                return new NativeAllocation(location, pointer.address(), sizeBytes, null, pointer);
            }
            case PINNED -> {
                // through FFM: JCuda's cuMemHostAlloc fails (and leaks the memory) from 2 GiB on, see DriverLibrary.hostAlloc
                long address = context.driver.hostAlloc(sizeBytes, JCudaDriver.CU_MEMHOSTALLOC_PORTABLE | JCudaDriver.CU_MEMHOSTALLOC_DEVICEMAP,
                        "cuMemHostAlloc(" + sizeBytes + " bytes)");
                HostPointer pointer = new HostPointer(address);
                deviceVisibleHost.put(address, address + sizeBytes);
                liveAllocations.incrementAndGet();
                return new NativeAllocation(location, address, sizeBytes, MemorySegment.ofAddress(address).reinterpret(sizeBytes), pointer);
            }
            case UNIFIED -> {
                DevicePointer pointer = new DevicePointer();
                CudaResults.check(cuMemAllocManaged(pointer, sizeBytes, CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged(" + where + ")");
                long address = pointer.address();
                deviceVisibleHost.put(address, address + sizeBytes);
                liveAllocations.incrementAndGet();
                return new NativeAllocation(location, address, sizeBytes, MemorySegment.ofAddress(address).reinterpret(sizeBytes), pointer);
            }
            case HOST -> {
                Arena arena = Arena.ofShared();
                try {
                    MemorySegment segment = arena.allocate(sizeBytes, 256);
                    return new NativeAllocation(location, segment.address(), sizeBytes, segment, arena);
                } catch (OutOfMemoryError e) {
                    arena.close();
                    throw new BackendOutOfMemoryException("no host memory for " + sizeBytes + " bytes: " + e.getMessage(), e);
                }
            }
            default -> throw new IllegalArgumentException("unknown location " + location);
        }
    }

    /** Gives an allocation back, with the context made current; a reserved range of the virtual memory is refused. */
    void free(NativeAllocation allocation) {
        context.makeCurrent();
        switch (allocation.handle()) {
            case CudaVirtualMemory.ReservedRange range ->
                    throw new IllegalArgumentException(range + " is a reserved range: give it back with virtualMemory(DEVICE).release");
            case DevicePointer pointer -> countedOut(allocation, () -> cuMemFree(pointer), "cuMemFree");
            case HostPointer pointer -> countedOut(allocation, () -> context.driver.freeHost(pointer.address()), "cuMemFreeHost");
            case Arena arena -> arena.close();
            case null, default -> throw new IllegalArgumentException("not an allocation of this backend: " + allocation);
        }
    }

    /**
     * Counts {@code allocation} out, then has the driver free it with {@code free}. Out before the call: once the driver
     * has freed the address, another thread's allocation may get it and count it in. A free the driver refuses leaves
     * the memory allocated, and the caller's: it is counted in again, so that a copy still reaches it directly and the
     * close keeps the context that maps it.
     */
    private void countedOut(NativeAllocation allocation, IntSupplier free, String call) {
        Long end = deviceVisibleHost.remove(allocation.address());
        liveAllocations.decrementAndGet();
        int result = free.getAsInt();
        if (result != CUresult.CUDA_SUCCESS) {
            if (end != null) {
                deviceVisibleHost.put(allocation.address(), end);
            }
            liveAllocations.incrementAndGet();
        }
        CudaResults.check(result, call + "(" + allocation.sizeBytes() + " bytes)");
    }

    /** Whether {@code bytes} of {@code segment} lie in our pinned or managed memory, which the device reads directly. */
    boolean deviceVisible(MemorySegment segment, long bytes) {
        if (!segment.isNative()) {
            return false;
        }
        long start = segment.address();
        Map.Entry<Long, Long> owner = deviceVisibleHost.floorEntry(start);
        return owner != null && start + bytes <= owner.getValue();
    }

    /** Whether DEVICE, PINNED or UNIFIED memory is still allocated: what a device handle may reach. */
    boolean holdsMemory() {
        return liveAllocations.get() > 0;
    }

    /** The PINNED and UNIFIED allocations not freed: while there are any, the context must not go. */
    LiveHostMemory liveHostMemory() {
        int live = 0;
        long bytes = 0;
        for (Map.Entry<Long, Long> allocation : deviceVisibleHost.entrySet()) {
            live++;
            bytes += allocation.getValue() - allocation.getKey();
        }
        return new LiveHostMemory(live, bytes);
    }
}
