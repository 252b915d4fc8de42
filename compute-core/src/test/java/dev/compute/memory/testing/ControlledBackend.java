package dev.compute.memory.testing;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.KernelArgument;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.NativeKernel;
import dev.compute.memory.spi.Region;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * Wraps a backend (the simulated discrete device, usually) and lets a test decide what the device does: async copies
 * and kernels that stay queued until the test lets them run ({@link #holdDeviceWork()}, {@link #releaseDeviceWork()}),
 * an {@link #awaitIdle} that answers what the test says, device handles that fail to open or to end, a close that
 * throws, and locations it says it does not offer. Everything else goes to the wrapped backend unchanged.
 */
public final class ControlledBackend implements ComputeBackend {

    private final ComputeBackend delegate;
    private volatile CompletableFuture<Void> deviceWork = CompletableFuture.completedFuture(null);
    private volatile boolean idle = true;
    private volatile CompletableFuture<?> idleOnceDone = CompletableFuture.completedFuture(null);
    private volatile @Nullable RuntimeException openHandleFailure;
    private volatile @Nullable Runnable beforeOpeningHandle;
    private volatile @Nullable Runnable beforeCheckingLaunch;
    private volatile @Nullable RuntimeException endHandleFailure;
    private volatile @Nullable RuntimeException closeFailure;
    private volatile @Nullable RuntimeException awaitIdleFailure;
    private volatile @Nullable RuntimeException discardFailure;
    private final AtomicInteger discardCalls = new AtomicInteger();
    private final java.util.Map<MemoryLocation, String> refused = new java.util.concurrent.ConcurrentHashMap<>();
    private final AtomicInteger awaitIdleCalls = new AtomicInteger();
    private final AtomicInteger handlesEnded = new AtomicInteger();
    private final AtomicInteger closes = new AtomicInteger();
    private final List<Duration> closeBounds = new CopyOnWriteArrayList<>();
    private volatile long maxAllocationBytes = -1;

    public ControlledBackend(ComputeBackend delegate) {
        this.delegate = delegate;
    }

    // ---- what the test decides ----------------------------------------------------------------------------------

    /** Async copies and kernels queued from now on run only once {@link #releaseDeviceWork()} is called. */
    public void holdDeviceWork() {
        deviceWork = new CompletableFuture<>();
    }

    /** Runs the work held since {@link #holdDeviceWork()} (on this thread) and completes its futures. */
    public void releaseDeviceWork() {
        deviceWork.complete(null);
    }

    /**
     * {@link #awaitIdle} waits for {@code work} from now on, as the OpenCL and CUDA backends wait for their queues: at most
     * its timeout, and no longer once the thread is interrupted (false then, the interrupt set again).
     */
    public void idleOnceDone(CompletableFuture<?> work) {
        idleOnceDone = work;
    }

    /** What {@link #awaitIdle} answers from now on. */
    public void idle(boolean answer) {
        idle = answer;
    }

    public void failOpeningHandles(@Nullable RuntimeException failure) {
        openHandleFailure = failure;
    }

    /** Runs {@code action} on the opening thread before each device handle opens, from now on (null: nothing). */
    public void beforeOpeningHandles(@Nullable Runnable action) {
        beforeOpeningHandle = action;
    }

    /** Runs {@code action} on the launching thread before a kernel checks each launch, from now on (null: nothing). */
    public void beforeCheckingLaunches(@Nullable Runnable action) {
        beforeCheckingLaunch = action;
    }

    public void failEndingHandles(@Nullable RuntimeException failure) {
        endHandleFailure = failure;
    }

    public void failClosing(@Nullable RuntimeException failure) {
        closeFailure = failure;
    }

    /** What {@link #awaitIdle} throws from now on, as CUDA's did on a lost context. */
    public void failAwaitingIdle(@Nullable RuntimeException failure) {
        awaitIdleFailure = failure;
    }

    /** How often {@link #discardPages} was called. */
    public int discardCalls() {
        return discardCalls.get();
    }

    /** {@link #discardPages} throws {@code failure} from now on (null: forwards again). */
    public void failDiscarding(@Nullable RuntimeException failure) {
        discardFailure = failure;
    }

    /** The largest single allocation the backend says it makes, at every location (from the start: the pool reads it once). */
    public ControlledBackend maxAllocationBytes(long bytes) {
        maxAllocationBytes = bytes;
        return this;
    }

    /** The backend says it has no memory at {@code location}, for {@code reason}. */
    public ControlledBackend refuse(MemoryLocation location, String reason) {
        refused.put(location, reason);
        return this;
    }

    public int awaitIdleCalls() {
        return awaitIdleCalls.get();
    }

    /** Device handles whose {@link DeviceHandle#end()} was called (whether it threw or not). */
    public int handlesEnded() {
        return handlesEnded.get();
    }

    public int closes() {
        return closes.get();
    }

    /** The bounds {@link #close(Duration)} was given, in order; a {@link #close()} adds none. */
    public List<Duration> closeBounds() {
        return List.copyOf(closeBounds);
    }

    public ComputeBackend delegate() {
        return delegate;
    }

    private <T> CompletableFuture<T> queued(Supplier<CompletableFuture<T>> work) {
        CompletableFuture<Void> gate = deviceWork;
        return gate.isDone() ? work.get() : gate.thenCompose(ignored -> work.get());
    }

    // ---- the backend --------------------------------------------------------------------------------------------

    @Override
    public BackendInfo info() {
        return delegate.info();
    }

    @Override
    public DeviceMemoryInfo memoryInfo() {
        return delegate.memoryInfo();
    }

    @Override
    public MemoryLocation defaultLocation() {
        return delegate.defaultLocation();
    }

    @Override
    public BackendAvailability supports(MemoryLocation location) {
        String reason = refused.get(location);
        return reason != null ? BackendAvailability.unavailable(reason) : delegate.supports(location);
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return delegate.hostAccessible(location);
    }

    @Override
    public NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        return delegate.allocate(location, sizeBytes);
    }

    @Override
    public long discardPages(NativeAllocation allocation, long offset, long bytes) {
        discardCalls.incrementAndGet();
        RuntimeException failure = discardFailure;
        if (failure != null) {
            throw failure;
        }
        return delegate.discardPages(allocation, offset, bytes);
    }

    @Override
    public void free(NativeAllocation allocation) {
        delegate.free(allocation);
    }

    @Override
    public long maxAllocationBytes(MemoryLocation location) {
        return maxAllocationBytes >= 0 ? maxAllocationBytes : delegate.maxAllocationBytes(location);
    }

    @Override
    public Optional<VirtualMemory> virtualMemory(MemoryLocation location) {
        return delegate.virtualMemory(location);
    }

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        delegate.copyToDevice(source, target, targetOffset, bytes);
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        delegate.copyToHost(source, sourceOffset, target, bytes);
    }

    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        delegate.copyWithinDevice(source, sourceOffset, target, targetOffset, bytes);
    }

    @Override
    public CompletableFuture<Void> copyToDeviceAsync(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        return queued(() -> delegate.copyToDeviceAsync(source, target, targetOffset, bytes));
    }

    @Override
    public CompletableFuture<Void> copyToHostAsync(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        return queued(() -> delegate.copyToHostAsync(source, sourceOffset, target, bytes));
    }

    @Override
    public KernelOps ops() {
        KernelOps ops = delegate.ops();
        return new KernelOps() {
            @Override
            public CompletableFuture<Void> fill(Region target, double value) {
                return queued(() -> ops.fill(target, value));
            }

            @Override
            public CompletableFuture<Void> scale(Region x, double alpha) {
                return queued(() -> ops.scale(x, alpha));
            }

            @Override
            public CompletableFuture<Void> axpy(double alpha, Region x, Region y) {
                return queued(() -> ops.axpy(alpha, x, y));
            }

            @Override
            public CompletableFuture<Double> sum(Region x) {
                return queued(() -> ops.sum(x));
            }
        };
    }

    @Override
    public DeviceHandle openDeviceHandle(NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        Runnable before = beforeOpeningHandle;
        if (before != null) {
            before.run();
        }
        RuntimeException failure = openHandleFailure;
        if (failure != null) {
            throw failure;
        }
        return new Handle(delegate.openDeviceHandle(allocation, offset, bytes, mode));
    }

    /** The wrapped backend's handle, whose end the test may make fail. */
    private final class Handle implements DeviceHandle {
        private final DeviceHandle wrapped;

        Handle(DeviceHandle wrapped) {
            this.wrapped = wrapped;
        }

        @Override
        public CompletableFuture<Void> end() {
            handlesEnded.incrementAndGet();
            RuntimeException endFailure = endHandleFailure;
            if (endFailure != null) {
                throw endFailure;
            }
            return wrapped.end();
        }
    }

    @Override
    public Set<KernelSource.Language> kernelLanguages() {
        return delegate.kernelLanguages();
    }

    /** The wrapped backend's kernel, launched with the wrapped backend's handles, which it knows. */
    @Override
    public NativeKernel compileKernel(KernelSource source) {
        NativeKernel kernel = delegate.compileKernel(source);
        return new NativeKernel() {
            @Override
            public String name() {
                return kernel.name();
            }

            @Override
            public void check(LaunchShape shape, List<Object> arguments) {
                Runnable before = beforeCheckingLaunch;
                if (before != null) {
                    before.run();
                }
                kernel.check(shape, arguments);
            }

            @Override
            public CompletableFuture<Void> launch(LaunchShape shape, List<KernelArgument> arguments) {
                return kernel.launch(shape, arguments.stream().map(argument -> argument instanceof KernelArgument.Buffer buffer
                        && buffer.handle() instanceof Handle handle ? new KernelArgument.Buffer(handle.wrapped, buffer.hostSegment(),
                        buffer.byteSize(), buffer.type(), buffer.mode(), buffer.description()) : argument).toList());
            }
        };
    }

    @Override
    public boolean awaitIdle(Duration timeout) {
        awaitIdleCalls.incrementAndGet();
        RuntimeException failure = awaitIdleFailure;
        if (failure != null) {
            throw failure;
        }
        try {
            idleOnceDone.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException failed) {
            // failed work has ended too
        } catch (TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        return idle && delegate.awaitIdle(timeout);
    }

    /** Records {@code deviceWait} ({@link #closeBounds}), then closes as {@link #close()} does. */
    @Override
    public void close(Duration deviceWait) {
        closeBounds.add(deviceWait);
        close();
    }

    @Override
    public void close() {
        closes.incrementAndGet();
        delegate.close();
        RuntimeException failure = closeFailure;
        if (failure != null) {
            throw failure;
        }
    }
}
