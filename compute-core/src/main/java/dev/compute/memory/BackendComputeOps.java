package dev.compute.memory;

import dev.compute.memory.spi.Region;
import java.util.concurrent.CompletableFuture;

/** The op set on a manager's buffers: checks the arguments, syncs what the kernel reads, runs the backend's kernel. */
final class BackendComputeOps implements ComputeOps {

    private final PooledMemoryManager manager;

    BackendComputeOps(PooledMemoryManager manager) {
        this.manager = manager;
    }

    @Override
    public CompletableFuture<Void> fillAsync(UnifiedBuffer target, double value) {
        check(target, "target");
        try (var access = manager.access()) {
            Region region = target.deviceRegion(true);
            return recorded(manager.computeBackend().ops().fill(region, value), target);
        }
    }

    @Override
    public CompletableFuture<Void> scaleAsync(UnifiedBuffer x, double alpha) {
        check(x, "x");
        try (var access = manager.access()) {
            Region region = x.deviceRegion(true);
            return recorded(manager.computeBackend().ops().scale(region, alpha), x);
        }
    }

    @Override
    public CompletableFuture<Void> axpyAsync(double alpha, UnifiedBuffer x, UnifiedBuffer y) {
        check(x, "x");
        check(y, "y");
        if (x.dataType() != y.dataType() || x.elementCount() != y.elementCount()) {
            throw new IllegalArgumentException("axpy needs x and y of one type and length: x is " + x.elementCount() + " x "
                    + x.dataType() + ", y is " + y.elementCount() + " x " + y.dataType());
        }
        try (var access = manager.access()) {
            Region from = x.deviceRegion(false);
            Region to = y.deviceRegion(true);
            CompletableFuture<Void> done = manager.computeBackend().ops().axpy(alpha, from, to);
            x.recordInFlight(done);
            return recorded(done, y);
        }
    }

    @Override
    public CompletableFuture<Double> sumAsync(UnifiedBuffer x) {
        check(x, "x");
        try (var access = manager.access()) {
            Region region = x.deviceRegion(false);
            return recorded(manager.computeBackend().ops().sum(region), x);
        }
    }

    private static <T> CompletableFuture<T> recorded(CompletableFuture<T> work, UnifiedBuffer buffer) {
        if (!work.isDone()) {
            buffer.recordInFlight(work);
        }
        return work;
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
