package dev.compute.memory;

import static dev.compute.memory.SmallSimulatedPools.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ManagerInvariants;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Eight threads at once, at random, through the manager and nested budgets, at two locations of a small pool: waiting
 * requests with short timeouts, some cancelled, with functions on their futures that throw {@link Error}s, allocate
 * again or compose another wait; {@code tryAllocate}, batches and frees between them. The other tests race one thing
 * at a time; here they all meet. Afterwards every future has ended, and nothing stays counted: no buffer live, no
 * request waiting, no byte in any budget, and the pool takes its whole cap again.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class WaitingRequestsChurnTest {

    private static final MemoryLocation[] LOCATIONS = {MemoryLocation.DEVICE, MemoryLocation.HOST};
    private static final long CHURN_NANOS = TimeUnit.SECONDS.toNanos(3);
    private static final int MOST_HELD_PER_THREAD = 6;

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void everyFormAtOnceLeavesNothingCounted(boolean virtualThreads) throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build()) {
            MemoryBudget root = manager.budget("root", 48 * MiB);
            MemoryBudget left = root.child("left", 24 * MiB);
            List<MemoryBudget> budgets = List.of(root, left, root.child("right", 32 * MiB), left.child("leaf", 16 * MiB));
            ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
            ConcurrentLinkedQueue<CompletableFuture<UnifiedBuffer>> requests = new ConcurrentLinkedQueue<>();
            AtomicLong served = new AtomicLong();
            long end = System.nanoTime() + CHURN_NANOS;
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                Runnable churn = () -> churn(manager, budgets, end, requests, served, unexpected);
                threads.add(virtualThreads ? Thread.ofVirtual().start(churn) : Thread.ofPlatform().start(churn));
            }
            for (Thread thread : threads) {
                thread.join(TimeUnit.SECONDS.toMillis(60));
                assertThat(thread.isAlive()).as("a churning thread still runs").isFalse();
            }
            assertThat(unexpected).isEmpty();
            assertThat(requests).allSatisfy(request -> assertThat(request).isDone());
            assertThat(served.get()).as("requests served from the queue").isPositive();
            awaitNothingLive(manager);
            for (MemoryLocation location : LOCATIONS) {
                MemoryStatistics figures = manager.statistics(location);
                assertThat(figures.liveBuffers()).as(figures.toString()).isZero();
                assertThat(figures.waitingRequests()).as(figures.toString()).isZero();
            }
            for (MemoryBudget budget : budgets) {
                BudgetStatistics figures = budget.statistics();
                assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
                assertThat(figures.liveBuffers()).as(figures.toString()).isZero();
                assertThat(figures.waitingRequests()).as(figures.toString()).isZero();
            }
            ManagerInvariants.checkQuiescent(manager);
            assertThat(budgets.get(2).allocateAsync(32 * MiB, MemoryLocation.DEVICE, Duration.ofSeconds(10)))
                    .succeedsWithin(Duration.ofSeconds(20)).satisfies(UnifiedBuffer::close);
        }
    }

    private static void churn(UnifiedMemoryManager manager, List<MemoryBudget> budgets, long end,
            ConcurrentLinkedQueue<CompletableFuture<UnifiedBuffer>> requests, AtomicLong served, ConcurrentLinkedQueue<Throwable> unexpected) {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        List<UnifiedBuffer> held = new ArrayList<>();
        List<CompletableFuture<UnifiedBuffer>> pending = new ArrayList<>();
        try {
            while (System.nanoTime() < end) {
                MemoryLocation location = LOCATIONS[random.nextInt(LOCATIONS.length)];
                long bytes = (random.nextInt(8) == 0 ? 12 : random.nextInt(1, 5)) * MiB + random.nextInt(1000);
                MemoryBudget budget = random.nextInt(5) == 0 ? null : budgets.get(random.nextInt(budgets.size()));
                try {
                    switch (random.nextInt(8)) {
                        case 0, 1, 2 -> {
                            Duration timeout = Duration.ofMillis(random.nextInt(4) == 0 ? 0 : random.nextInt(1, 60));
                            CompletableFuture<UnifiedBuffer> request = budget == null ? manager.allocateAsync(bytes, location, timeout)
                                    : budget.allocateAsync(bytes, location, timeout);
                            requests.add(request);
                            addFunction(manager, request, location, random.nextInt(5));
                            if (random.nextInt(3) == 0) {
                                request.cancel(random.nextBoolean());
                            }
                            pending.add(request);
                        }
                        case 3 -> (budget == null ? manager.tryAllocate(bytes, location) : budget.tryAllocate(bytes, location)).ifPresent(held::add);
                        case 4 -> {
                            long[] counts = {random.nextInt(1, 300_000), random.nextInt(1, 300_000), random.nextInt(1, 900_000)};
                            held.addAll(budget == null ? manager.allocateBatch(DataType.FLOAT32, counts, location)
                                    : budget.allocateBatch(DataType.FLOAT32, counts, location));
                        }
                        case 5 -> takeTheEnded(pending, held, served, unexpected);
                        default -> {
                            if (!held.isEmpty()) {
                                held.remove(random.nextInt(held.size())).close();
                            }
                        }
                    }
                } catch (DeviceOutOfMemoryException refused) {
                    // the pool or a budget is full: what the churn is for
                }
                while (held.size() > MOST_HELD_PER_THREAD) {
                    held.removeFirst().close();
                }
            }
            for (CompletableFuture<UnifiedBuffer> request : pending) {
                try {
                    held.add(request.get(30, TimeUnit.SECONDS));
                } catch (CancellationException | ExecutionException ended) {
                    // cancelled, timed out or refused: nothing handed out
                }
            }
        } catch (Throwable unexpectedFailure) {
            unexpected.add(unexpectedFailure);
        } finally {
            held.forEach(UnifiedBuffer::close);
        }
    }

    /** Functions that run on the thread that completes the request: the manager's waiter or timeout thread. */
    private static void addFunction(UnifiedMemoryManager manager, CompletableFuture<UnifiedBuffer> request, MemoryLocation location, int which) {
        switch (which) {
            case 0 -> request.thenApply(buffer -> {
                throw new StackOverflowError("from a function on the request");
            });
            case 1 -> request.whenComplete((buffer, failure) -> {
                throw new OutOfMemoryError("from a function on the request");
            });
            case 2 -> request.thenCompose(buffer -> manager.allocateAsync(MiB, location, Duration.ofMillis(5)))
                    .thenAccept(UnifiedBuffer::close);
            case 3 -> request.whenComplete((buffer, failure) -> manager.tryAllocate(MiB, location).ifPresent(UnifiedBuffer::close));
            default -> { }
        }
    }

    private static void takeTheEnded(List<CompletableFuture<UnifiedBuffer>> pending, List<UnifiedBuffer> held, AtomicLong served,
            ConcurrentLinkedQueue<Throwable> unexpected) {
        for (Iterator<CompletableFuture<UnifiedBuffer>> requests = pending.iterator(); requests.hasNext(); ) {
            CompletableFuture<UnifiedBuffer> request = requests.next();
            if (!request.isDone()) {
                continue;
            }
            requests.remove();
            try {
                held.add(request.join());
                served.incrementAndGet();
            } catch (CancellationException cancelled) {
                // its caller's choice
            } catch (CompletionException failed) {
                if (!(failed.getCause() instanceof DeviceOutOfMemoryException)) {
                    unexpected.add(failed.getCause());
                }
            }
        }
    }

    private static void awaitNothingLive(UnifiedMemoryManager manager) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline && manager.statistics(LOCATIONS[0]).liveBuffers() + manager.statistics(LOCATIONS[1]).liveBuffers() > 0) {
            Thread.sleep(10);
        }
    }
}
