package dev.compute.memory;

import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.Holds;
import dev.compute.memory.spi.CallerFutures;
import dev.compute.memory.spi.Region;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * The op set on a manager's buffers: checks the arguments, holds each buffer's memory for the span of the queueing
 * (syncing what the kernel reads), runs the backend's kernel and records it as device work in flight, so that a
 * close meanwhile never gives the memory to another buffer under the kernel; the caller gets a future of its own
 * ({@link CallerFutures}), so that what it does to it cannot end that record. A kernel that faults on a mapped file
 * truncated under it fails with {@link MappedFileTruncatedException} where the fault reaches Java (a kernel run in Java).
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

    private <T> CompletableFuture<T> onOne(UnifiedBuffer buffer, AccessMode mode, Function<Region, CompletableFuture<T>> kernel) {
        BufferCore core = buffer.core();
        return core.call(null, null, () -> {
            Region region = Holds.deviceRegion(core, mode);
            CompletableFuture<T> done = null;
            try {
                done = kernel.apply(region);
            } finally {
                Holds.release(core, mode, done == null ? DONE : done);
            }
            return CallerFutures.forCaller(done);
        });
    }

    private void check(UnifiedBuffer buffer, String name) {
        if (!buffer.belongsTo(manager)) {
            throw new IllegalArgumentException(name + " belongs to another UnifiedMemoryManager");
        }
        if (buffer.dataType() != DataType.FLOAT32 && buffer.dataType() != DataType.FLOAT64) {
            throw new IllegalArgumentException("the op set works on FLOAT32 and FLOAT64 buffers; " + name + " is " + buffer.dataType());
        }
    }
}
