package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.lifetime.BufferViews.Sharing;
import dev.compute.memory.lifetime.MemoryScope.Kind;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The open views and accesses of one buffer: what a close ends (its views; a collected buffer's accesses too), what it
 * leaves to other threads, and the release it runs exactly once, when the last scope has ended.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BufferScopesTest {

    private final ScopeRegistry registry = new ScopeRegistry();
    private final BufferScopes scopes = new BufferScopes();
    private final AtomicInteger releases = new AtomicInteger();
    private final AtomicInteger releasedUnderTheLock = new AtomicInteger();

    private void release() {
        releases.incrementAndGet();
        if (Thread.holdsLock(scopes)) {
            releasedUnderTheLock.incrementAndGet();
        }
    }

    /** A view scope of this thread, taken in {@code region} (null: outside any). */
    private MemoryScope view(ViewRegions.@Nullable Region region) {
        MemoryScope view = registry.open(Kind.VIEW, Sharing.CONFINED, scopes);
        view.region = region;
        return view;
    }

    private MemoryScope access(Sharing sharing) {
        return registry.open(Kind.ACCESS, sharing, scopes);
    }

    /** A view scope (region) of this thread, closed at once: only a key that views taken in it would carry. */
    private static ViewRegions.Region aRegion() {
        ViewRegions.Region region = ViewRegions.open();
        region.close();
        return region;
    }

    @Test
    void withNothingOpenTheReleaseRunsAtOnceAndOnce() {
        assertThat(scopes.isEmpty()).isTrue();

        scopes.closeViews(this::release);

        assertThat(releases).hasValue(1);
        MemoryScope later = access(Sharing.CONFINED);
        later.end();
        assertThat(releases).as("nothing was left waiting").hasValue(1);
    }

    @Test
    void aViewIsFoundByItsThreadAndTheViewScopeItWasTakenIn() throws Exception {
        ViewRegions.Region region = aRegion();
        MemoryScope outside = view(null);
        MemoryScope inRegion = view(region);
        access(Sharing.CONFINED);

        assertThat(scopes.viewOf(Thread.currentThread())).isSameAs(outside);
        assertThat(scopes.viewOf(Thread.currentThread(), region)).isSameAs(inRegion);
        assertThat(scopes.viewOf(Thread.currentThread(), aRegion())).as("another view scope").isNull();
        AtomicReference<MemoryScope> seenElsewhere = new AtomicReference<>(outside);
        Thread.ofPlatform().start(() -> seenElsewhere.set(scopes.viewOf(Thread.currentThread()))).join(10_000);
        assertThat(seenElsewhere.get()).as("another thread has no view").isNull();
        registry.endAllOfCurrentThread();
        assertThat(scopes.isEmpty()).isTrue();
    }

    @Test
    void closingTheBufferEndsItsViewsAndReleasesWhenTheLastAccessEnds() {
        MemoryScope view = view(null);
        MemoryScope access = access(Sharing.CONFINED);
        MemoryScope shared = access(Sharing.SHARED);

        scopes.closeViews(this::release);

        assertThat(view.isOpen()).isFalse();
        assertThat(access.isOpen()).as("an access is its holder's to end").isTrue();
        assertThat(shared.isOpen()).isTrue();
        access.end();
        assertThat(releases).hasValue(0);
        shared.end();
        assertThat(releases).hasValue(1);
        assertThat(releasedUnderTheLock).as("run outside the lock").hasValue(0);
    }

    @Test
    void aCollectedBuffersAccessesEndToo() {
        MemoryScope access = access(Sharing.CONFINED);
        MemoryScope shared = access(Sharing.SHARED);

        scopes.closeAll(this::release);

        assertThat(access.isOpen()).isFalse();
        assertThat(shared.isOpen()).isFalse();
        assertThat(releases).hasValue(1);
    }

    @Test
    void anAccessWhoseHolderHasEndedCannotBeEndedByItAndIsDropped() throws Exception {
        AtomicReference<MemoryScope> orphan = new AtomicReference<>();
        Thread holder = Thread.ofPlatform().start(() -> orphan.set(access(Sharing.CONFINED)));
        holder.join(10_000);

        scopes.closeViews(this::release);

        assertThat(orphan.get().isOpen()).isFalse();
        assertThat(releases).hasValue(1);
    }

    @Test
    void anotherThreadsViewIsHandedToItAndTheReleaseWaitsForIt() throws Exception {
        CountDownLatch opened = new CountDownLatch(1);
        CountDownLatch callIn = new CountDownLatch(1);
        AtomicReference<MemoryScope> theirs = new AtomicReference<>();
        Thread other = Thread.ofPlatform().start(() -> {
            theirs.set(view(null));
            opened.countDown();
            try {
                callIn.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            registry.endHandedOver();
        });
        assertThat(opened.await(10, TimeUnit.SECONDS)).isTrue();
        MemoryScope mine = view(null);

        scopes.closeViews(this::release);

        assertThat(mine.isOpen()).isFalse();
        assertThat(theirs.get().isOpen()).isTrue();
        assertThat(releases).hasValue(0);
        callIn.countDown();
        other.join(10_000);
        assertThat(theirs.get().isOpen()).isFalse();
        assertThat(releases).hasValue(1);
    }

    @Test
    void scopesEndedInAnyOrderLeaveTheOthersFoundAndReleaseOnceAtTheLast() {
        ViewRegions.Region first = aRegion();
        ViewRegions.Region second = aRegion();
        ViewRegions.Region third = aRegion();
        MemoryScope a = view(first);
        MemoryScope b = view(second);
        MemoryScope c = view(third);
        MemoryScope access = access(Sharing.CONFINED);
        Thread self = Thread.currentThread();

        b.end(); // from the middle of the list
        scopes.ended(b); // told twice: nothing else is unlinked, and nothing is released
        assertThat(scopes.viewOf(self, second)).isNull();
        assertThat(scopes.viewOf(self, first)).isSameAs(a);
        assertThat(scopes.viewOf(self, third)).isSameAs(c);
        access.end(); // the newest, at the head
        a.end(); // the oldest, at the tail
        assertThat(scopes.viewOf(self, third)).isSameAs(c);
        assertThat(scopes.isEmpty()).isFalse();

        scopes.closeViews(this::release);

        assertThat(c.isOpen()).isFalse();
        assertThat(scopes.isEmpty()).isTrue();
        assertThat(releases).hasValue(1);
        MemoryScope later = view(first);
        assertThat(scopes.viewOf(self, first)).isSameAs(later);
        later.end();
        assertThat(releases).as("the release was given once").hasValue(1);
    }
}
