package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A request that ends without its buffer tells its {@code unserved} once, and only once no memory is held for it: at
 * once (before its functions run) where nothing is being made for it, after the buffer is given back where an attempt
 * was making one as it ended. A budget gives the request's bytes back then, so that its books never hold less than the
 * pool lends its tenant.
 */
class AllocationWaitersUnservedTest {

    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final List<String> happened = new CopyOnWriteArrayList<>();
    private final AtomicBoolean room = new AtomicBoolean();
    private final AtomicInteger attempts = new AtomicInteger();
    private volatile CountDownLatch attemptHeld = new CountDownLatch(0);
    private final CountDownLatch attemptStarted = new CountDownLatch(1);
    private final AllocationWaiters<String> waiters = new AllocationWaiters<>((type, location, bytes) -> {
        attempts.incrementAndGet();
        if (!room.get()) {
            throw new DeviceOutOfMemoryException(location, bytes, OutOfMemoryReason.POOL_LIMIT, "no room");
        }
        attemptStarted.countDown();
        try {
            attemptHeld.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        happened.add("made");
        return "buffer";
    }, buffer -> happened.add("given back"), MemoryEventListener.NONE);

    @AfterEach
    void close() {
        attemptHeld.countDown();
        waiters.close(Duration.ZERO);
    }

    private CompletableFuture<String> request(Duration timeout) {
        return waiters.request(DataType.INT8, DEVICE, 1024, Long.MAX_VALUE, timeout, timeout,
                new AllocationWaiters.BudgetTerms<>(false, UnaryOperator.identity(), () -> happened.add("unserved"), null));
    }

    /**
     * Once the waiter thread's first try (as the queue's new head) is over: none is under way after it. Begun, the try
     * has ended once no waiter thread is serving a queue, however long the thread was kept off a slow machine's cores.
     */
    private void afterTheWaitersFirstTry() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while ((attempts.get() < 2 || aWaiterThreadServes()) && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(attempts).as("the waiter thread's try").hasValueGreaterThanOrEqualTo(2);
        assertThat(aWaiterThreadServes()).as("the waiter thread's try ended").isFalse();
    }

    private static boolean aWaiterThreadServes() {
        return Thread.getAllStackTraces().entrySet().stream().filter(thread -> thread.getKey().getName().startsWith("compute-memory-waiters-"))
                .flatMap(thread -> Stream.of(thread.getValue()))
                .anyMatch(frame -> frame.getClassName().equals(AllocationWaiters.class.getName()) && frame.getMethodName().equals("serve"));
    }

    @Test
    void aRequestCancelledWhileQueuedIsToldBeforeItsFunctionsRun() throws Exception {
        CompletableFuture<String> request = request(Duration.ofSeconds(10));
        request.whenComplete((buffer, failure) -> happened.add("function"));
        afterTheWaitersFirstTry();

        request.cancel(false);

        assertThat(happened).containsExactly("unserved", "function");
    }

    @Test
    void aRequestThatTimesOutIsToldBeforeItsFunctionsRun() {
        CompletableFuture<String> request = request(Duration.ofMillis(50));
        CompletableFuture<Void> seen = request.handle((buffer, failure) -> {
            happened.add("function");
            return null;
        });

        seen.orTimeout(10, TimeUnit.SECONDS).join();

        assertThat(happened).containsExactly("unserved", "function");
    }

    @Test
    void aRequestCancelledWhileABufferIsMadeForItIsToldOnceThatBufferIsGivenBack() throws Exception {
        attemptHeld = new CountDownLatch(1);
        CompletableFuture<String> request = request(Duration.ofSeconds(10));
        room.set(true);
        waiters.released(DEVICE, CompletableFuture.completedFuture(null)); // the waiter thread serves it, and is held
        assertThat(attemptStarted.await(10, TimeUnit.SECONDS)).isTrue();

        request.cancel(false);
        assertThat(happened).as("nothing told while the buffer is being made").isEmpty();
        attemptHeld.countDown();

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (happened.size() < 3 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(happened).containsExactly("made", "given back", "unserved");
    }

    /** As a cancel: a close fails the request once the buffer made for it meanwhile is back, not before. */
    @Test
    void aRequestTheCloseFailsWhileABufferIsMadeForItFailsOnceThatBufferIsGivenBack() throws Exception {
        CompletableFuture<Void> seen = closedWhileABufferIsMade(Duration.ofSeconds(10));
        assertThat(seen).as("not failed while the buffer is being made").isNotDone();
        attemptHeld.countDown();

        seen.orTimeout(10, TimeUnit.SECONDS).join();
        assertThat(happened).containsExactly("made", "given back", "unserved", "failed: IllegalStateException");
    }

    /** An attempt that does not end within the close timeout does not keep the request waiting: it fails then. */
    @Test
    void aRequestTheCloseFailsWhileAnAttemptOutlastsTheCloseTimeoutFailsAtTheTimeout() throws Exception {
        CompletableFuture<Void> seen = closedWhileABufferIsMade(Duration.ofMillis(50));

        seen.orTimeout(10, TimeUnit.SECONDS).join();
        assertThat(happened).containsExactly("failed: IllegalStateException");
        attemptHeld.countDown();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (happened.size() < 4 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(happened).containsExactly("failed: IllegalStateException", "made", "given back", "unserved");
    }

    /** A request whose buffer the waiter thread is making, held there, as the waiters close with {@code closeTimeout}. */
    private CompletableFuture<Void> closedWhileABufferIsMade(Duration closeTimeout) throws InterruptedException {
        attemptHeld = new CountDownLatch(1);
        CompletableFuture<String> request = request(Duration.ofSeconds(10));
        CompletableFuture<Void> seen = request.handle((buffer, failure) -> {
            happened.add("failed: " + failure.getClass().getSimpleName());
            return null;
        });
        room.set(true);
        waiters.released(DEVICE, CompletableFuture.completedFuture(null));
        assertThat(attemptStarted.await(10, TimeUnit.SECONDS)).isTrue();
        waiters.close(closeTimeout);
        return seen;
    }

    @Test
    void aServedRequestIsNeverToldUnserved() {
        room.set(true);
        CompletableFuture<String> request = request(Duration.ofSeconds(10));

        assertThat(request.join()).isEqualTo("buffer");
        assertThat(happened).containsExactly("made");
    }
}
