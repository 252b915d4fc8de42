package dev.compute.memory.testing;

import java.time.Duration;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.FreeUnfinishedException;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Wraps a backend and makes chosen calls fail: the Nth allocation (segments and page maps count alike) or the
 * Nth copy, or any of them at a seeded random rate. An allocation fails as the device would when full
 * ({@link BackendOutOfMemoryException}) or as a broken driver would ({@link InjectedFault}); copies fail with
 * {@link InjectedFault}. Failing calls have no effect on the wrapped backend.
 */
public final class FaultInjectingBackend implements ComputeBackend {

    /** A failure this decorator made up. */
    public static final class InjectedFault extends RuntimeException {
        InjectedFault(String what) {
            super("injected fault: " + what);
        }
    }

    public enum AllocationFault { OUT_OF_MEMORY, DRIVER_ERROR }

    private final ComputeBackend delegate;
    private final AtomicLong allocationCalls = new AtomicLong();
    private final AtomicLong copyCalls = new AtomicLong();
    private final AtomicLong injected = new AtomicLong();
    private volatile long failAllocation = -1;
    private volatile long failCopy = -1;
    private volatile AllocationFault allocationFault = AllocationFault.OUT_OF_MEMORY;
    private volatile double randomRate;
    private volatile boolean failMemoryInfo;
    private volatile @Nullable MemoryLocation failGivingBackAt;
    private volatile @Nullable MemoryLocation errorGivingBackAt;
    private volatile @Nullable MemoryLocation leaveFreesUnfinishedAt;
    private volatile @Nullable CompletableFuture<?> kernelFailure;
    private final Random random;

    public FaultInjectingBackend(ComputeBackend delegate, long seed) {
        this.delegate = delegate;
        this.random = new Random(seed);
    }

    /** The {@code n}th allocation from now (1 = the next one) fails with {@code fault}. */
    public FaultInjectingBackend failAllocation(long n, AllocationFault fault) {
        this.allocationFault = fault;
        this.failAllocation = allocationCalls.get() + n;
        return this;
    }

    /** The {@code n}th copy from now (1 = the next one) fails. */
    public FaultInjectingBackend failCopy(long n) {
        this.failCopy = copyCalls.get() + n;
        return this;
    }

    /** Every allocation and copy fails with probability {@code rate} (0 turns it off). */
    public FaultInjectingBackend failRandomly(double rate, AllocationFault fault) {
        this.allocationFault = fault;
        this.randomRate = rate;
        return this;
    }

    /**
     * Every free and page unmap of memory at {@code location} fails from now, as a driver that refuses them does, the
     * memory kept; {@code null} turns it off.
     */
    public FaultInjectingBackend failGivingBackAt(@Nullable MemoryLocation location) {
        this.failGivingBackAt = location;
        return this;
    }

    /**
     * Every free of memory at {@code location} is left unfinished from now ({@link FreeUnfinishedException}), the memory
     * kept, as OpenCL's PINNED memory whose release is refused after its unmap; {@code null} turns it off.
     */
    public FaultInjectingBackend leaveFreesUnfinishedAt(@Nullable MemoryLocation location) {
        this.leaveFreesUnfinishedAt = location;
        return this;
    }

    /** Every free or unmap at {@code location} throws an {@link Error}, as a broken native call might; null: none. */
    public FaultInjectingBackend failGivingBackWithAnErrorAt(@Nullable MemoryLocation location) {
        this.errorGivingBackAt = location;
        return this;
    }

    private void beforeGivingBack(MemoryLocation location, String what) {
        if (location == failGivingBackAt) {
            injected.incrementAndGet();
            throw new InjectedFault(what + " at " + location);
        }
        if (location == errorGivingBackAt) {
            injected.incrementAndGet();
            throw new AssertionError("injected error: " + what + " at " + location);
        }
    }

    /** While {@code fail}, every question about the device's memory fails, as a driver in trouble answers. */
    public FaultInjectingBackend failMemoryInfo(boolean fail) {
        this.failMemoryInfo = fail;
        return this;
    }

    public long injectedFaults() {
        return injected.get();
    }

    private boolean roll() {
        double rate = randomRate;
        if (rate <= 0) {
            return false;
        }
        synchronized (random) {
            return random.nextDouble() < rate;
        }
    }

    private void beforeAllocation(String what) {
        if (allocationCalls.incrementAndGet() == failAllocation || roll()) {
            injected.incrementAndGet();
            if (allocationFault == AllocationFault.OUT_OF_MEMORY) {
                throw new BackendOutOfMemoryException("injected fault: out of memory in " + what);
            }
            throw new InjectedFault("driver error in " + what);
        }
    }

