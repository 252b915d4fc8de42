package dev.compute.memory;

import static dev.compute.memory.SmallSimulatedPools.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.compute.memory.internal.ThreadStripes;
import dev.compute.memory.testing.LogCapture;
import dev.compute.memory.testing.ManagerInvariants;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import java.util.logging.Level;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * Requests that wait ({@code allocateAsync}, and a budget's claims) met by what a caller may do meanwhile: an ancestor
 * budget closing, a cancel racing the request's own timeout and the free that would serve it, a batch refused part
 * way, sizes no wait can serve, an interrupt, a handler that throws an {@link Error}. Each ends within a bound, and
 * leaves nothing counted: not in the pool, not in a budget, not as waiting.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class WaitingRequestsAdversarialTest {

    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;
    private static final Duration FOREVER = Duration.ofMinutes(5);
    private static final Duration BOUND = Duration.ofSeconds(20);

    /**
     * Room the stripes park at two levels, the budget's own and under its parent's limit: an asynchronous request must
     * take back both, as {@code allocate} does, rather than wait for its timeout with the room parked.
     */
    @Test
    void anAsynchronousRequestTakesBackTheRoomParkedAtEveryLevelThatRefusesIt() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build()) {
            MemoryBudget root = manager.budget("root", 34 * MiB);
            MemoryBudget left = root.child("left", 16 * MiB);
            MemoryBudget right = root.child("right", 32 * MiB);
            for (MemoryBudget parking : List.of(right, left)) {
                for (int i = 0; i < 4; i++) {
                    Thread thread = Thread.ofPlatform().start(() -> parking.allocate(2 * MiB, DEVICE).close());
                    thread.join(BOUND.toMillis());
                }
            }
            assertThat(right.allocateAsync(32 * MiB, DEVICE, Duration.ofSeconds(2))).succeedsWithin(BOUND).satisfies(UnifiedBuffer::close);
        }
    }

    @Test
    void anAncestorsCloseFailsTheRequestsWaitingBelowItInEitherQueueAndGivesEverythingBack() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build()) {
            MemoryBudget root = manager.budget("root", 64 * MiB);
            MemoryBudget mid = root.child("mid", 32 * MiB);
            MemoryBudget leaf = mid.child("leaf", 16 * MiB);
            UnifiedBuffer midHolds = mid.allocate(16 * MiB, DEVICE);
            CompletableFuture<UnifiedBuffer> inMidsQueue = mid.allocateAsync(32 * MiB, DEVICE, FOREVER);
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 8 * MiB); // the pool full, outside any budget
            CompletableFuture<UnifiedBuffer> inThePoolsQueue = leaf.allocateAsync(8 * MiB, DEVICE, FOREVER);
            assertThat(mid.statistics().waitingRequests()).isEqualTo(1);
            assertThat(manager.statistics(DEVICE).waitingRequests()).isEqualTo(1);

            assertTimeoutPreemptively(BOUND, root::close);

            assertThat(failureOf(inMidsQueue)).isInstanceOf(IllegalStateException.class).hasMessageContaining("'root/mid'")
                    .hasMessageContaining("closed");
            assertThat(failureOf(inThePoolsQueue)).isInstanceOf(IllegalStateException.class).hasMessageContaining("'root/mid/leaf'")
                    .hasMessageContaining("closed");
            assertThat(midHolds.isClosed()).isTrue();
            for (MemoryBudget budget : List.of(root, mid, leaf)) {
                BudgetStatistics figures = budget.statistics();
                assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
                assertThat(figures.waitingRequests()).as(figures.toString()).isZero();
                assertThat(budget.isClosed()).isTrue();
            }
            assertThat(manager.statistics(DEVICE).waitingRequests()).isZero();
            // what the next free gives back goes to no request of the closed budgets
            others.removeFirst().close();
            assertThat(manager.tryAllocate(8 * MiB, DEVICE)).hasValueSatisfying(UnifiedBuffer::close);
            others.forEach(UnifiedBuffer::close);
            ManagerInvariants.checkQuiescent(manager);
            assertThat(manager.statistics(DEVICE).liveBuffers()).isZero();
        }
    }

    /**
     * A cancel, the request's own timeout and the free that would serve it, at once, many times over, at the manager
     * and in a budget whose room or whose pool it waits for: whichever wins, a buffer made for a request its caller
     * did not get goes back, and nothing stays counted.
     */
    @Test
    void aCancelRacingTheTimeoutAndAFreeLeavesExactlyOneOutcomeAndNoBufferBehind() throws Exception {
        for (Waiting where : Waiting.values()) {
            try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build();
                 MemoryBudget tenant = manager.budget("tenant", where == Waiting.FOR_THE_BUDGET ? 32 * MiB : 64 * MiB)) {
                List<UnifiedBuffer> held = new ArrayList<>();
                int served = 0;
                for (int round = 0; round < 300; round++) {
                    refill(manager, tenant, where, held);
                    Duration timeout = Duration.ofNanos(ThreadLocalRandom.current().nextLong(3_000_000));
                    CompletableFuture<UnifiedBuffer> request = where == Waiting.AT_THE_MANAGER ? manager.allocateAsync(16 * MiB, DEVICE, timeout)
                            : tenant.allocateAsync(16 * MiB, DEVICE, timeout);
                    UnifiedBuffer freed = held.removeFirst();
                    CountDownLatch start = new CountDownLatch(1);
                    Thread freeing = Thread.ofPlatform().start(() -> {
                        awaitQuietly(start);
                        spin();
                        freed.close();
                    });
                    Thread cancelling = Thread.ofPlatform().start(() -> {
                        awaitQuietly(start);
                        spin();
                        request.cancel(true);
                    });
                    start.countDown();
                    freeing.join(BOUND.toMillis());
                    cancelling.join(BOUND.toMillis());
                    assertThat(freeing.isAlive() || cancelling.isAlive()).isFalse();
                    try {
                        held.add(request.get(BOUND.toSeconds(), TimeUnit.SECONDS));
                        served++;
                    } catch (CancellationException | ExecutionException lost) {
                        assertThat(request).isCompletedExceptionally(); // cancelled, or timed out: no buffer handed out
                    }
                }
                held.forEach(UnifiedBuffer::close);
                awaitNothingLive(manager);
                assertThat(manager.statistics(DEVICE).waitingRequests()).as(where.name()).isZero();
                BudgetStatistics figures = tenant.statistics();
                assertThat(figures.allocatedBytes()).as(where + ": " + figures).isZero();
                assertThat(figures.waitingRequests()).as(where + ": " + figures).isZero();
                // all the room is there again, in the budget and in the pool
                try (UnifiedBuffer whole = tenant.allocate(tenant.limitBytes(), DEVICE)) {
                    assertThat(whole.byteSize()).isEqualTo(tenant.limitBytes());
                }
                assertThat(served).as(where.name() + ": some rounds served the request").isPositive();
            }
        }
    }

    /**
     * Requests of a budget waiting in its queue and in the pool's, cancelled, timing out, served by frees of buffers
     * outside any budget, while the budget or its parent closes, round after round: every future ends, and nothing
     * stays counted in the pool, in the parent or as waiting.
     */
    @Test
    void closesOfABudgetOrItsParentRacingItsWaitingRequestsLeaveNothingCounted() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().closeTimeout(BOUND).build()) {
            MemoryBudget root = manager.budget("root", 64 * MiB);
            List<UnifiedBuffer> outside = new ArrayList<>();
            List<CompletableFuture<UnifiedBuffer>> futures = new ArrayList<>();
            for (int round = 0; round < 200; round++) {
                MemoryBudget tenant = root.child("tenant-" + round, 32 * MiB);
                MemoryBudget request = tenant.child("request", 16 * MiB);
                outside.addAll(SmallSimulatedPools.fill(manager, 4 * MiB));
                List<UnifiedBuffer> freed = new ArrayList<>();
                for (int i = 0; i < 3 && !outside.isEmpty(); i++) {
                    freed.add(outside.remove(ThreadLocalRandom.current().nextInt(outside.size())));
                }
                CountDownLatch start = new CountDownLatch(1);
                List<CompletableFuture<UnifiedBuffer>> asked = new CopyOnWriteArrayList<>();
                Thread asking = Thread.ofPlatform().start(() -> {
                    awaitQuietly(start);
                    ThreadLocalRandom random = ThreadLocalRandom.current();
                    for (int i = 0; i < 6; i++) {
                        try {
                            CompletableFuture<UnifiedBuffer> future = request.allocateAsync((1 + random.nextInt(8)) * MiB, DEVICE,
                                    Duration.ofMillis(random.nextInt(20)));
                            asked.add(future);
                            if (random.nextInt(3) == 0) {
                                future.cancel(true);
                            }
                        } catch (IllegalStateException closed) {
                            // the budget closed first
                        }
                    }
                });
                Thread freeing = Thread.ofPlatform().start(() -> {
                    awaitQuietly(start);
                    for (UnifiedBuffer buffer : freed) {
                        spin();
                        buffer.close();
                    }
                });
                boolean closingTheParent = round % 2 == 0;
                Thread closing = Thread.ofPlatform().start(() -> {
                    awaitQuietly(start);
                    spin();
                    (closingTheParent ? tenant : request).close();
                });
                start.countDown();
                for (Thread thread : List.of(asking, freeing, closing)) {
                    thread.join(BOUND.toMillis());
                    assertThat(thread.isAlive()).as(thread + " ended").isFalse();
                }
                for (CompletableFuture<UnifiedBuffer> future : asked) {
                    try {
                        future.get(BOUND.toSeconds(), TimeUnit.SECONDS).close();
                    } catch (CancellationException | ExecutionException refusedTimedOutOrClosed) {
                        // each is one of these, or served
                    }
                }
                if (!closingTheParent) {
                    tenant.close();
                }
                futures.addAll(asked);
            }
            assertThat(futures).allMatch(CompletableFuture::isDone);
            outside.forEach(UnifiedBuffer::close);
            awaitNothingLive(manager);
            BudgetStatistics figures = root.statistics();
            assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
            assertThat(figures.liveBuffers()).as(figures.toString()).isZero();
            assertThat(root.children()).isEmpty();
            assertThat(manager.statistics(DEVICE).waitingRequests()).isZero();
            try (UnifiedBuffer whole = root.allocate(64 * MiB, DEVICE)) {
                assertThat(whole.byteSize()).isEqualTo(64 * MiB);
            }
        }
    }

    /**
     * A request let into its budget's room is completed on a thread of its own, which may not run at once (every
     * carrier busy here): cancelled meanwhile, its bytes go back with the cancel, before the functions added to its
     * future run, not whenever that thread gets to it.
     */
    @Test
    void aRequestCancelledAfterItsBudgetLetItInButBeforeItWasToldGivesItsBytesBackWithTheCancel() throws Throwable {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB);
             UnifiedBuffer kept = tenant.allocate(16 * MiB, DEVICE)) {
            UnifiedBuffer freed = tenant.allocate(16 * MiB, DEVICE);
            CompletableFuture<UnifiedBuffer> request = tenant.allocateAsync(16 * MiB, DEVICE, FOREVER);
            CompletableFuture<Boolean> roomAsItsFunctionsRun = request.handle((buffer, failure) -> fits(tenant, 16 * MiB));
            assertThat(tenant.statistics().waitingRequests()).isEqualTo(1);

            withEveryVirtualThreadCarrierBusy(() -> {
                freed.close(); // lets the request in; the thread that would tell it cannot run yet
                assertThat(tenant.statistics().waitingRequests()).isZero();
                request.cancel(true);
                assertThat(roomAsItsFunctionsRun).isCompletedWithValue(true);
            });
            try (UnifiedBuffer next = tenant.allocate(16 * MiB, DEVICE)) {
                assertThat(tenant.statistics().allocatedBytes()).isEqualTo(32 * MiB);
            }
        }
    }

    /**
     * A request let into its budget, raced by its cancel, round after round, while a request ahead of it in the pool's
     * queue that can never fit keeps the pool from ever trying it: with no attempt under way for it, the cancel gives its
     * bytes back before the functions added to its future run, whether it meets the request as its budget lets it in,
     * as it is told, on its way to the pool's queue, or waiting there.
     */
    @Test
    void aRequestCancelledAnywhereOnItsWayFromItsBudgetToThePoolsQueueGivesItsBytesBackBeforeItsFunctionsRun() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB);
             UnifiedBuffer kept = tenant.allocate(16 * MiB, DEVICE)) {
            CompletableFuture<UnifiedBuffer> ahead = manager.allocateAsync(56 * MiB, DEVICE, FOREVER); // never fits beside kept
            try {
                UnifiedBuffer freed = tenant.allocate(16 * MiB, DEVICE);
                for (int round = 0; round < 2000; round++) {
                    CompletableFuture<UnifiedBuffer> request = tenant.allocateAsync(16 * MiB, DEVICE, FOREVER);
                    UnifiedBuffer freeing = freed;
                    CountDownLatch start = new CountDownLatch(1);
                    Thread closing = Thread.ofPlatform().unstarted(() -> {
                        awaitQuietly(start);
                        spin();
                        freeing.close(); // lets the request in
                    });
                    // once the freed buffer is back (its close is on its own thread, which waits for nothing here), the
                    // budget has room for the request's bytes: they went back with the cancel
                    CompletableFuture<Boolean> roomAsItsFunctionsRun = request.handle((buffer, failure) -> {
                        joinQuietly(closing);
                        return fits(tenant, 16 * MiB);
                    });
                    closing.start();
                    start.countDown();
                    spin();
                    request.cancel(false);
                    closing.join(BOUND.toMillis());
                    assertThat(closing.isAlive()).isFalse();
                    assertThat(request).as("round %d", round).isCancelled();
                    assertThat(roomAsItsFunctionsRun.get(BOUND.toSeconds(), TimeUnit.SECONDS)).as("round %d: room as the functions ran", round).isTrue();
                    freed = tenant.allocate(16 * MiB, DEVICE);
                }
                freed.close();
                assertThat(ahead).isNotDone();
            } finally {
                ahead.cancel(false);
            }
        }
    }

    /** Whether {@code budget} lets in {@code bytes} now (the buffer closed again). */
    private static boolean fits(MemoryBudget budget, long bytes) {
        return budget.tryAllocate(bytes, DEVICE).map(buffer -> {
            buffer.close();
            return true;
        }).orElse(false);
    }

    /** Runs {@code body} while a spinning virtual thread holds each carrier of the virtual thread scheduler. */
    private static void withEveryVirtualThreadCarrierBusy(Executable body) throws Throwable {
        int carriers = Integer.getInteger("jdk.virtualThreadScheduler.parallelism", Runtime.getRuntime().availableProcessors());
        AtomicBoolean release = new AtomicBoolean();
        CountDownLatch spinning = new CountDownLatch(carriers);
        List<Thread> spinners = new ArrayList<>();
        try {
            for (int i = 0; i < carriers; i++) {
                spinners.add(Thread.ofVirtual().start(() -> {
                    spinning.countDown();
                    while (!release.get()) {
                        Thread.onSpinWait();
                    }
                }));
            }
            assertThat(spinning.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();
            body.execute();
        } finally {
            release.set(true);
            for (Thread spinner : spinners) {
                spinner.join(BOUND.toMillis());
            }
        }
    }

    /**
     * The manager closes while its waiter thread's attempt for a budget's request is held in an out-of-memory handler,
     * which then asks for one more try: the close ends within its timeout, the request fails with the close, and once
     * the attempt ends nothing stays counted in the budget.
     */
    @Test
    void aManagerClosedWhileAnAttemptForABudgetRequestIsInAHandlerLeavesNothingCounted() throws Exception {
        HoldingHandler holdingThenRetrying = new HoldingHandler(true, true);
        UnifiedMemoryManager manager = SmallSimulatedPools.builder().closeTimeout(Duration.ofSeconds(1)).outOfMemoryHandler(holdingThenRetrying).build();
        try (LogCapture log = LogCapture.managerLog()) {
            MemoryBudget tenant = manager.budget("tenant", 32 * MiB);
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 8 * MiB);
            holdingThenRetrying.hold.set(true);
            CompletableFuture<UnifiedBuffer> waiting = tenant.allocateAsync(16 * MiB, DEVICE, FOREVER);
            others.removeFirst().close(); // 8 MiB: the waiter thread's attempt meets the handler
            assertThat(holdingThenRetrying.inHandler.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();

            assertTimeoutPreemptively(BOUND, manager::close);

            assertThat(failureOf(waiting)).isInstanceOf(IllegalStateException.class);
            others.removeFirst().close(); // room for the retry, were it to be served
            holdingThenRetrying.release.countDown();
            long deadline = System.nanoTime() + BOUND.toNanos();
            while (tenant.statistics().allocatedBytes() != 0 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            assertThat(tenant.isClosed()).isTrue();
            assertThat(manager.statistics(DEVICE).liveBuffers()).as("the retry's buffer went back").isEqualTo(others.size());
            assertThat(log.messages(Level.WARNING)).singleElement().asString().contains("calls were still under way");
        } finally {
            holdingThenRetrying.release.countDown();
        }
    }

    /**
     * The manager closes while its waiter thread's attempt for a budget's request is held in an out-of-memory handler
     * that then gives up, within the close timeout: the request fails as the attempt ends, its bytes back in the budget
     * before the functions added to it run, not as the close begins.
     */
    @Test
    void aManagerClosedWhileAnAttemptForABudgetRequestIsUnderWayFailsItOnceItsBytesAreBack() throws Exception {
        HoldingHandler holding = new HoldingHandler(true, false);
        UnifiedMemoryManager manager = SmallSimulatedPools.builder().closeTimeout(BOUND).outOfMemoryHandler(holding).build();
        Thread closing = null;
        try {
            MemoryBudget tenant = manager.budget("tenant", 32 * MiB);
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 8 * MiB);
            holding.hold.set(true);
            CompletableFuture<UnifiedBuffer> waiting = tenant.allocateAsync(16 * MiB, DEVICE, FOREVER);
            CompletableFuture<Long> countedAsItFails = waiting.handle((buffer, failure) -> tenant.statistics().allocatedBytes());
            others.removeFirst().close(); // 8 MiB: the waiter thread's attempt meets the handler
            assertThat(holding.inHandler.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();

            closing = Thread.ofPlatform().start(manager::close);
            awaitInCallGateWait(closing); // past the waiting requests, waiting for the attempt's call to end
            assertThat(waiting).as("failed while its attempt held its bytes").isNotDone();
            holding.release.countDown();

            assertThat(countedAsItFails.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isZero();
            assertThat(failureOf(waiting)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        } finally {
            holding.release.countDown();
            if (closing != null) {
                closing.join(BOUND.toMillis());
            }
        }
    }

    /**
     * A budget closed by an interrupted thread while a request let in from its stripe's room is under way in the pool
     * (its out-of-memory handler holding it): the close stops waiting for that request's buffer at once, the interrupt
     * kept, as the pool's own waits do, rather than spin on the interrupt until the close timeout; the request, once
     * it ends, has nothing left counted.
     */
    @Test
    void anInterruptedCloseOfABudgetDoesNotWaitOutItsTimeoutForARequestUnderWay() throws Exception {
        HoldingHandler holding = new HoldingHandler(false, false);
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().closeTimeout(FOREVER).outOfMemoryHandler(holding).build()) {
            MemoryBudget tenant = manager.budget("tenant", 64 * MiB);
            List<UnifiedBuffer> others = new ArrayList<>();
            CompletableFuture<Throwable> underWay = new CompletableFuture<>();
            Thread.ofPlatform().daemon().start(() -> {
                tenant.allocate(64 * 1024, DEVICE).close(); // its bytes stay in this thread's stripe's room
                others.addAll(SmallSimulatedPools.fill(manager, MiB));
                others.addAll(SmallSimulatedPools.fill(manager, 64 * 1024));
                holding.hold.set(true);
                underWay.complete(failureOf(() -> tenant.allocate(64 * 1024, DEVICE))); // let in from the room; the pool is full
            });
            try {
                assertThat(holding.inHandler.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();
                AtomicBoolean interruptKept = new AtomicBoolean();
                Thread closing = Thread.ofPlatform().start(() -> {
                    Thread.currentThread().interrupt();
                    tenant.close();
                    interruptKept.set(Thread.currentThread().isInterrupted());
                });
                closing.join(BOUND.toMillis() / 4); // the handler holds the request under way for the whole bound
                assertThat(closing.isAlive()).as("the interrupted close still waits").isFalse();
                assertThat(interruptKept).isTrue();
                assertThat(tenant.isClosed()).isTrue();
            } finally {
                holding.release.countDown();
            }
            assertThat(underWay.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isInstanceOf(DeviceOutOfMemoryException.class);
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
            assertThat(figures.liveBuffers()).as(figures.toString()).isZero();
            others.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A buffer freed on another thread's stripe as a request joins its budget's queue: the request takes the room the
     * stripes keep back before it queues, and a free on a stripe it has passed already parked its bytes there as room
     * (the request not counted as waiting yet), where no one looked for them again: the request waited out its timeout
     * with the budget's room unused. Many idle children widen the window, as the room is taken back from each of them.
     * Sizes are a quarter of the room a stripe may keep, whatever the number of stripes.
     */
    @Test
    void aBufferFreedAsARequestJoinsItsBudgetsQueueServesIt() throws Exception {
        long limit = 8 * MiB;
        long unit = limit / (2L * ThreadStripes.COUNT) / 2;
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget root = manager.budget("root", limit)) {
            for (int i = 0; i < 3000; i++) {
                root.child("idle-" + i, unit);
            }
            for (int round = 0; round < 200; round++) {
                CompletableFuture<UnifiedBuffer> othersBuffer = new CompletableFuture<>();
                CountDownLatch freeNow = new CountDownLatch(1);
                Thread other = Thread.ofPlatform().start(() -> {
                    UnifiedBuffer buffer = root.allocate(unit, DEVICE); // on this thread's stripe, which keeps some room
                    othersBuffer.complete(buffer);
                    awaitQuietly(freeNow);
                    spin();
                    buffer.close();
                });
                othersBuffer.get(BOUND.toSeconds(), TimeUnit.SECONDS);
                List<UnifiedBuffer> held = new ArrayList<>();
                for (Optional<UnifiedBuffer> next; (next = root.tryAllocate(unit, DEVICE)).isPresent(); ) {
                    held.add(next.get());
                }
                freeNow.countDown();
                CompletableFuture<UnifiedBuffer> request = root.allocateAsync(unit, DEVICE, Duration.ofSeconds(1));
                other.join(BOUND.toMillis());
                try {
                    held.add(request.get(BOUND.toSeconds(), TimeUnit.SECONDS));
                } catch (ExecutionException e) {
                    throw new AssertionError("round " + round + ": the request waited out its timeout beside " + root.statistics(), e.getCause());
                } finally {
                    held.forEach(UnifiedBuffer::close);
                }
            }
        }
    }

    /**
     * The extremes of a wait: the longest {@link Duration} waits (its nanoseconds overflow a long) and is served by the
     * next free, at the manager and through both of a budget's queues; no time at all fails at once wherever the
     * request would wait, counting nothing.
     */
    @Test
    void theLongestAndTheShortestWaitsAtTheManagerAndInABudget() throws Exception {
        Duration longest = Duration.ofSeconds(Long.MAX_VALUE, 999_999_999);
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget full = manager.budget("full", 16 * MiB);
             MemoryBudget roomy = manager.budget("roomy", 64 * MiB)) {
            UnifiedBuffer fullHolds = full.allocate(16 * MiB, DEVICE);
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 8 * MiB);
            assertTimeoutPreemptively(BOUND, () -> {
                assertThat(failureOf(manager.allocateAsync(8 * MiB, DEVICE, Duration.ZERO))).isInstanceOf(DeviceOutOfMemoryException.class);
                assertThat(failureOf(full.allocateAsync(8 * MiB, DEVICE, Duration.ZERO))).isInstanceOf(BudgetExceededException.class);
                assertThat(failureOf(roomy.allocateAsync(8 * MiB, DEVICE, Duration.ZERO))).as("the pool full")
                        .isInstanceOf(DeviceOutOfMemoryException.class).isNotInstanceOf(BudgetExceededException.class);
            });
            CompletableFuture<UnifiedBuffer> atTheManager = manager.allocateAsync(8 * MiB, DEVICE, longest);
            CompletableFuture<UnifiedBuffer> inTheBudgetsQueue = full.allocateAsync(8 * MiB, DEVICE, longest);
            CompletableFuture<UnifiedBuffer> inThePoolsQueue = roomy.allocateAsync(8 * MiB, DEVICE, longest);
            assertThat(full.statistics().waitingRequests()).isEqualTo(1);
            assertThat(manager.statistics(DEVICE).waitingRequests()).isEqualTo(2);

            others.removeFirst().close();
            others.removeFirst().close();
            fullHolds.close();
            for (CompletableFuture<UnifiedBuffer> served : List.of(atTheManager, inTheBudgetsQueue, inThePoolsQueue)) {
                served.get(BOUND.toSeconds(), TimeUnit.SECONDS).close();
            }
            others.forEach(UnifiedBuffer::close);
            for (MemoryBudget budget : List.of(full, roomy)) {
                assertThat(budget.statistics().allocatedBytes()).isZero();
                assertThat(budget.statistics().waitingRequests()).isZero();
            }
            assertThat(manager.statistics(DEVICE).waitingRequests()).isZero();
            assertThat(manager.statistics(DEVICE).liveBuffers()).isZero();
        }
    }

    /** Where a request of 16 MiB waits: at the manager, in a budget for the pool's room, or for the budget's own room. */
    private enum Waiting { AT_THE_MANAGER, FOR_THE_POOL, FOR_THE_BUDGET }

    /**
     * Holds every 16 MiB the request could take (the budget's 32, or the pool's 64), waiting, within the bound, for a
     * buffer made for a request that was cancelled while the pool served it: that one's memory goes back once the
     * attempt ends, not with the cancel.
     */
    private static void refill(UnifiedMemoryManager manager, MemoryBudget tenant, Waiting where, List<UnifiedBuffer> held)
            throws InterruptedException {
        int all = where == Waiting.FOR_THE_BUDGET ? 2 : 4;
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (held.size() < all && System.nanoTime() < deadline) {
            Optional<UnifiedBuffer> next = where == Waiting.FOR_THE_BUDGET ? tenant.tryAllocate(16 * MiB, DEVICE)
                    : manager.tryAllocate(16 * MiB, DEVICE);
            if (next.isPresent()) {
                held.add(next.get());
            } else {
                Thread.sleep(1);
            }
        }
        assertThat(held).as("%s: %s, %s", where, tenant.statistics(), manager.statistics(DEVICE)).hasSize(all);
    }

    @Test
    void aBatchThePoolRefusesPartWayLeavesNothingCountedInTheBudgetOrAboveIt() {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build()) {
            MemoryBudget tenant = manager.budget("tenant", 64 * MiB);
            MemoryBudget request = tenant.child("request", 48 * MiB);
            List<UnifiedBuffer> others = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                others.add(manager.allocate(16 * MiB, DEVICE));
            }

            assertThatThrownBy(() -> request.allocateBatch(DataType.INT8, new long[] {8 * MiB, 8 * MiB, 16 * MiB}, DEVICE))
                    .isInstanceOf(DeviceOutOfMemoryException.class).isNotInstanceOf(BudgetExceededException.class);

            assertThat(manager.statistics(DEVICE).liveBuffers()).as("the two taken were given back").isEqualTo(3);
            for (MemoryBudget budget : List.of(request, tenant)) {
                BudgetStatistics figures = budget.statistics();
                assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
                assertThat(figures.liveBuffers()).as(figures.toString()).isZero();
            }
            others.removeFirst().close();
            List<UnifiedBuffer> whole = request.allocateBatch(DataType.INT8, new long[] {16 * MiB, 16 * MiB}, DEVICE);
            assertThat(tenant.statistics().allocatedBytes()).isEqualTo(32 * MiB);
            whole.forEach(UnifiedBuffer::close);
            others.forEach(UnifiedBuffer::close);
            tenant.close();
            ManagerInvariants.checkQuiescent(manager);
        }
    }

    /** Small batches let in from a stripe's room, each refused by a full pool: every byte of that room comes back. */
    @Test
    void smallBatchesLetInFromTheRoomAndRefusedByThePoolGiveEveryByteBack() {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 64 * MiB)) {
            for (int i = 0; i < 8; i++) { // a little room on this thread's stripe
                tenant.allocate(64 * 1024, DEVICE).close();
            }
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 64 * 1024);
            for (int i = 0; i < 50; i++) {
                assertThatThrownBy(() -> tenant.allocateBatch(DataType.INT8, new long[] {64 * 1024, 64 * 1024}, DEVICE))
                        .isInstanceOf(DeviceOutOfMemoryException.class);
            }
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
            assertThat(figures.liveBuffers()).as(figures.toString()).isZero();
            others.forEach(UnifiedBuffer::close);
            try (UnifiedBuffer whole = tenant.allocate(64 * MiB, DEVICE)) {
                assertThat(whole.byteSize()).isEqualTo(64 * MiB);
            }
        }
    }

    @Test
    void aBatchItsBudgetRefusesAtTheLastByteTakesNothingFromThePool() {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB);
             UnifiedBuffer held = tenant.allocate(16 * MiB, DEVICE)) {
            long allocationsBefore = manager.statistics(DEVICE).allocations();

            assertThatThrownBy(() -> tenant.allocateBatch(DataType.INT8, new long[] {8 * MiB, 8 * MiB, 1}, DEVICE))
                    .isInstanceOf(BudgetExceededException.class);

            assertThat(manager.statistics(DEVICE).allocations()).isEqualTo(allocationsBefore);
            assertThat(tenant.statistics().allocatedBytes()).isEqualTo(16 * MiB);
            tenant.allocateBatch(DataType.INT8, new long[] {8 * MiB, 8 * MiB}, DEVICE).forEach(UnifiedBuffer::close);
        }
    }

    /** Sizes no wait can serve fail at once through every form, at the manager and in a budget, and count nothing. */
    @Test
    void sizesNoWaitCanServeFailAtOnceThroughEveryForm() {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build();
             MemoryBudget small = manager.budget("small", 16 * MiB);
             MemoryBudget large = manager.budget("large", 1L << 40)) {
            assertTimeoutPreemptively(BOUND, () -> {
                for (long bytes : new long[] {65 * MiB, 1L << 40, Long.MAX_VALUE}) {
                    assertThat(failureOf(manager.allocateAsync(bytes, DEVICE, FOREVER))).as("%d bytes", bytes)
                            .isInstanceOf(AllocationAboveLimitException.class);
                    assertThat(failureOf(large.allocateAsync(bytes, DEVICE, FOREVER))).as("%d bytes", bytes)
                            .isInstanceOf(DeviceOutOfMemoryException.class);
                    assertThat(failureOf(small.allocateAsync(bytes, DEVICE, FOREVER))).as("%d bytes", bytes)
                            .isInstanceOf(BudgetExceededException.class);
                    assertThatThrownBy(() -> large.allocate(bytes, DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);
                    assertThat(large.tryAllocate(bytes, DEVICE)).isEmpty();
                    assertThatThrownBy(() -> large.allocateBatch(DataType.INT8, new long[] {MiB, bytes}, DEVICE))
                            .isInstanceOf(DeviceOutOfMemoryException.class);
                    assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {MiB, bytes}, DEVICE))
                            .isInstanceOf(AllocationAboveLimitException.class);
                }
                assertThatThrownBy(() -> small.allocateAsync(DataType.FLOAT64, Long.MAX_VALUE / 4, DEVICE, FOREVER))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overflow");
                for (long bytes : new long[] {0, -1, Long.MIN_VALUE}) {
                    assertThatThrownBy(() -> manager.allocateAsync(bytes, DEVICE, FOREVER)).isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> large.allocateAsync(bytes, DEVICE, FOREVER)).isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> large.allocate(bytes, DEVICE)).isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> large.tryAllocate(bytes, DEVICE)).isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> large.allocateBatch(DataType.INT8, new long[] {MiB, bytes}, DEVICE))
                            .isInstanceOf(IllegalArgumentException.class);
                }
            });
            for (MemoryBudget budget : List.of(small, large)) {
                BudgetStatistics figures = budget.statistics();
                assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
                assertThat(figures.waitingRequests()).as(figures.toString()).isZero();
            }
            MemoryStatistics figures = manager.statistics(DEVICE);
            assertThat(figures.waitingRequests()).isZero();
            assertThat(figures.liveBuffers()).isZero();
            try (UnifiedBuffer whole = large.allocate(64 * MiB, DEVICE)) {
                assertThat(whole.byteSize()).isEqualTo(64 * MiB);
            }
        }
    }

    /** A budget lets in what its limit allows but the pool's pieces never can (blocks over 1 MiB in whole 2 MiB under a cap of 5 MiB): refused at once. */
    @Test
    void aRequestABudgetLetsInButThePoolsPiecesNeverHoldFailsAtOnceAndGivesItsClaimBack() {
        try (UnifiedMemoryManager odd = SmallSimulatedPools.builder().maxPoolSize(5 * MiB).build(); MemoryBudget tenant = odd.budget("tenant", 5 * MiB)) {
            assertTimeoutPreemptively(BOUND, () -> {
                assertThat(failureOf(tenant.allocateAsync(5 * MiB, DEVICE, FOREVER))).isInstanceOf(AllocationAboveLimitException.class);
                assertThatThrownBy(() -> tenant.allocateBatch(DataType.INT8, new long[] {2 * MiB, 3 * MiB}, DEVICE))
                        .isInstanceOf(AllocationAboveLimitException.class);
            });
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            assertThat(tenant.statistics().waitingRequests()).isZero();
            tenant.allocate(4 * MiB, DEVICE).close();
        }
    }

    /**
     * A blocking allocation that waits in its budget for a request under way (whose out-of-memory handler holds it in
     * the pool) stops at an interrupt: refused at once, the interrupt kept, nothing counted for it.
     */
    @Test
    void anInterruptStopsABlockingAllocationWaitingForARequestUnderWayAndKeepsTheFlag() throws Exception {
        HoldingHandler holding = new HoldingHandler(false, false);
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().deviceWaitTimeout(Duration.ofMinutes(2)).outOfMemoryHandler(holding).build();
             MemoryBudget tenant = manager.budget("tenant", 16 * MiB)) {
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 8 * MiB);
            holding.hold.set(true);
            CompletableFuture<Throwable> underWay = new CompletableFuture<>();
            Thread.ofPlatform().start(() -> underWay.complete(failureOf(() -> tenant.allocate(8 * MiB, DEVICE))));
            assertThat(holding.inHandler.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();
            AtomicReference<Throwable> refused = new AtomicReference<>();
            AtomicBoolean interruptKept = new AtomicBoolean();
            Thread blocked = Thread.ofPlatform().start(() -> {
                refused.set(failureOf(() -> tenant.allocate(16 * MiB, DEVICE))); // fits only once the request under way is refused
                interruptKept.set(Thread.currentThread().isInterrupted());
            });
            awaitWaiting(blocked, refused);

            blocked.interrupt();
            blocked.join(BOUND.toMillis());

            assertThat(blocked.isAlive()).as("the interrupt ended the wait").isFalse();
            assertThat(refused.get()).isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("interrupted");
            assertThat(interruptKept).isTrue();
            holding.release.countDown();
            assertThat(underWay.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            others.forEach(UnifiedBuffer::close);
            tenant.allocate(16 * MiB, DEVICE).close();
        }
    }

    /**
     * A handler that throws a {@link StackOverflowError} as the pool tries to serve a budget's waiting request: the
     * request fails with it, its bytes go back to the budget, and the next request is served.
     */
    @Test
    void aHandlerThrowingStackOverflowOnTheWaiterThreadFailsOnlyThatBudgetRequest() throws Exception {
        AtomicBoolean thrown = new AtomicBoolean();
        OutOfMemoryHandler overflowing = (location, bytes, attempt, failure) -> {
            if (Thread.currentThread().getName().startsWith("compute-memory-waiters") && thrown.compareAndSet(false, true)) {
                throw new StackOverflowError("a handler overflows on the waiter thread");
            }
            return false;
        };
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().outOfMemoryHandler(overflowing).build();
             MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 8 * MiB);
            CompletableFuture<UnifiedBuffer> overflowed = tenant.allocateAsync(16 * MiB, DEVICE, FOREVER);
            CompletableFuture<UnifiedBuffer> behind = tenant.allocateAsync(16 * MiB, DEVICE, FOREVER);

            others.removeFirst().close(); // 8 MiB: the head is tried on the waiter thread, and its handler throws

            assertThat(failureOf(overflowed)).isInstanceOf(StackOverflowError.class);
            assertThat(behind).isNotDone();
            others.removeFirst().close();
            try (UnifiedBuffer served = behind.get(BOUND.toSeconds(), TimeUnit.SECONDS)) {
                assertThat(served.byteSize()).isEqualTo(16 * MiB);
                assertThat(tenant.statistics().allocatedBytes()).isEqualTo(16 * MiB);
            }
            assertThat(tenant.statistics().waitingRequests()).isZero();
            assertThat(manager.statistics(DEVICE).waitingRequests()).isZero();
            others.forEach(UnifiedBuffer::close);
            tenant.allocate(32 * MiB, DEVICE).close();
        }
    }

    private static Throwable failureOf(CompletableFuture<UnifiedBuffer> future) {
        try {
            UnifiedBuffer unexpected = future.get(BOUND.toSeconds(), TimeUnit.SECONDS);
            unexpected.close();
            throw new AssertionError("served: " + unexpected);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (InterruptedException | TimeoutException e) {
            throw new AssertionError("not ended within " + BOUND, e);
        }
    }

    private static Throwable failureOf(Supplier<UnifiedBuffer> call) {
        try {
            call.get().close();
        } catch (Throwable e) {
            return e;
        }
        throw new AssertionError("no failure");
    }

    /** Until {@code thread} waits (parked in a lock's condition), within the bound. */
    private static void awaitWaiting(Thread thread, AtomicReference<Throwable> refused) throws InterruptedException {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (thread.getState() != Thread.State.TIMED_WAITING && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(thread.getState()).as("%s", refused.get()).isEqualTo(Thread.State.TIMED_WAITING);
    }

    /** Until {@code closing} waits for the manager's calls under way to end, within the bound. */
    private static void awaitInCallGateWait(Thread closing) throws InterruptedException {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (!inCallGateWait(closing) && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(inCallGateWait(closing)).as("the close waits for the calls under way").isTrue();
    }

    private static boolean inCallGateWait(Thread thread) {
        return Arrays.stream(thread.getStackTrace()).anyMatch(frame -> frame.getMethodName().equals("awaitCalls"));
    }

    /** Buffers made for requests whose callers gave up are closed on the manager's threads: wait for them, within the bound. */
    private static void awaitNothingLive(UnifiedMemoryManager manager) throws InterruptedException {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (manager.statistics(DEVICE).liveBuffers() != 0 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(manager.statistics(DEVICE).liveBuffers()).as("buffers left live").isZero();
    }

    private static void spin() {
        for (int i = ThreadLocalRandom.current().nextInt(20_000); i > 0; i--) {
            Thread.onSpinWait();
        }
    }

    private static void joinQuietly(Thread thread) {
        try {
            thread.join(BOUND.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(BOUND.toSeconds(), TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * An out-of-memory handler that, once {@code hold} is set, holds the next attempt (on the waiter thread alone where
     * {@code waiterThreadOnly}) until {@code release}, telling {@code inHandler}; then asks for a retry or gives up.
     */
    private static final class HoldingHandler implements OutOfMemoryHandler {
        final CountDownLatch inHandler = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        final AtomicBoolean hold = new AtomicBoolean();
        private final boolean waiterThreadOnly;
        private final boolean retry;

        HoldingHandler(boolean waiterThreadOnly, boolean retry) {
            this.waiterThreadOnly = waiterThreadOnly;
            this.retry = retry;
        }

        @Override
        public boolean onOutOfMemory(MemoryLocation location, long requestedBytes, int attempt, DeviceOutOfMemoryException failure) {
            if ((!waiterThreadOnly || Thread.currentThread().getName().startsWith("compute-memory-waiters")) && hold.getAndSet(false)) {
                inHandler.countDown();
                awaitQuietly(release);
                return retry;
            }
            return false;
        }
    }
}
