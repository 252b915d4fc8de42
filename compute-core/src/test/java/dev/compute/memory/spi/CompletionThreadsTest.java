package dev.compute.memory.spi;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.LogCapture;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Ordered steps on the completion threads, as a backend completes the futures of work the device finished together:
 * a step that throws stops no later one, and a step that waits through the library (an application's dependent action
 * closing the manager, or allocating memory a later step's work frees) has the later steps handed on, in order.
 */
class CompletionThreadsTest {

    private final LogCapture log = LogCapture.of(CompletionThreads.class.getName());
    private final CompletionThreads threads = new CompletionThreads(Executors.newCachedThreadPool());

    @AfterEach
    void shutDown() {
        threads.shutdownAndAwait(System.nanoTime() + TimeUnit.SECONDS.toNanos(10));
        log.close();
    }

    @Test
    void aStepThatThrowsAnErrorStopsNoLaterStepAndLeavesNoTaskCounted() {
        Queue<Integer> ran = new ConcurrentLinkedQueue<>();
        threads.executeInOrder(List.<Runnable>of(() -> ran.add(1), () -> {
            throw new StackOverflowError("thrown by a step on purpose");
        }, () -> ran.add(3)));
        assertThat(threads.shutdownAndAwait(System.nanoTime() + TimeUnit.SECONDS.toNanos(10))).as("every task ended").isTrue();
        assertThat(ran).containsExactly(1, 3);
        assertThat(log.atLeast(Level.WARNING)).extracting(record -> record.getThrown().getMessage()).containsExactly("thrown by a step on purpose");
    }

    @Test
    void aStepWaitingThroughTheLibraryForALaterStepHasTheLaterStepsRunInOrderElsewhere() throws Exception {
        CompletableFuture<Void> later = new CompletableFuture<>();
        Queue<String> ran = new ConcurrentLinkedQueue<>();
        CompletableFuture<Boolean> waited = new CompletableFuture<>();
        threads.executeInOrder(List.<Runnable>of(() -> {
            CompletionThreads.beforeWaiting();
            waited.complete(waitFor(later));
            ran.add("first, after its wait");
        }, () -> {
            ran.add("second");
            later.complete(null);
        }, () -> ran.add("third")));
        assertThat(waited.get(20, TimeUnit.SECONDS)).as("the first step's wait for the second ended within its bound").isTrue();
        assertThat(threads.shutdownAndAwait(System.nanoTime() + TimeUnit.SECONDS.toNanos(10))).as("every task ended").isTrue();
        assertThat(ran).containsSubsequence("second", "third").contains("first, after its wait");
    }

    @Test
    void aStepWaitingOnceTheThreadsAreClosedRunsTheLaterStepsFirstOnItsOwnThread() throws Exception {
        CompletableFuture<Void> later = new CompletableFuture<>();
        CompletableFuture<Boolean> waited = new CompletableFuture<>();
        Queue<String> ran = new ConcurrentLinkedQueue<>();
        threads.executeInOrder(List.<Runnable>of(() -> {
            threads.shutdownAndAwait(System.nanoTime() + TimeUnit.SECONDS.toNanos(10)); // a close made by the action
            CompletionThreads.beforeWaiting();
            ran.add("first, before its wait");
            waited.complete(waitFor(later));
        }, () -> {
            ran.add("second");
            later.complete(null);
        }, () -> ran.add("third")));
        assertThat(waited.get(20, TimeUnit.SECONDS)).as("the first step's wait for the second").isTrue();
        assertThat(ran).containsExactly("second", "third", "first, before its wait");
    }

    /**
     * Where no thread can be started for the hand-on (the system's thread limit: {@code OutOfMemoryError: unable to
     * create native thread}), the later steps run first on the waiting step's thread, as when the threads are closed,
     * rather than be dropped with their futures never completed.
     */
    @Test
    void aStepWaitingWhenNoThreadCanBeStartedRunsTheLaterStepsFirstOnItsOwnThread() throws Exception {
        AtomicInteger started = new AtomicInteger();
        CompletionThreads oneThread = new CompletionThreads(Executors.newCachedThreadPool(task -> {
            if (started.getAndIncrement() > 0) {
                throw new OutOfMemoryError("unable to create native thread: thrown by the test on purpose");
            }
            return new Thread(task);
        }));
        CompletableFuture<Void> later = new CompletableFuture<>();
        CompletableFuture<Boolean> waited = new CompletableFuture<>();
        Queue<String> ran = new ConcurrentLinkedQueue<>();
        oneThread.executeInOrder(List.<Runnable>of(() -> {
            CompletionThreads.beforeWaiting();
            ran.add("first, before its wait");
            waited.complete(waitFor(later));
        }, () -> {
            ran.add("second");
            later.complete(null);
        }, () -> ran.add("third")));
        assertThat(waited.get(20, TimeUnit.SECONDS)).as("the first step's wait for the second").isTrue();
        assertThat(ran).containsExactly("second", "third", "first, before its wait");
        assertThat(oneThread.shutdownAndAwait(System.nanoTime() + TimeUnit.SECONDS.toNanos(10))).as("every task ended").isTrue();
    }

    /**
     * A step that blocks without the library (an application's action waiting on a latch of its own, which calls no
     * {@link CompletionThreads#beforeWaiting}): the watch hands the later steps on, which run in order while it still
     * blocks. They waited for it, their futures' waiters their whole bounds.
     */
    @Test
    void aStepBlockedWithoutTheLibraryHasTheLaterStepsRunInOrderElsewhere() throws Exception {
        CountDownLatch blocked = new CountDownLatch(1);
        CountDownLatch laterRan = new CountDownLatch(2);
        Queue<String> ran = new ConcurrentLinkedQueue<>();
        try {
            threads.executeInOrder(List.<Runnable>of(() -> {
                ran.add("first");
                awaitQuietly(blocked);
            }, () -> {
                ran.add("second");
                laterRan.countDown();
            }, () -> {
                ran.add("third");
                laterRan.countDown();
            }));
            assertThat(laterRan.await(20, TimeUnit.SECONDS)).as("the later steps ran while the first still blocked").isTrue();
            assertThat(ran).containsExactly("first", "second", "third");
        } finally {
            blocked.countDown();
        }
        assertThat(threads.shutdownAndAwait(System.nanoTime() + TimeUnit.SECONDS.toNanos(10))).as("every task ended").isTrue();
    }

    /**
     * Threads never shut down (CUDA's, where its close found the device still busy and kept them for the work that
     * completes later): the watch ends once it has had nothing to look at for a while, as the executor's own idle threads
     * do, rather than park for good; and a later ordered task has a watch again.
     */
    @Test
    void anIdleWatchEndsOfItselfAndALaterTaskIsWatchedAgain() throws Exception {
        CompletionThreads neverShutDown = new CompletionThreads(Executors.newCachedThreadPool());
        Set<Thread> before = watchThreads();
        CountDownLatch ran = new CountDownLatch(1);
        neverShutDown.executeInOrder(List.<Runnable>of(ran::countDown));
        assertThat(ran.await(20, TimeUnit.SECONDS)).isTrue();
        Set<Thread> started = watchThreads();
        started.removeAll(before);
        assertThat(started).as("the watch of the ordered task").hasSize(1);
        Thread idleWatch = started.iterator().next();
        idleWatch.join(Duration.ofSeconds(60));
        assertThat(idleWatch.isAlive()).as("the watch, idle since its task ended").isFalse();

        CountDownLatch blocked = new CountDownLatch(1);
        CountDownLatch laterRan = new CountDownLatch(1);
        try {
            neverShutDown.executeInOrder(List.<Runnable>of(() -> awaitQuietly(blocked), laterRan::countDown));
            assertThat(laterRan.await(20, TimeUnit.SECONDS)).as("the later step ran while the first still blocked").isTrue();
        } finally {
            blocked.countDown();
        }
        assertThat(neverShutDown.shutdownAndAwait(System.nanoTime() + TimeUnit.SECONDS.toNanos(10))).as("every task ended").isTrue();
    }

    private static Set<Thread> watchThreads() {
        Set<Thread> watches = new HashSet<>();
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            if (thread.getName().equals("compute-completions-watch")) {
                watches.add(thread);
            }
        }
        return watches;
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * An interrupt one step leaves set (an application's action that restores the flag of an interrupted wait, or sets
     * it) is not seen by the later steps, which complete other futures and run other actions: it made their waits fail
     * at once with an {@link InterruptedException} nothing of theirs caused. A step that waits through the library once
     * the threads are closed, so running the later steps itself, still has its own interrupt afterwards.
     */
    @Test
    void anInterruptAStepLeavesSetReachesNoLaterStepAndAWaitingStepKeepsItsOwn() throws Exception {
        Queue<String> seen = new ConcurrentLinkedQueue<>();
        CompletableFuture<Boolean> keptItsOwn = new CompletableFuture<>();
        threads.executeInOrder(List.<Runnable>of(() -> Thread.currentThread().interrupt(),
                () -> seen.add("second interrupted: " + Thread.currentThread().isInterrupted()),
                () -> {
                    threads.shutdownAndAwait(System.nanoTime() + TimeUnit.SECONDS.toNanos(10)); // the later steps run here
                    Thread.currentThread().interrupt();
                    CompletionThreads.beforeWaiting();
                    keptItsOwn.complete(Thread.interrupted());
                }, () -> seen.add("fourth interrupted: " + Thread.currentThread().isInterrupted())));
        assertThat(keptItsOwn.get(20, TimeUnit.SECONDS)).as("the waiting step's own interrupt, after the later steps ran").isTrue();
        assertThat(seen).containsExactly("second interrupted: false", "fourth interrupted: false");
    }

    /** A library's bounded wait: true when {@code future} completed within 10 s. */
    private static boolean waitFor(CompletableFuture<Void> future) {
        try {
            future.get(10, TimeUnit.SECONDS);
            return true;
        } catch (Exception e) {
            return false;
        }
    }
}
