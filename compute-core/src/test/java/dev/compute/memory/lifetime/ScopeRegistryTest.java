package dev.compute.memory.lifetime;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.lifetime.BufferViews.Sharing;
import dev.compute.memory.lifetime.MemoryScope.Kind;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every open view and access of a manager, by owner thread: counted, named for a close report, ended by their owners
 * when handed to them, dropped when their owners are gone (by a sweep on the way in, or by the sweeper thread when
 * nobody calls in), and all of them ended, bounded, when the manager closes.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ScopeRegistryTest {

    private final ScopeRegistry registry = new ScopeRegistry();
    private final List<Thread> started = new ArrayList<>();

    @AfterEach
    void stopThreads() throws InterruptedException {
        for (Thread thread : started) {
            thread.interrupt();
            thread.join(10_000);
        }
    }

    private MemoryScope open(Sharing sharing) {
        return registry.open(Kind.ACCESS, sharing, new BufferScopes());
    }

    /**
     * A thread that opens a confined scope and then does what {@code afterwards} says (wait, call in, end), holding the
     * scope meanwhile; returns once the scope is open.
     */
    private MemoryScope openedOn(String name, ThrowingRunnable afterwards) throws InterruptedException {
        CountDownLatch opened = new CountDownLatch(1);
        AtomicReference<MemoryScope> scope = new AtomicReference<>();
        Thread thread = Thread.ofPlatform().name(name).start(() -> {
            scope.set(open(Sharing.CONFINED));
            opened.countDown();
            try {
                afterwards.run();
            } catch (InterruptedException e) {
                // the test is over
            }
        });
        started.add(thread);
        assertThat(opened.await(10, TimeUnit.SECONDS)).isTrue();
        return scope.get();
    }

    @FunctionalInterface
    private interface ThrowingRunnable {
        void run() throws InterruptedException;
    }

    @Test
    void everyThreadsScopesAndTheSharedOnesAreCountedAndTheirHoldersNamed() throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        open(Sharing.CONFINED);
        open(Sharing.CONFINED);
        MemoryScope shared = open(Sharing.SHARED);
        openedOn("holder-1", done::await);
        MemoryScope ended = openedOn("holder-2", done::await);
        ended.abandon();

        assertThat(registry.openScopes()).isEqualTo(4);
        assertThat(registry.holders()).containsExactlyInAnyOrder(Thread.currentThread().getName(), "holder-1", "1 shared access(es)");

        shared.end();
        registry.endAllOfCurrentThread();
        assertThat(registry.openScopes()).isEqualTo(1);
        assertThat(registry.holders()).containsExactly("holder-1");
        done.countDown();
    }

    @Test
    void aThreadEndsTheScopesHandedToItWhenItCallsInAndOnlyThose() throws Exception {
        CountDownLatch callIn = new CountDownLatch(1);
        CountDownLatch calledIn = new CountDownLatch(1);
        MemoryScope theirs = openedOn("owner", () -> {
            callIn.await();
            registry.endHandedOver();
            calledIn.countDown();
            new CountDownLatch(1).await(); // stays alive, so the scope is not dropped as its owner's
        });
        MemoryScope mine = open(Sharing.CONFINED);
        MemoryScope shared = open(Sharing.SHARED);

        theirs.endOrHandOver();
        registry.endHandedOver();

        assertThat(theirs.isOpen()).isTrue();
        assertThat(mine.isOpen()).as("not handed over").isTrue();
        assertThat(shared.isOpen()).isTrue();
        callIn.countDown();
        assertThat(calledIn.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(theirs.isOpen()).isFalse();
        assertThat(registry.openScopes()).isEqualTo(2);

        registry.endAllOfCurrentThread();
        assertThat(mine.isOpen()).isFalse();
        assertThat(shared.isOpen()).as("a shared scope is nobody's own").isTrue();
        shared.end();
    }

    @Test
    void theScopesOfThreadsThatEndedAreDroppedByASweep() throws Exception {
        AtomicInteger released = new AtomicInteger();
        BufferScopes buffer = new BufferScopes();
        Thread owner = Thread.ofPlatform().name("short-lived").start(() -> registry.open(Kind.VIEW, Sharing.CONFINED, buffer));
        owner.join(10_000);
        buffer.closeViews(released::incrementAndGet); // handed over: its owner is dead, so it is dropped at once
        assertThat(released).hasValue(1);

        Thread another = Thread.ofPlatform().name("short-lived-2").start(() -> open(Sharing.CONFINED));
        another.join(10_000);
        assertThat(registry.openScopes()).isEqualTo(1);
        assertThat(registry.holders()).containsExactly("short-lived-2");

        registry.sweepDeadOwners();

        assertThat(registry.openScopes()).isZero();
        assertThat(registry.holders()).isEmpty();
    }

    @Test
    void manyOwnersThatEndedAreSweptAsNewOnesArrive() throws Exception {
        for (int i = 0; i < 40; i++) {
            Thread.ofPlatform().start(() -> open(Sharing.CONFINED)).join(10_000);
        }

        assertThat(registry.openScopes()).as("swept on the way in, once the owners passed twice those of the last sweep")
                .isLessThan(40);
        registry.sweepDeadOwners();
        assertThat(registry.openScopes()).isZero();
    }

    @Test
    void aScopeHandedToAnOwnerThatEndsWithoutCallingInIsDroppedByTheSweeper() throws Exception {
        CountDownLatch end = new CountDownLatch(1);
        MemoryScope theirs = openedOn("leaves-quietly", end::await);

        theirs.endOrHandOver();
        assertThat(theirs.isOpen()).isTrue();
        end.countDown();

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (theirs.isOpen() && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertThat(theirs.isOpen()).as("dropped within 10 s, though nobody called in").isFalse();
        assertThat(registry.openScopes()).isZero();
    }

    @Test
    void closeAllEndsWhatItMayAtOnceAndWaitsBoundedForTheOwnersOfTheRest() throws Exception {
        CountDownLatch callIn = new CountDownLatch(1);
        MemoryScope theirs = openedOn("slow-owner", () -> {
            callIn.await();
            registry.endHandedOver();
            new CountDownLatch(1).await();
        });
        MemoryScope mine = open(Sharing.CONFINED);
        MemoryScope shared = open(Sharing.SHARED);

        long start = System.nanoTime();
        boolean allEnded = registry.closeAll(start + TimeUnit.MILLISECONDS.toNanos(200));
        long waitedMillis = (System.nanoTime() - start) / 1_000_000;

        assertThat(allEnded).isFalse();
        assertThat(waitedMillis).as("waited until the deadline, and not much longer").isBetween(190L, 5_000L);
        assertThat(mine.isOpen()).isFalse();
        assertThat(shared.isOpen()).isFalse();
        assertThat(theirs.isOpen()).isTrue();
        assertThat(registry.holders()).containsExactly("slow-owner");

        callIn.countDown();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (theirs.isOpen() && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(theirs.isOpen()).as("ended by its owner when it called in").isFalse();
        assertThat(registry.closeAll(System.nanoTime())).isTrue();
    }

    @Test
    void closeAllReturnsAsSoonAsTheOwnersHaveEndedTheirScopes() throws Exception {
        MemoryScope theirs = openedOn("busy-owner", () -> {
            while (!Thread.currentThread().isInterrupted()) {
                registry.endHandedOver(); // calls into the manager all the time
                Thread.sleep(5);
            }
        });

        long start = System.nanoTime();
        assertThat(registry.closeAll(start + TimeUnit.SECONDS.toNanos(30))).isTrue();

        assertThat(System.nanoTime() - start).as("well before the deadline").isLessThan(TimeUnit.SECONDS.toNanos(10));
        assertThat(theirs.isOpen()).isFalse();
    }

    @Test
    void aSharedScopeANativeCallHeldIsEndedOnceTheCallReturned() throws Throwable {
        MemoryScope shared = open(Sharing.SHARED);
        Thread sleeper = inANativeCallOf(shared);

        assertThat(registry.closeAll(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100))).as("the call holds it").isFalse();
        assertThat(shared.isOpen()).isTrue();
        assertThat(registry.holders()).containsExactly("1 shared access(es)");

        sleeper.join(10_000);
        registry.endHandedOver();
        assertThat(shared.isOpen()).as("retried on the next call in").isFalse();
        assertThat(registry.openScopes()).isZero();
    }

    /** A shared scope a native call held when it was to end, on a manager nobody calls into again: the sweeper ends it. */
    @Test
    void aSharedScopeANativeCallHeldIsEndedBySweeperOnceTheCallReturnedThoughNobodyCallsIn() throws Throwable {
        MemoryScope shared = open(Sharing.SHARED);
        Thread sleeper = inANativeCallOf(shared);

        shared.endOrHandOver();
        assertThat(shared.isOpen()).as("the call holds it").isTrue();
        sleeper.join(10_000);

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        // the sweeper marks the scope ended, then takes it off the count: wait for both
        while ((shared.isOpen() || registry.openScopes() > 0) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertThat(shared.isOpen()).as("ended within 10 s, though nobody called in").isFalse();
        assertThat(registry.openScopes()).isZero();
    }

    /** A thread two seconds into {@code nanosleep}, whose argument is a segment of {@code shared}: the call holds the scope. */
    private Thread inANativeCallOf(MemoryScope shared) throws InterruptedException {
        Linker linker = Linker.nativeLinker();
        MethodHandle nanosleep = linker.downcallHandle(linker.defaultLookup().find("nanosleep").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        MemorySegment timespec = shared.bind(Arena.ofAuto().allocate(16));
        timespec.set(JAVA_LONG, 0, 2); // seconds
        timespec.set(JAVA_LONG, 8, 0);
        CountDownLatch calling = new CountDownLatch(1);
        Thread sleeper = Thread.ofPlatform().start(() -> {
            calling.countDown();
            try {
                int ignored = (int) nanosleep.invokeExact(timespec, MemorySegment.NULL);
            } catch (Throwable e) {
                throw new AssertionError(e);
            }
        });
        assertThat(calling.await(10, TimeUnit.SECONDS)).isTrue();
        Thread.sleep(500); // inside its two-second sleep by now
        return sleeper;
    }

    @Test
    void threadsOpeningAndEndingAtOnceLeaveTheCountExact() throws Exception {
        int threads = 4;
        int rounds = 2_000;
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    for (int i = 0; i < rounds; i++) {
                        MemoryScope a = open(Sharing.CONFINED);
                        MemoryScope b = open(i % 2 == 0 ? Sharing.SHARED : Sharing.CONFINED);
                        registry.openScopes();
                        a.end();
                        b.end();
                    }
                } catch (Throwable e) {
                    failure.set(e);
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(30_000);
            assertThat(worker.isAlive()).isFalse();
        }

        assertThat(failure.get()).isNull();
        assertThat(registry.openScopes()).isZero();
    }

    @Test
    void aScopeHandedToAnOwnerTheSweepJustDroppedLeavesNothingWaiting() throws Exception {
        MemoryScope theirs = openedOn("ends-now", () -> {});
        Objects.requireNonNull(theirs.owner()).join(10_000);
        registry.sweepDeadOwners(); // the sweeper drops the owner's scopes ...

        registry.handToOwner(theirs); // ... right after a closing thread saw the owner alive

        assertThat(theirs.isOpen()).isFalse();
        assertThat(registry.openScopes()).isZero();
        assertThat(registry.waitingScopes()).as("nothing waits for an owner the sweep dropped").isZero();
    }

    @Test
    void aScopeHandedToItsOwnerJustAfterTheOwnerEndedItLeavesNothingWaiting() throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<MemoryScope> ended = new AtomicReference<>();
        CountDownLatch idle = new CountDownLatch(1);
        openedOn("ends-its-view-scope", () -> {
            MemoryScope view = open(Sharing.CONFINED);
            view.end(); // its view scope closes: its views end, then what was handed to the thread ...
            registry.endHandedOver();
            ended.set(view);
            idle.countDown();
            done.await(); // ... and the thread idles in its pool for good
        });
        assertThat(idle.await(10, TimeUnit.SECONDS)).isTrue();

        ended.get().endOrHandOver(); // a close on another thread that listed the view just before it ended

        assertThat(registry.waitingScopes()).as("nothing waits for an idle owner, the scope has ended").isZero();
        done.countDown();
    }

    @Test
    void aSweepInWhichAReleaseFailsStillDropsTheDeadOwnersOtherScopes() throws Exception {
        BufferScopes released = new BufferScopes();
        BufferScopes refused = new BufferScopes();
        AtomicInteger releases = new AtomicInteger();
        CountDownLatch end = new CountDownLatch(1);
        Thread owner = Thread.ofPlatform().name("views-then-ends").start(() -> {
            registry.open(Kind.VIEW, Sharing.CONFINED, released);
            registry.open(Kind.VIEW, Sharing.CONFINED, refused); // the newest: the sweep drops it first
            try {
                end.await();
            } catch (InterruptedException e) {
                // the test is over
            }
        });
        started.add(owner);
        while (registry.openScopes() < 2) {
            Thread.onSpinWait();
        }
        released.closeViews(releases::incrementAndGet); // both buffers closed here, while their views' owner lives
        refused.closeViews(() -> {
            throw new IllegalStateException("the memory resource refuses this free");
        });
        try (LogCapture log = LogCapture.managerLog()) {
            end.countDown();
            owner.join(10_000);

            registry.sweepDeadOwners(); // or the sweeper thread met the refusal first
            while (log.atLeast(Level.WARNING).isEmpty() || releases.get() == 0) { // the sweeper may be midway
                Thread.onSpinWait();
            }

            assertThat(log.atLeast(Level.WARNING).getFirst().getThrown()).as("told, not thrown")
                    .hasMessage("the memory resource refuses this free");
        }
        assertThat(releases).as("the other buffer's memory is back").hasValue(1);
        assertThat(registry.openScopes()).isZero();
        assertThat(registry.waitingScopes()).isZero();
    }

    @Test
    void aSharedViewWhoseReleaseFailsIsNotTakenForOneANativeCallHolds() {
        BufferScopes refused = new BufferScopes();
        registry.open(Kind.VIEW, Sharing.SHARED, refused);

        assertThatThrownBy(() -> refused.closeViews(() -> {
            throw new IllegalStateException("the memory resource refuses this free");
        })).as("the closing caller's own free").hasMessage("the memory resource refuses this free");

        assertThat(registry.openScopes()).isZero();
        assertThat(registry.waitingScopes()).as("ended: nothing to retry").isZero();
    }
}
