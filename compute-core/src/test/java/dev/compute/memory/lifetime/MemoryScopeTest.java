package dev.compute.memory.lifetime;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.lifetime.BufferViews.Sharing;
import dev.compute.memory.lifetime.MemoryScope.Kind;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * One view or access: the segments it binds work only while it is open (and, confined, only on its owner), it ends
 * once, telling its registry and its buffer, and whoever may not end it hands it to its owner, drops it when the owner
 * is gone, or leaves a shared one a native call holds for a retry.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MemoryScopeTest {

    private final ScopeRegistry registry = new ScopeRegistry();
    private final BufferScopes buffer = new BufferScopes();
    private final MemorySegment memory = Arena.ofAuto().allocate(64);

    private MemoryScope open(Sharing sharing) {
        return registry.open(Kind.ACCESS, sharing, buffer);
    }

    /** Runs {@code action} on a new thread and returns what it returned or threw. */
    private static Object onAnotherThread(Supplier<Object> action) throws InterruptedException {
        AtomicReference<Object> outcome = new AtomicReference<>();
        Thread thread = Thread.ofPlatform().name("another").start(() -> {
            try {
                outcome.set(action.get());
            } catch (Throwable t) {
                outcome.set(t);
            }
        });
        thread.join(10_000);
        return outcome.get();
    }

    @Test
    void aConfinedScopesSegmentsWorkOnlyOnItsOwnerAndOnlyWhileItIsOpen() throws Exception {
        MemoryScope scope = open(Sharing.CONFINED);
        MemorySegment bound = scope.bind(memory);
        bound.set(JAVA_INT, 0, 7);

        assertThat(scope.owner()).isSameAs(Thread.currentThread());
        assertThat(scope.shared()).isFalse();
        assertThat(scope).hasToString("ACCESS of thread '" + Thread.currentThread().getName() + "'");
        assertThat(onAnotherThread(() -> bound.get(JAVA_INT, 0))).isInstanceOf(WrongThreadException.class);
        assertThat(onAnotherThread(() -> scope.bind(memory))).isInstanceOfSatisfying(WrongThreadException.class, e -> assertThat(e)
                .hasMessage("this access belongs to thread '" + Thread.currentThread().getName() + "'; its memory can be reached only there"
                        + " (take a shared access for several threads)"));

        scope.end();

        assertThat(scope.isOpen()).isFalse();
        assertThatThrownBy(() -> bound.get(JAVA_INT, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> scope.bind(memory)).isInstanceOf(IllegalStateException.class).hasMessage("this access has ended");
        assertThat(memory.get(JAVA_INT, 0)).as("the memory itself is not freed by the scope").isEqualTo(7);
    }

    @Test
    void aSharedScopesSegmentsWorkOnEveryThread() throws Exception {
        MemoryScope scope = open(Sharing.SHARED);
        MemorySegment bound = scope.bind(memory);
        bound.set(JAVA_INT, 0, 9);

        assertThat(scope.owner()).isNull();
        assertThat(scope.shared()).isTrue();
        assertThat(scope).hasToString("ACCESS (shared)");
        assertThat(onAnotherThread(() -> bound.get(JAVA_INT, 0))).isEqualTo(9);
        assertThat(onAnotherThread(() -> {
            scope.end();
            return scope.isOpen();
        })).as("any thread may end it").isEqualTo(false);
        assertThatThrownBy(() -> bound.get(JAVA_INT, 0)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aScopeEndsOnceAndTellsItsRegistryAndItsBuffer() {
        MemoryScope scope = open(Sharing.CONFINED);
        AtomicInteger released = new AtomicInteger();
        buffer.closeViews(released::incrementAndGet); // an access stays open: the release waits for it
        assertThat(registry.openScopes()).isEqualTo(1);
        assertThat(released).hasValue(0);

        scope.end();
        scope.end();
        scope.abandon();

        assertThat(registry.openScopes()).isZero();
        assertThat(buffer.isEmpty()).isTrue();
        assertThat(released).hasValue(1);
    }

    @Test
    void onlyTheOwnerEndsAConfinedScopeAnyOtherThreadHandsItOver() throws Exception {
        CountDownLatch opened = new CountDownLatch(1);
        CountDownLatch callIn = new CountDownLatch(1);
        AtomicReference<MemoryScope> theirs = new AtomicReference<>();
        Thread owner = Thread.ofPlatform().start(() -> {
            theirs.set(open(Sharing.CONFINED));
            opened.countDown();
            try {
                callIn.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            registry.endHandedOver();
        });
        assertThat(opened.await(10, TimeUnit.SECONDS)).isTrue();

        theirs.get().endOrHandOver();
        assertThat(theirs.get().isOpen()).as("handed to its owner").isTrue();
        registry.endHandedOver();
        assertThat(theirs.get().isOpen()).as("this thread ends only what was handed to it").isTrue();

        callIn.countDown();
        owner.join(10_000);
        assertThat(theirs.get().isOpen()).isFalse();

        MemoryScope mine = open(Sharing.CONFINED);
        mine.endOrHandOver();
        assertThat(mine.isOpen()).as("the owner ends its own at once").isFalse();
        MemoryScope shared = open(Sharing.SHARED);
        shared.endOrHandOver();
        assertThat(shared.isOpen()).isFalse();
    }

    @Test
    void aScopeWhoseOwnerHasEndedIsDroppedWithoutClosingItsArena() throws Exception {
        AtomicReference<MemoryScope> orphan = new AtomicReference<>();
        AtomicReference<MemorySegment> bound = new AtomicReference<>();
        Thread owner = Thread.ofPlatform().start(() -> {
            orphan.set(open(Sharing.CONFINED));
            bound.set(orphan.get().bind(memory));
        });
        owner.join(10_000);
        assertThat(orphan.get().ownerHasEnded()).isTrue();

        orphan.get().endOrHandOver();

        assertThat(orphan.get().isOpen()).isFalse();
        assertThat(registry.openScopes()).isZero();
        assertThat(buffer.isEmpty()).isTrue();
        assertThat(bound.get().scope().isAlive()).as("only its owner could have closed it; nobody can reach it now").isTrue();
    }

    @Test
    void aSharedScopeANativeCallHoldsStaysOpenAndIsRetriedOnTheNextCallIn() throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle nanosleep = linker.downcallHandle(linker.defaultLookup().find("nanosleep").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        MemoryScope scope = open(Sharing.SHARED);
        MemorySegment timespec = scope.bind(memory);
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

        assertThatThrownBy(scope::end).isInstanceOf(IllegalStateException.class)
                .hasMessage("the memory of this shared access is still in use by a native call; end the access once the call has returned")
                .hasCauseInstanceOf(IllegalStateException.class);
        assertThat(scope.isOpen()).isTrue();
        scope.endOrHandOver(); // left for a retry
        assertThat(scope.isOpen()).isTrue();

        sleeper.join(10_000);
        registry.endHandedOver();
        assertThat(scope.isOpen()).as("retried by the next call in").isFalse();
        assertThat(registry.openScopes()).isZero();
    }

    @Test
    void aViewScopeSaysWhoseItIs() {
        MemoryScope ofBuffer = registry.open(Kind.VIEW, Sharing.CONFINED, buffer);

        assertThat(ofBuffer).hasToString("VIEW of thread '" + Thread.currentThread().getName() + "'");
        registry.endAllOfCurrentThread();
    }
}
