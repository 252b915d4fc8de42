package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Requests through a budget that their callers abandon, that the pool refuses, or that wait for the pool: nothing waits
 * for them longer than it must.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BudgetRequestsUnderWayTest {

    private static final long MiB = 1L << 20;
    private static final long KiB = 1L << 10;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;
    private static final Duration LONG = Duration.ofMinutes(5);

    /**
     * A caller who gives up on a budget's future the usual way ({@code orTimeout}, {@code completeExceptionally}, a
     * framework completing it) leaves the budget's queue as it leaves the manager's: an abandoned request kept at the
     * head of the queue would block every request behind it (no barging) for its whole timeout.
     */
    @Test
    void aRequestWhoseFutureTheCallerCompletedLeavesTheBudgetsQueueAsItLeavesTheManagers() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            // the manager itself, as the baseline: a future completed by its caller leaves the queue
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 16 * MiB);
            CompletableFuture<UnifiedBuffer> direct = manager.allocateAsync(16 * MiB, DEVICE, LONG);
            assertThat(manager.statistics(DEVICE).waitingRequests()).isEqualTo(1);
            direct.completeExceptionally(new TimeoutException("the caller gave up"));
            assertThat(manager.statistics(DEVICE).waitingRequests()).as("the manager withdraws it").isZero();
            others.forEach(UnifiedBuffer::close);

            UnifiedBuffer large = tenant.allocate(30 * MiB, DEVICE);
            UnifiedBuffer small = tenant.allocate(2 * MiB, DEVICE);
            CompletableFuture<UnifiedBuffer> abandoned = tenant.allocateAsync(16 * MiB, DEVICE, LONG);
            assertThat(tenant.statistics().waitingRequests()).isEqualTo(1);
            abandoned.completeExceptionally(new TimeoutException("the caller gave up")); // what orTimeout(...) does

            assertThat(tenant.statistics().waitingRequests()).as("the budget withdraws it too").isZero();
            CompletableFuture<UnifiedBuffer> next = tenant.allocateAsync(MiB, DEVICE, LONG);
            Thread.ofPlatform().start(small::close).join();
            try (UnifiedBuffer served = next.get(30, TimeUnit.SECONDS)) {
                assertThat(served.byteSize()).isEqualTo(MiB);
            }
            large.close();
        }
    }

    /**
     * A request its caller ends, cancelling it or letting {@code orTimeout} fail it, is off the budget's queue when the
     * functions added to its future run, as the manager's own requests are off its queue: they read no figure that still
     * counts it as waiting.
     */
    @Test
    void aRequestItsCallerEndsIsNotCountedAsWaitingInTheBudgetByItsFunctions() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            UnifiedBuffer large = tenant.allocate(32 * MiB, DEVICE);
            CompletableFuture<UnifiedBuffer> cancelled = tenant.allocateAsync(MiB, DEVICE, LONG);
            CompletableFuture<UnifiedBuffer> timedOutByItsCaller = tenant.allocateAsync(MiB, DEVICE, LONG);
            CompletableFuture<Long> waitingWhenCancelled = cancelled.handle((buffer, failure) -> tenant.statistics().waitingRequests());

            cancelled.cancel(false);

            assertThat(waitingWhenCancelled.get(30, TimeUnit.SECONDS)).as("the other request waits on").isEqualTo(1);
            // its timeout set only now: set before the cancel, it could fire first on a slow machine, the other then not waiting
            CompletableFuture<Long> waitingWhenTimedOut = timedOutByItsCaller.orTimeout(10, TimeUnit.MILLISECONDS)
                    .handle((buffer, failure) -> tenant.statistics().waitingRequests());
            assertThat(waitingWhenTimedOut.get(30, TimeUnit.SECONDS)).isZero();
            large.close();
            assertThat(tenant.statistics().allocatedBytes()).as("nothing let in for either").isZero();
        }
    }

    /**
     * The same once the budget let it in and it waits for the pool's room: its functions see it off the pool's queue
     * and its bytes no longer under way in the budget.
     */
    @Test
    void aRequestItsCallerEndsWhileItWaitsForThePoolIsNotCountedByItsFunctions() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 16 * MiB);
            CompletableFuture<UnifiedBuffer> cancelled = tenant.allocateAsync(16 * MiB, DEVICE, LONG);
            assertThat(manager.statistics(DEVICE).waitingRequests()).as("let in by the budget, in the pool's queue").isEqualTo(1);
            CompletableFuture<List<Long>> figuresWhenCancelled = cancelled.handle((buffer, failure) ->
                    List.of(manager.statistics(DEVICE).waitingRequests(), tenant.statistics().allocatedBytes()));

            cancelled.cancel(false);

            assertThat(figuresWhenCancelled.get(30, TimeUnit.SECONDS)).as("off the pool's queue, its bytes back").containsExactly(0L, 0L);
            others.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A request its caller cancels while the pool's serving thread is trying to serve it (its out-of-memory handler
     * running): the cancel does not wait for that attempt, which may run as long as the application's handlers do, and
     * the functions added to the future see it off the pool's queue; its bytes stay counted in the budget until the
     * attempt ends, so that the books never hold less than the pool may be lending it, then go back.
     */
    @Test
    void aRequestCancelledWhileThePoolTriesToServeItHasItsBytesBackOnceThatAttemptEnds() throws Exception {
        CountDownLatch inHandler = new CountDownLatch(1);
        CountDownLatch attemptEnds = new CountDownLatch(1);
        AtomicBoolean armed = new AtomicBoolean();
        OutOfMemoryHandler blocking = (location, bytes, attempt, failure) -> {
            if (armed.compareAndSet(true, false)) {
                inHandler.countDown();
                try {
                    attemptEnds.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return false;
        };
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().outOfMemoryHandler(blocking).build();
             MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            UnifiedBuffer small = manager.allocate(64 * KiB, DEVICE);
            List<UnifiedBuffer> others = new ArrayList<>(SmallSimulatedPools.fill(manager, 16 * MiB));
            others.addAll(SmallSimulatedPools.fill(manager, 64 * KiB));
            CompletableFuture<UnifiedBuffer> cancelled = tenant.allocateAsync(16 * MiB, DEVICE, LONG);
            assertThat(manager.statistics(DEVICE).waitingRequests()).as("let in by the budget, in the pool's queue").isEqualTo(1);
            armed.set(true);
            small.close(); // wakes the pool's queue: 64 KiB are no room for it, and its handler is asked
            assertThat(inHandler.await(30, TimeUnit.SECONDS)).isTrue();
            CompletableFuture<String> seenByItsFunctions = cancelled.handle((buffer, failure) -> manager.statistics(DEVICE).waitingRequests()
                    + " waiting, " + refusalOf(() -> tenant.allocate(32 * MiB, DEVICE)));

            cancelled.cancel(false); // returns while the attempt is under way

            assertThat(seenByItsFunctions.get(30, TimeUnit.SECONDS)).as("off the pool's queue; its 16 MiB still counted in the budget")
                    .isEqualTo("0 waiting, " + BudgetExceededException.class.getSimpleName());
            attemptEnds.countDown();
            Thread.ofPlatform().start(() -> others.forEach(UnifiedBuffer::close)).join();
            // the attempt ends on the pool's thread, giving the bytes back: then all 32 MiB are the tenant's
            Optional<UnifiedBuffer> all = Optional.empty();
            for (int i = 0; i < 30_000 && all.isEmpty(); i++) {
                all = tenant.tryAllocate(32 * MiB, DEVICE);
                if (all.isEmpty()) {
                    Thread.sleep(1);
                }
            }
            assertThat(all).as("the cancelled request's bytes came back").isPresent();
            all.get().close();
        }
    }

    /** The simple name of what {@code allocation} threw, or "allocated". */
    private static String refusalOf(java.util.function.Supplier<UnifiedBuffer> allocation) {
        try {
            allocation.get().close();
            return "allocated";
        } catch (RuntimeException e) {
            return e.getClass().getSimpleName();
        }
    }

    /** The same, once the budget let the request in and it waits for the pool's room: it stays in the pool's queue. */
    @Test
    void aRequestWhoseFutureTheCallerCompletedWhileItWaitsForThePoolLeavesThePoolsQueue() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 16 * MiB);
            CompletableFuture<UnifiedBuffer> abandoned = tenant.allocateAsync(16 * MiB, DEVICE, LONG);
            assertThat(manager.statistics(DEVICE).waitingRequests()).as("let in by the budget, in the pool's queue").isEqualTo(1);

            abandoned.completeExceptionally(new TimeoutException("the caller gave up"));

            assertThat(manager.statistics(DEVICE).waitingRequests()).as("withdrawn from the pool's queue").isZero();
            // its 16 MiB no longer count as under way in the budget once the waiter thread's attempt for it has ended
            // (it may be compacting as the caller gives up): then 32 MiB fit once the pool has room
            Thread.ofPlatform().start(() -> others.forEach(UnifiedBuffer::close)).join();
            Optional<UnifiedBuffer> all = Optional.empty();
            for (int i = 0; i < 30_000 && all.isEmpty(); i++) {
                all = tenant.tryAllocate(32 * MiB, DEVICE);
                if (all.isEmpty()) {
                    Thread.sleep(1);
                }
            }
            assertThat(all).as("the abandoned request's bytes came back").isPresent();
            assertThat(tenant.statistics().allocatedBytes()).isEqualTo(32 * MiB);
            all.get().close();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
        }
    }

    /**
     * A budget's close waits (up to close-timeout) for the buffer of each request still under way, but not for a request
     * let in from its stripe's room that the pool then refused: that one never gets a buffer.
     */
    @Test
    void aCloseDoesNotWaitOutItsTimeoutForARequestThatAlreadyFailedInThePool() throws Exception {
        CountDownLatch inHandler = new CountDownLatch(1);
        CountDownLatch giveUp = new CountDownLatch(1);
        AtomicBoolean armed = new AtomicBoolean();
        OutOfMemoryHandler blocking = (location, bytes, attempt, failure) -> {
            if (armed.compareAndSet(true, false)) {
                inHandler.countDown();
                try {
                    giveUp.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return false;
        };
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().maxPoolSize(16 * MiB).closeTimeout(Duration.ofMinutes(5)).outOfMemoryHandler(blocking).build()) {
            MemoryBudget tenant = manager.budget("tenant", 64 * MiB);
            AtomicReference<Throwable> allocation = new AtomicReference<>();
            CountDownLatch filled = new CountDownLatch(1);
            List<UnifiedBuffer> others = new ArrayList<>();
            Thread allocating = Thread.ofPlatform().daemon().start(() -> {
                tenant.allocate(64 * KiB, DEVICE).close(); // its bytes stay in this thread's stripe's room
                others.addAll(SmallSimulatedPools.fill(manager, MiB));
                others.addAll(SmallSimulatedPools.fill(manager, 64 * KiB));
                filled.countDown();
                armed.set(true);
                try {
                    tenant.allocate(64 * KiB, DEVICE); // let in from the room; the pool is full
                } catch (Throwable e) {
                    allocation.set(e);
                }
            });
            assertThat(inHandler.await(30, TimeUnit.SECONDS)).isTrue();
            Thread closer = Thread.ofPlatform().daemon().start(tenant::close);
            for (int i = 0; i < 3000 && !tenant.isClosed(); i++) {
                Thread.sleep(1);
            }
            assertThat(tenant.isClosed()).isTrue();
            giveUp.countDown();
            allocating.join(30_000);
            assertThat(allocation.get()).isInstanceOf(DeviceOutOfMemoryException.class);

            closer.join(20_000);
            assertThat(closer.isAlive()).as("the close still waits for a buffer that will never come").isFalse();
            others.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * An out-of-memory handler that closes the budget whose request it was called for (a tenant given up on) closes it
     * on the requesting thread itself: the close must not wait for that request's buffer, which cannot come while the
     * close waits, and so held the thread for the whole close-timeout.
     */
    @Test
    void aBudgetClosedByTheOutOfMemoryHandlerOfItsOwnRequestDoesNotWaitForThatRequest() throws Exception {
        AtomicReference<MemoryBudget> budget = new AtomicReference<>();
        AtomicBoolean armed = new AtomicBoolean();
        OutOfMemoryHandler closing = (location, bytes, attempt, failure) -> {
            if (armed.compareAndSet(true, false)) {
                budget.get().close();
            }
            return false;
        };
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().maxPoolSize(16 * MiB).closeTimeout(LONG).outOfMemoryHandler(closing).build()) {
            MemoryBudget tenant = manager.budget("tenant", 64 * MiB);
            budget.set(tenant);
            AtomicReference<Throwable> allocation = new AtomicReference<>();
            List<UnifiedBuffer> others = new ArrayList<>();
            Thread allocating = Thread.ofPlatform().daemon().start(() -> {
                tenant.allocate(64 * KiB, DEVICE).close(); // its bytes stay in this thread's stripe's room
                others.addAll(SmallSimulatedPools.fill(manager, MiB));
                others.addAll(SmallSimulatedPools.fill(manager, 64 * KiB));
                armed.set(true);
                try {
                    tenant.allocate(64 * KiB, DEVICE); // let in from the room; the pool is full, the handler closes the budget
                } catch (Throwable e) {
                    allocation.set(e);
                }
            });
            allocating.join(60_000);
            assertThat(allocating.isAlive()).as("the close in the handler waits for its own thread's request").isFalse();
            assertThat(allocation.get()).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(tenant.isClosed()).isTrue();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            assertThat(tenant.statistics().liveBuffers()).isZero();
            others.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * {@code tryAllocate} (and {@code allocate}) through a budget does not wait for a request of {@code allocateAsync}
     * waiting in the pool's queue, however long that request may wait ("plain allocate and tryAllocate do not queue"),
     * where the bytes fit beside what the budget holds but not beside that request.
     */
    @Test
    void tryAllocateDoesNotBlockBehindAnAsyncRequestWaitingForThePool() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().deviceWaitTimeout(Duration.ofMinutes(5)).build();
             MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 16 * MiB);
            CompletableFuture<UnifiedBuffer> waiting = tenant.allocateAsync(24 * MiB, DEVICE, LONG);
            assertThat(manager.statistics(DEVICE).waitingRequests()).isEqualTo(1);

            CompletableFuture<Optional<UnifiedBuffer>> attempt = CompletableFuture.supplyAsync(() -> tenant.tryAllocate(16 * MiB, DEVICE));
            Optional<UnifiedBuffer> got = attempt.get(20, TimeUnit.SECONDS); // a TimeoutException here: it blocked
            assertThat(got).as("the pool is full: empty, at once").isEmpty();

            waiting.cancel(false);
            others.forEach(UnifiedBuffer::close);
        }
    }

    /** A null location through a budget is refused as through the manager: a NullPointerException naming it. */
    @Test
    void aNullLocationIsRefusedAsTheManagerRefusesIt() {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            assertThatThrownBy(() -> manager.allocate(16, null)).isInstanceOf(NullPointerException.class).hasMessage("location");
            assertThatThrownBy(() -> tenant.allocateAsync(16, null, LONG)).isInstanceOf(NullPointerException.class).hasMessage("location");
            assertThatThrownBy(() -> tenant.allocate(16, null)).isInstanceOf(NullPointerException.class).hasMessage("location");
            assertThatThrownBy(() -> tenant.tryAllocate(16, null)).isInstanceOf(NullPointerException.class).hasMessage("location");
            assertThatThrownBy(() -> tenant.allocateBatch(DataType.INT8, new long[] {16}, null)).isInstanceOf(NullPointerException.class)
                    .hasMessage("location");
        }
    }
}