    private void beforeCopy(String what) {
        if (copyCalls.incrementAndGet() == failCopy || roll()) {
            injected.incrementAndGet();
            throw new InjectedFault(what);
        }
    }

    @Override
    public BackendInfo info() {
        return delegate.info();
    }

    @Override
    public DeviceMemoryInfo memoryInfo() {
        if (failMemoryInfo) {
            injected.incrementAndGet();
            throw new InjectedFault("driver error in memoryInfo");
        }
        return delegate.memoryInfo();
    }

    @Override
    public MemoryLocation defaultLocation() {
        return delegate.defaultLocation();
    }

    @Override
    public BackendAvailability supports(MemoryLocation location) {
        return delegate.supports(location);
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return delegate.hostAccessible(location);
    }

    @Override
    public NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        beforeAllocation("allocate " + sizeBytes + " bytes at " + location);
        return delegate.allocate(location, sizeBytes);
    }

    @Override
    public void free(NativeAllocation allocation) {
        beforeGivingBack(allocation.location(), "free");
        if (allocation.location() == leaveFreesUnfinishedAt) {
            injected.incrementAndGet();
            throw new FreeUnfinishedException("injected fault: free left unfinished at " + allocation.location());
        }
        delegate.free(allocation);
    }

    @Override
    public Optional<VirtualMemory> virtualMemory(MemoryLocation location) {
        return delegate.virtualMemory(location).map(vm -> new VirtualMemory() {
            @Override
            public long granularity() {
                return vm.granularity();
            }

            @Override
            public NativeAllocation reserve(long sizeBytes) {
                return vm.reserve(sizeBytes);
            }

            @Override
            public void map(NativeAllocation range, long offset, long length) {
                beforeAllocation("map " + length + " bytes");
                vm.map(range, offset, length);
            }

            @Override
            public void unmap(NativeAllocation range, long offset, long length) {
                beforeGivingBack(location, "unmap");
                vm.unmap(range, offset, length);
            }

            @Override
            public void release(NativeAllocation range) {
                vm.release(range);
            }
        });
    }

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        beforeCopy("copy to device");
        delegate.copyToDevice(source, target, targetOffset, bytes);
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        beforeCopy("copy to host");
        delegate.copyToHost(source, sourceOffset, target, bytes);
    }

    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        beforeCopy("copy within device");
        delegate.copyWithinDevice(source, sourceOffset, target, targetOffset, bytes);
    }

    @Override
    public CompletableFuture<Void> copyToDeviceAsync(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        beforeCopy("async copy to device");
        return delegate.copyToDeviceAsync(source, target, targetOffset, bytes);
    }

    @Override
    public CompletableFuture<Void> copyToHostAsync(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        beforeCopy("async copy to host");
        return delegate.copyToHostAsync(source, sourceOffset, target, bytes);
    }

    @Override
    public KernelOps ops() {
        KernelOps ops = delegate.ops();
        return new KernelOps() {
            @Override
            public CompletableFuture<Void> fill(Region target, double value) {
                return failedIfAsked(ops.fill(target, value));
            }

            @Override
            public CompletableFuture<Void> scale(Region x, double alpha) {
                return failedIfAsked(ops.scale(x, alpha));
            }

            @Override
            public CompletableFuture<Void> axpy(double alpha, Region x, Region y) {
                return failedIfAsked(ops.axpy(alpha, x, y));
            }

            @Override
            public CompletableFuture<Double> sum(Region x) {
                return failedIfAsked(ops.sum(x));
            }
        };
    }

    /**
     * The next kernel runs, but its future stays pending until {@code trigger} completes and then fails with an
     * {@link InjectedFault}: device work that fails after it was queued, as a kernel that faults on the device.
     */
    public FaultInjectingBackend failNextKernelWhen(CompletableFuture<?> trigger) {
        this.kernelFailure = trigger;
        return this;
    }

    private <T> CompletableFuture<T> failedIfAsked(CompletableFuture<T> kernel) {
        CompletableFuture<?> trigger = kernelFailure;
        if (trigger == null) {
            return kernel;
        }
        kernelFailure = null;
        injected.incrementAndGet();
        CompletableFuture<T> failing = new CompletableFuture<>();
        trigger.whenComplete((result, failure) -> failing.completeExceptionally(new InjectedFault("kernel")));
        return failing;
    }

    @Override
    public DeviceHandle openDeviceHandle(NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        return delegate.openDeviceHandle(allocation, offset, bytes, mode);
    }

    @Override
    public boolean awaitIdle(Duration timeout) {
        return delegate.awaitIdle(timeout);
    }

    @Override
    public void close() {
        delegate.close();
    }
}
