package dev.compute.memory.resource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.resource.pool.CachingPoolResource;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class FailureCallbackResourceTest extends MemoryResourceContract {

    @Override
    protected MemoryResource create(BackendResource upstream) {
        return new FailureCallbackResource(upstream, MemoryLocation.DEVICE, List.of((location, bytes, attempt, failure) -> false), 3,
                MemoryEventListener.NONE);
    }

    /** Under the cap, more than is left once {@link #fill} holds its block. */
    private static final long NO_ROOM = 32 * MiB;

    private FailureCallbackResource withHandlers(List<OutOfMemoryHandler> handlers, int retries, MemoryEventListener events) {
        return new FailureCallbackResource(new CachingPoolResource(backendResource(backend), PoolSettings.expandable(), events),
                MemoryLocation.DEVICE, handlers, retries, events);
    }

    /** Takes all but 16 MiB under the cap (given back when the resource closes). */
    private static void fill(MemoryResource resource) {
        resource.allocate(LIMIT - 16 * MiB);
    }

    @Test
    void aHandlerThatEvictsItsCacheLetsTheAllocationThrough() {
        Deque<Block> cache = new ArrayDeque<>();
        AtomicInteger calls = new AtomicInteger();
        List<String> recoveries = new ArrayList<>();
        MemoryResource[] self = new MemoryResource[1];
        OutOfMemoryHandler evict = (location, bytes, attempt, failure) -> {
            calls.incrementAndGet();
            assertThat(failure.requestedBytes()).isEqualTo(100 * MiB);
            for (int i = 0; i < 4 && !cache.isEmpty(); i++) {
                self[0].deallocate(cache.pop());
            }
            return true;
        };
        MemoryEventListener events = new MemoryEventListener() {
            @Override
            public void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {
                recoveries.add((outcome == RecoveryOutcome.RECOVERED ? "recovered " : "failed ") + requestedBytes);
            }
        };
        try (FailureCallbackResource resource = withHandlers(List.of(evict), 3, events)) {
            self[0] = resource;
            for (int i = 0; i < 15; i++) {
                cache.push(resource.allocate(16 * MiB)); // 240 of the 256 MiB
            }

            Block big = resource.allocate(100 * MiB);

            assertThat(calls.get()).as("four blocks a call: two calls free 128 MiB").isEqualTo(2);
            assertThat(recoveries).contains("recovered " + 100 * MiB);
            resource.deallocate(big);
            cache.forEach(resource::deallocate);
        }
    }

    @Test
    void retriesAreBoundedWhenAHandlerFreesNothing() {
        AtomicInteger calls = new AtomicInteger();
        try (FailureCallbackResource resource = withHandlers(List.of((location, bytes, attempt, failure) -> {
            assertThat(attempt).isEqualTo(calls.incrementAndGet());
            return true;
        }), 3, MemoryEventListener.NONE)) {
            fill(resource);
            assertThatThrownBy(() -> resource.allocate(NO_ROOM)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(calls.get()).isEqualTo(3);
        }
    }

    @Test
    void handlersAreAskedInTurnUntilOneAsksForARetry() {
        List<String> asked = new ArrayList<>();
        try (FailureCallbackResource resource = withHandlers(List.of(
                (location, bytes, attempt, failure) -> asked.add("first") && false,
                (location, bytes, attempt, failure) -> asked.add("second") && false), 3, MemoryEventListener.NONE)) {
            fill(resource);
            assertThatThrownBy(() -> resource.allocate(NO_ROOM)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(asked).as("nobody asked for a retry: one round").containsExactly("first", "second");
        }
    }

    @Test
    void aHandlerIsNeverReEnteredByAnAllocationItMakes() {
        AtomicInteger calls = new AtomicInteger();
        MemoryResource[] self = new MemoryResource[1];
        try (FailureCallbackResource resource = withHandlers(List.of((location, bytes, attempt, failure) -> {
            calls.incrementAndGet();
            assertThatThrownBy(() -> self[0].allocate(NO_ROOM)).as("fails at once inside the handler")
                    .isInstanceOf(DeviceOutOfMemoryException.class);
            return false;
        }), 3, MemoryEventListener.NONE)) {
            self[0] = resource;
            fill(resource);
            assertThatThrownBy(() -> resource.allocate(NO_ROOM)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(calls.get()).isEqualTo(1);
        }
    }

    @Test
    void aHandlerThatThrowsFailsTheAllocationWithItsExceptionAndTheOutOfMemoryInside() {
        try (FailureCallbackResource resource = withHandlers(List.of((location, bytes, attempt, failure) -> {
            throw new IllegalStateException("cache is broken");
        }), 3, MemoryEventListener.NONE)) {
            fill(resource);
            assertThatThrownBy(() -> resource.allocate(NO_ROOM)).isInstanceOf(IllegalStateException.class).hasMessage("cache is broken")
                    .satisfies(e -> assertThat(e.getSuppressed()).singleElement().isInstanceOf(DeviceOutOfMemoryException.class));
            resource.deallocate(resource.allocate(MiB));
        }
    }

    @Test
    void aHandlerWhoseOwnAllocationFindsNoMemoryFailsTheAllocationWithItsOwnOutOfMemory() {
        MemoryResource[] self = new MemoryResource[1];
        try (FailureCallbackResource resource = withHandlers(List.of((location, bytes, attempt, failure) -> {
            self[0].allocate(NO_ROOM / 2); // spill to memory of one's own, which is not there either
            return true;
        }), 3, MemoryEventListener.NONE)) {
            self[0] = resource;
            fill(resource);
            assertThatThrownBy(() -> resource.allocate(NO_ROOM)).isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> {
                assertThat(e.requestedBytes()).as("the allocation that failed, not the handler's").isEqualTo(NO_ROOM);
                assertThat(e.getSuppressed()).singleElement().isInstanceOfSatisfying(DeviceOutOfMemoryException.class,
                        inside -> assertThat(inside.requestedBytes()).isEqualTo(NO_ROOM / 2));
            });
        }
    }

    @Test
    void zeroRetriesTurnsTheHandlersOff() {
        AtomicInteger calls = new AtomicInteger();
        try (FailureCallbackResource resource = withHandlers(List.of((location, bytes, attempt, failure) -> calls.incrementAndGet() > 0),
                0, MemoryEventListener.NONE)) {
            fill(resource);
            assertThatThrownBy(() -> resource.allocate(NO_ROOM)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(calls.get()).isZero();
        }
    }

    @Test
    void aRequestAboveALimitFailsAtOnceWithoutAskingTheHandlers() {
        AtomicInteger calls = new AtomicInteger();
        OutOfMemoryHandler evictsEverything = (location, bytes, attempt, failure) -> calls.incrementAndGet() > 0;
        try (FailureCallbackResource resource = withHandlers(List.of(evictsEverything), 3, MemoryEventListener.NONE)) {
            assertThatThrownBy(() -> resource.allocate(LIMIT + 1)).isInstanceOf(AllocationAboveLimitException.class)
                    .hasMessageContaining("the most this location may ever hold");
        }
        try (FailureCallbackResource budgeted = new FailureCallbackResource(
                new LimitingResource(backendResource(backend), MemoryLocation.DEVICE, 8 * MiB, "tenant budget"),
                MemoryLocation.DEVICE, List.of(evictsEverything), 3, MemoryEventListener.NONE)) {
            assertThatThrownBy(() -> budgeted.allocate(9 * MiB)).isInstanceOf(AllocationAboveLimitException.class)
                    .hasMessageContaining("tenant budget");
        }
        assertThat(calls.get()).as("nothing a handler frees could make room").isZero();
    }
}
