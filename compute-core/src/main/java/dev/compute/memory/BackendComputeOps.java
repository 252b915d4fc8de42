package dev.compute.memory;

import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.Holds;
import dev.compute.memory.spi.CallerFutures;
import dev.compute.memory.spi.CompletionThreads;
import dev.compute.memory.spi.Region;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * The op set on a manager's buffers: checks the arguments, holds each buffer's memory for the span of the queueing
 * (syncing what the kernel reads), runs the backend's kernel and records it as device work in flight, so that a
 * close meanwhile never gives the memory to another buffer under the kernel; the caller gets a future of its own
 * ({@link CallerFutures}), so that what it does to it cannot end that record. A kernel that faults on a mapped file
 * truncated under it fails with {@link MappedFileTruncatedException} where the fault reaches Java (a kernel run in Java).
 * The synchronous forms wait for their kernel at most the device wait ({@code compute.memory.device-wait-timeout}): a
 * kernel queued behind work that never ends (a command held at a user event on OpenCL's in-order queue) fails them with
 * {@link DeviceTimeoutException}, as it fails a blocking copy, instead of holding the caller for ever.
 */
final class BackendComputeOps implements ComputeOps {

    private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

    private final PooledMemoryManager manager;

    BackendComputeOps(PooledMemoryManager manager) {
        this.manager = manager;
    }

    @Override
    public CompletableFuture<Void> fillAsync(UnifiedBuffer target, double value) {
        check(target, "target");
        return onOne(target, AccessMode.WRITE, region -> manager.computeBackend().ops().fill(region, value));
    }

    @Override
    public CompletableFuture<Void> scaleAsync(UnifiedBuffer x, double alpha) {
        check(x, "x");
        return onOne(x, AccessMode.READ_WRITE, region -> manager.computeBackend().ops().scale(region, alpha));
    }

    @Override
    public CompletableFuture<Void> axpyAsync(double alpha, UnifiedBuffer x, UnifiedBuffer y) {
        check(x, "x");
        check(y, "y");
        if (x.dataType() != y.dataType() || x.elementCount() != y.elementCount()) {
            throw new IllegalArgumentException("axpy needs x and y of one type and length: x is " + x.elementCount() + " x "
                    + x.dataType() + ", y is " + y.elementCount() + " x " + y.dataType());
        }
        if (overlapPartly(x, y)) {
            long size = x.dataType().byteSize();
            long xStart = x.byteOffset() / size;
            long yStart = y.byteOffset() / size;
            throw new IllegalArgumentException("axpy needs x and y to be the same range or ranges apart: x is elements [" + xStart + ", "
                    + (xStart + x.elementCount()) + ") and y elements [" + yStart + ", " + (yStart + y.elementCount()) + ") of one buffer");
        }
        BufferCore from = x.core();
        BufferCore to = y.core();
        return to.call(null, from, () -> {
            Region xs = Holds.deviceRegion(from, AccessMode.READ);
            CompletableFuture<Void> done = DONE;
            try {
                Region ys = Holds.deviceRegion(to, AccessMode.READ_WRITE);
                try {
                    done = manager.computeBackend().ops().axpy(alpha, xs, ys);
                } finally {
                    Holds.release(to, AccessMode.READ_WRITE, done);
                }
            } finally {
                Holds.release(from, null, done);
            }
            return CallerFutures.forCaller(done);
        });
    }

    @Override
    public CompletableFuture<Double> sumAsync(UnifiedBuffer x) {
        check(x, "x");
        return onOne(x, AccessMode.READ, region -> manager.computeBackend().ops().sum(region));
    }

    @Override
    public void fill(UnifiedBuffer target, double value) {
        await(fillAsync(target, value), "fill of " + target);
    }

    @Override
    public void scale(UnifiedBuffer x, double alpha) {
        await(scaleAsync(x, alpha), "scale of " + x);
    }

    @Override
    public void axpy(double alpha, UnifiedBuffer x, UnifiedBuffer y) {
        await(axpyAsync(alpha, x, y), "axpy into " + y);
    }

    @Override
    public double sum(UnifiedBuffer x) {
        return await(sumAsync(x), "sum of " + x);
    }

    /**
     * The op's result, waited for at most the device wait; its failure as {@code join} throws it. Past the wait, a
     * {@link DeviceTimeoutException}: the op stays queued and runs once the work ahead of it ends.
     */
    private <T> T await(CompletableFuture<T> op, String what) {
        if (op.isDone()) {
            return op.join();
        }
        Duration limit = manager.deviceWaitTimeout();
        CompletionThreads.beforeWaiting(); // the op may be completed later by the very task that runs this wait
        long start = System.nanoTime();
        try {
            op.get(limit.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException | CancellationException failed) {
            // join throws it below, as the caller would get it from join
        } catch (TimeoutException e) {
            throw new DeviceTimeoutException("the " + what + " did not finish within " + limit.toMillis() + " ms (compute.memory"
                    + ".device-wait-timeout): it waits behind device work that does not end (a kernel that runs longer, or a"
                    + " command held at an event nobody sets); it stays queued and runs once that work is over", limit);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DeviceWaitInterruptedException("interrupted while waiting for the " + what + ", which stays queued",
                    Duration.ofNanos(System.nanoTime() - start), e);
        }
        return op.join();
    }

    private <T> CompletableFuture<T> onOne(UnifiedBuffer buffer, AccessMode mode, Function<Region, CompletableFuture<T>> kernel) {
        return buffer.core().call(null, null, kernel, OnOne.of(mode));
    }

    /** The body of an op on one buffer, one per mode, made once: an op passes the door with no lambda made for it. */
    private record OnOne<T>(AccessMode mode) implements BufferCore.CallBody<Function<Region, CompletableFuture<T>>, CompletableFuture<T>> {
        private static final OnOne<?>[] BY_MODE = Arrays.stream(AccessMode.values()).map(OnOne::new).toArray(OnOne<?>[]::new);

        @SuppressWarnings("unchecked")
        static <T> OnOne<T> of(AccessMode mode) {
            return (OnOne<T>) BY_MODE[mode.ordinal()];
        }

        @Override
        public CompletableFuture<T> run(BufferCore core, Function<Region, CompletableFuture<T>> kernel) {
            Region region = Holds.deviceRegion(core, mode);
            CompletableFuture<T> done = null;
            try {
                done = kernel.apply(region);
            } finally {
                Holds.release(core, mode, done == null ? DONE : done);
            }
            return CallerFutures.forCaller(done);
        }
    }

    /**
     * True for two ranges of one buffer's memory that overlap without being the same range: what axpy computes there
     * would depend on the order in which its kernel reads and writes (a loop carries its sums along; a device races).
     */
    private static boolean overlapPartly(UnifiedBuffer x, UnifiedBuffer y) {
        if (x.memoryOwner() != y.memoryOwner() || x.byteOffset() == y.byteOffset()) {
            return false;
        }
        return x.byteOffset() < y.byteOffset() + y.byteSize() && y.byteOffset() < x.byteOffset() + x.byteSize();
    }

    private void check(UnifiedBuffer buffer, String name) {
        // the argument's name, not the line of this class that first reads it
        Objects.requireNonNull(buffer, name);
        if (!buffer.belongsTo(manager)) {
            throw new IllegalArgumentException(name + " belongs to another UnifiedMemoryManager");
        }
        if (buffer.dataType() != DataType.FLOAT32 && buffer.dataType() != DataType.FLOAT64) {
            throw new IllegalArgumentException("the op set works on FLOAT32 and FLOAT64 buffers; " + name + " is " + buffer.dataType());
        }
    }
}
