package dev.compute.memory.resource;

import dev.compute.memory.internal.SafeEventListener;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryHandler;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * Gives the application's {@link OutOfMemoryHandler}s a chance to free memory of their own when the upstream has
 * none, then tries again, as RMM's {@code failure_callback_resource_adaptor}. Each handler is asked in turn until
 * one asks for a retry; at most {@code maxRetries} retries per allocation. A request larger than a limit
 * ({@link AllocationAboveLimitException}) fails without asking them: nothing they free could make room for it. Handlers are never re-entered: an
 * allocation a handler makes (on any manager) that fails, fails at once (and, let out of the handler, fails the
 * allocation that asked it with that allocation's own out-of-memory), nor asked by an allocation that may not wait
 * ({@link DeviceWork#withoutWaiting}): its retry asks them. The common path (the upstream has memory)
 * costs one call and a {@code try}. Thread-safe as its upstream and handlers are.
 */
public final class FailureCallbackResource implements MemoryResource {

    /** True on a thread while one of its handlers runs. */
    private static final ThreadLocal<Boolean> IN_HANDLER = ThreadLocal.withInitial(() -> false);

    private final MemoryResource upstream;
    private final MemoryLocation location;
    private final List<OutOfMemoryHandler> handlers;
    private final int maxRetries;
    private final MemoryEventListener events;

    public FailureCallbackResource(MemoryResource upstream, MemoryLocation location, List<OutOfMemoryHandler> handlers,
                                   int maxRetries, MemoryEventListener events) {
        if (maxRetries < 0) {
            throw new IllegalArgumentException("maxRetries must not be negative: " + maxRetries);
        }
        this.upstream = upstream;
        this.location = location;
        this.handlers = List.copyOf(handlers);
        this.maxRetries = maxRetries;
        this.events = SafeEventListener.guard(events);
    }

    @Override
    public Block allocate(long bytes) {
        try {
            return upstream.allocate(bytes);
        } catch (AllocationAboveLimitException e) {
            throw e; // nothing a handler frees can make room for it
        } catch (DeviceOutOfMemoryException e) {
            if (handlers.isEmpty() || maxRetries == 0 || IN_HANDLER.get() || !DeviceWork.mayWait()) {
                throw e;
            }
            return retry(bytes, e);
        }
    }

    private Block retry(long bytes, DeviceOutOfMemoryException first) {
        long start = System.nanoTime();
        DeviceOutOfMemoryException failure = first;
        for (int attempt = 1; attempt <= maxRetries; attempt++) {
            if (!askHandlers(bytes, attempt, failure)) {
                break;
            }
            try {
                Block block = upstream.allocate(bytes);
                events.outOfMemoryRecovery(location, bytes, MemoryEventListener.RecoveryOutcome.RECOVERED, System.nanoTime() - start);
                return block;
            } catch (DeviceOutOfMemoryException e) {
                failure = e;
            }
        }
        events.outOfMemoryRecovery(location, bytes, MemoryEventListener.RecoveryOutcome.FAILED, System.nanoTime() - start);
        throw failure;
    }

    /**
     * True when a handler asks for a retry. A handler that throws fails the allocation with its exception; one that
     * throws an out-of-memory of its own (an allocation it made found no memory) fails it with the allocation's own,
     * the handler's inside, so that the failure says what was asked.
     */
    private boolean askHandlers(long bytes, int attempt, DeviceOutOfMemoryException failure) {
        IN_HANDLER.set(true);
        UserCode.enter();
        try {
            for (OutOfMemoryHandler handler : handlers) {
                if (handler.onOutOfMemory(location, bytes, attempt, failure)) {
                    return true;
                }
            }
            return false;
        } catch (DeviceOutOfMemoryException e) {
            UserCode.suppress(failure, e); // a handler that rethrows the failure it was handed says no
            throw failure;
        } catch (RuntimeException | Error e) {
            UserCode.suppress(e, failure);
            throw e;
        } finally {
            UserCode.exit();
            IN_HANDLER.set(false);
        }
    }

    /** Passed through: where the upstream has no region for the batch, the caller allocates one by one, through {@link #allocate}. */
    @Override
    public @Nullable List<Block> allocateAdjacent(long[] bytes) {
        return upstream.allocateAdjacent(bytes);
    }

    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        upstream.deallocate(block, inFlight);
    }

    @Override
    public void close() {
        upstream.close();
    }
}
