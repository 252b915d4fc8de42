package dev.compute.memory.resource.pool;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.ThreadStripes;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The size-class cache's own contract, on bare blocks (no arena behind them, so nothing here depends on where the pool
 * places blocks): a block is cached on the stripe of the thread that adopted it, whoever frees it, and taken back only
 * by a thread of that stripe unless asked from the others; each class holds at most {@link SizeClassCache#DEPTH} blocks,
 * last in first out; a flush hands every cached block on and a close refuses more; the figures read nothing under a
 * lock. Threads caching and taking at once never get one block twice.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SizeClassCacheTest {

    private static final long KiB = 1024;

    private final SizeClassCache cache = new SizeClassCache();
    private final PoolSegment nowhere = PoolSegment.nowhere(MemoryLocation.DEVICE, null);

    /** A live block of {@code size} bytes, adopted by the calling thread. */
    private PoolBlock adopted(long size) {
        PoolBlock block = new PoolBlock(nowhere, 0, size, PoolBlock.LIVE);
        cache.adopt(block);
        return block;
    }

    /** Runs {@code action} on a thread whose stripe is not this thread's, and returns what it returned. */
    private static <T> T onAnotherStripe(Supplier<T> action) throws InterruptedException {
        int mine = ThreadStripes.ofCurrentThread();
        AtomicReference<T> result = new AtomicReference<>();
        for (int tries = 0; tries < 1_000; tries++) {
            AtomicReference<Boolean> ran = new AtomicReference<>(false);
            Thread thread = Thread.ofPlatform().start(() -> {
                if (ThreadStripes.ofCurrentThread() != mine) {
                    result.set(action.get());
                    ran.set(true);
                }
            });
            thread.join(10_000);
            if (ran.get()) {
                return result.get();
            }
        }
        throw new AssertionError("no thread on another stripe");
    }

    @Test
    void aBlockFreedIsTakenBackByItsThreadForTheNextRequestOfItsSize() {
        PoolBlock block = adopted(4 * KiB);

        assertThat(cache.take(4 * KiB, 4000)).as("nothing cached yet").isNull();
        assertThat(cache.offer(block)).isTrue();
        assertThat(block.state()).isEqualTo(PoolBlock.CACHED);
        assertThat(cache.take(8 * KiB, 8000)).as("another size class").isNull();

        PoolBlock taken = cache.take(4 * KiB, 3000);

        assertThat(taken).isSameAs(block);
        assertThat(taken.state()).isEqualTo(PoolBlock.LIVE);
        assertThat(taken.requestedSize()).isEqualTo(3000);
        assertThat(cache.hits()).isEqualTo(1);
        assertThat(cache.take(4 * KiB, 3000)).isNull();
    }

    @Test
    void onlyABlockOfAClassSetUpAndLiveIsCached() {
        PoolBlock notAdopted = new PoolBlock(nowhere, 0, 2 * KiB, PoolBlock.LIVE);
        assertThat(cache.offer(notAdopted)).as("no stack for its class yet").isFalse();

        PoolBlock block = adopted(2 * KiB);
        block.state = PoolBlock.PENDING;
        assertThat(cache.offer(block)).as("not live").isFalse();
        assertThat(block.state()).isEqualTo(PoolBlock.PENDING);
        assertThat(cache.offer(notAdopted)).as("its class is set up now").isTrue();
    }

    @Test
    void aClassHoldsAtMostItsDepthAndGivesTheLastCachedFirst() {
        List<PoolBlock> blocks = new ArrayList<>();
        for (int i = 0; i <= SizeClassCache.DEPTH; i++) {
            blocks.add(adopted(KiB));
        }
        for (int i = 0; i < SizeClassCache.DEPTH; i++) {
            assertThat(cache.offer(blocks.get(i))).isTrue();
        }

        assertThat(cache.offer(blocks.get(SizeClassCache.DEPTH))).as("full").isFalse();
        assertThat(blocks.get(SizeClassCache.DEPTH).state()).isEqualTo(PoolBlock.LIVE);
        for (int i = SizeClassCache.DEPTH - 1; i >= 0; i--) {
            assertThat(cache.take(KiB, KiB)).isSameAs(blocks.get(i));
        }
        assertThat(cache.take(KiB, KiB)).isNull();
    }

    @Test
    void aBlockGoesBackToTheStripeOfTheThreadThatAdoptedItWhoeverFreesIt() throws Exception {
        assumeTrue(ThreadStripes.COUNT > 1, "one stripe: every thread shares it");
        PoolBlock mine = adopted(4 * KiB);

        assertThat(onAnotherStripe(() -> cache.offer(mine))).isTrue();
        assertThat(onAnotherStripe(() -> cache.take(4 * KiB, 4 * KiB))).as("not from its own stripe").isNull();
        assertThat(cache.take(4 * KiB, 4 * KiB)).as("on the adopting thread's").isSameAs(mine);
    }

    @Test
    void anotherStripesBlocksAreTakenOnlyWhenAskedForAndThenAdopted() throws Exception {
        assumeTrue(ThreadStripes.COUNT > 1, "one stripe: every thread shares it");
        PoolBlock theirs = onAnotherStripe(() -> {
            PoolBlock block = adopted(4 * KiB);
            cache.offer(block);
            return block;
        });
        assertThat(cache.take(4 * KiB, 4 * KiB)).isNull();
        assertThat(cache.stripesKeeping()).as("this thread's and the one that cached").isEqualTo(2);

        PoolBlock taken = cache.takeFromOtherStripes(4 * KiB, 1000);

        assertThat(taken).isSameAs(theirs);
        assertThat(taken.requestedSize()).isEqualTo(1000);
        cache.adopt(taken);
        assertThat(cache.offer(taken)).isTrue();
        assertThat(cache.take(4 * KiB, 4 * KiB)).as("now this thread's").isSameAs(taken);
        assertThat(cache.takeFromOtherStripes(4 * KiB, 4 * KiB)).isNull();
    }

    @Test
    void aFlushHandsOnEveryCachedBlockAndTheFiguresFollow() {
        PoolBlock small = adopted(KiB);
        PoolBlock large = adopted(64 * KiB);
        cache.offer(small);
        cache.offer(large);
        assertThat(cache.largestCached()).isEqualTo(64 * KiB);
        assertThat(cache.stripesKeeping()).isEqualTo(1);

        List<PoolBlock> sunk = new ArrayList<>();
        cache.flush(sunk::add);

        assertThat(sunk).containsExactlyInAnyOrder(small, large);
        assertThat(cache.largestCached()).isZero();
        assertThat(cache.take(KiB, KiB)).isNull();
        List<PoolBlock> again = new ArrayList<>();
        cache.flush(again::add);
        assertThat(again).as("nothing twice").isEmpty();
        assertThat(cache.offer(small)).as("cached again after a flush").isFalse(); // still CACHED: the sink did not free it
        small.state = PoolBlock.LIVE;
        assertThat(cache.offer(small)).isTrue();
    }

    @Test
    void aClosedCacheHandsOnWhatItHeldAndTakesNothingMore() {
        PoolBlock block = adopted(KiB);
        PoolBlock later = adopted(KiB);
        cache.offer(block);

        List<PoolBlock> sunk = new ArrayList<>();
        cache.close(sunk::add);

        assertThat(sunk).containsExactly(block);
        assertThat(cache.offer(later)).isFalse();
        assertThat(later.state()).isEqualTo(PoolBlock.LIVE);
        assertThat(cache.take(KiB, KiB)).isNull();
    }

    @Test
    void threadsCachingAndTakingAtOnceNeverGetOneBlockTwice() throws Exception {
        int threads = 4;
        int blocksEach = 4;
        int rounds = 20_000;
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Set<PoolBlock> live = Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));
        List<PoolBlock> heldAtTheEnd = Collections.synchronizedList(new ArrayList<>());
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                List<PoolBlock> own = new ArrayList<>();
                try {
                    for (int i = 0; i < blocksEach; i++) {
                        synchronized (cache) { // adoption is under the pool's lock
                            own.add(adopted(2 * KiB));
                        }
                    }
                    start.await();
                    for (int i = 0; i < rounds; i++) {
                        if (!own.isEmpty() && !cache.offer(own.getLast())) {
                            continue;
                        }
                        if (!own.isEmpty()) {
                            own.removeLast();
                        }
                        PoolBlock taken = cache.take(2 * KiB, 2 * KiB);
                        if (taken == null) {
                            taken = cache.takeFromOtherStripes(2 * KiB, 2 * KiB);
                        }
                        if (taken != null) {
                            if (!live.add(taken)) {
                                throw new AssertionError("a block handed out twice at once");
                            }
                            assertThat(taken.state()).isEqualTo(PoolBlock.LIVE);
                            live.remove(taken);
                            own.addFirst(taken);
                        }
                    }
                } catch (Throwable e) {
                    failure.set(e);
                } finally {
                    heldAtTheEnd.addAll(own);
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(30_000);
            assertThat(worker.isAlive()).isFalse();
        }

        assertThat(failure.get()).isNull();
        List<PoolBlock> cached = new ArrayList<>();
        synchronized (cache) {
            cache.flush(cached::add);
        }
        assertThat(cached).allSatisfy(block -> assertThat(block.state()).isEqualTo(PoolBlock.CACHED));
        assertThat(heldAtTheEnd).allSatisfy(block -> assertThat(block.state()).isEqualTo(PoolBlock.LIVE));
        Set<PoolBlock> every = Collections.newSetFromMap(new IdentityHashMap<>());
        every.addAll(cached);
        every.addAll(heldAtTheEnd);
        assertThat(every).as("each block either cached or held, once").hasSize(threads * blocksEach)
                .hasSize(cached.size() + heldAtTheEnd.size());
    }
}
