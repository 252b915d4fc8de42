package dev.compute.memory.resource.pool;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The snapshot read a stretch at a time ({@link PoolSnapshotReader}) is the pool as it is at the reader's last hold:
 * compared, block for block, with a walk of the whole pool made within that hold, while the pool is changed between
 * the reader's holds in every way the pool's lock guards (splits, merges, maps and unmaps, trims that give segments
 * back, moves, device work that completes) and while another thread changes it.
 */
class PoolSnapshotReaderTest {

    private static final long MiB = 1L << 20;
    private static final long GiB = 1L << 30;

    private static CachingPoolResource pool(boolean expandable) {
        AddressSpaceBackend backend = new AddressSpaceBackend(64 * GiB, AddressSpaceBackend.DEFAULT_GRANULARITY, expandable);
        return new CachingPoolResource(new BackendResource(backend, MemoryLocation.DEVICE, 32 * GiB, "compute.memory.pooling.max-pool-size",
                PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE),
                expandable ? PoolSettings.expandable() : PoolSettings.plainSegments(), MemoryEventListener.NONE);
    }

    /** Large blocks (the fast path's cache changes small ones without the pool's lock, which no reader can see). */
    private static long largeSize(Random random) {
        return MiB + 1 + random.nextInt((int) (40 * MiB));
    }

    /** The live blocks and the pending ones (freed with device work in flight) of a test. */
    private record Held(List<Block> live, List<CompletableFuture<Void>> pending) {}

    /** One change of the pool, of any kind its lock guards. */
    private static void change(CachingPoolResource pool, Held held, Random random) {
        switch (random.nextInt(8)) {
            case 0, 1 -> held.live().add(pool.allocate(largeSize(random)));
            case 2, 3 -> {
                if (!held.live().isEmpty()) {
                    pool.deallocate(held.live().remove(random.nextInt(held.live().size())));
                }
            }
            case 4 -> {
                if (!held.live().isEmpty()) {
                    CompletableFuture<Void> work = new CompletableFuture<>();
                    pool.deallocate(held.live().remove(random.nextInt(held.live().size())), work);
                    held.pending().add(work);
                }
            }
            case 5 -> {
                if (!held.pending().isEmpty()) {
                    held.pending().remove(random.nextInt(held.pending().size())).complete(null);
                }
            }
            case 6 -> pool.trim(random.nextBoolean() ? 0 : 64 * MiB);
            default -> {
                List<Block> order = pool.compactionOrder();
                if (!order.isEmpty()) {
                    pool.relocate(order.get(random.nextInt(order.size())), (from, to) -> { });
                }
            }
        }
    }

    private static Held fill(CachingPoolResource pool, Random random, int blocks) {
        Held held = new Held(new ArrayList<>(), new ArrayList<>());
        for (int i = 0; i < blocks; i++) {
            held.live().add(pool.allocate(blocks > 500 ? MiB + 1 + random.nextInt((int) (2 * MiB)) : largeSize(random)));
        }
        for (int i = 0; i < blocks / 3; i++) {
            pool.deallocate(held.live().remove(random.nextInt(held.live().size())));
        }
        return held;
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void aReadIsThePoolAtItsLastHoldWhateverChangedBetweenItsHolds(boolean expandable) {
        for (long seed = 0; seed < 40; seed++) {
            Random random = new Random(seed);
            try (CachingPoolResource pool = pool(expandable)) {
                Held held = fill(pool, random, 60 + random.nextInt(60));
                AtomicInteger betweenHolds = new AtomicInteger();
                AtomicReference<List<MemorySnapshot.Segment>> atLastHold = new AtomicReference<>();
                int blocksPerHold = 1 + random.nextInt(6);
                int changesPerGap = 1 + random.nextInt(4);

                PoolSnapshotReader reader = new PoolSnapshotReader(pool, Long.MAX_VALUE, blocksPerHold, () -> {
                    betweenHolds.incrementAndGet();
                    for (int i = 0; i < changesPerGap; i++) {
                        change(pool, held, random);
                    }
                }, atLastHold::set);
                List<MemorySnapshot.Segment> read = reader.read();

                assertThat(betweenHolds.get()).as("seed %d: holds", seed).isGreaterThan(10);
                assertThat(reader.readUnderOneHold()).as("seed %d: fell back to one hold", seed).isFalse();
                assertThat(read).as("seed %d: the read against a walk within its last hold", seed).isEqualTo(atLastHold.get());
                assertThat(read).as("seed %d: the read against a walk now", seed).isEqualTo(pool.walkUnderLock());
                held.pending().forEach(work -> work.complete(null));
            }
        }
    }

    @Test
    void aReadHoldsTheLockForAStretchOfBlocksAtATime() {
        Random random = new Random(7);
        try (CachingPoolResource pool = pool(true)) {
            fill(pool, random, 3000);
            int blocks = pool.segments().stream().mapToInt(s -> s.blocks().size()).sum();
            AtomicInteger holds = new AtomicInteger(1);

            PoolSnapshotReader reader = new PoolSnapshotReader(pool, Long.MAX_VALUE, 100, holds::incrementAndGet, null);
            List<MemorySnapshot.Segment> read = reader.read();

            assertThat(reader.readUnderOneHold()).isFalse();
            assertThat(holds.get()).isGreaterThanOrEqualTo(blocks / 100);
            assertThat(read).isEqualTo(pool.walkUnderLock());
        }
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void readsWhileAnotherThreadChangesThePoolMatchAWalkWithinTheirLastHold(boolean expandable) throws InterruptedException {
        try (CachingPoolResource pool = pool(expandable)) {
            Held start = fill(pool, new Random(3), 400);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread changer = Thread.ofPlatform().start(() -> {
                Random random = new Random(11);
                Held held = new Held(new ArrayList<>(start.live()), new ArrayList<>());
                try {
                    while (!stop.get()) {
                        change(pool, held, random);
                    }
                    held.pending().forEach(work -> work.complete(null));
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            try {
                for (int i = 0; i < 200; i++) {
                    AtomicReference<List<MemorySnapshot.Segment>> atLastHold = new AtomicReference<>();
                    PoolSnapshotReader reader = new PoolSnapshotReader(pool, Long.MAX_VALUE, 1 + i % 7, Thread::yield, atLastHold::set);
                    List<MemorySnapshot.Segment> read = reader.read();
                    assertThat(reader.readUnderOneHold()).as("read %d fell back to one hold", i).isFalse();
                    assertThat(read).as("read %d", i).isEqualTo(atLastHold.get());
                }
            } finally {
                stop.set(true);
                changer.join();
            }
            assertThat(failed.get()).isNull();
        }
    }

    @Test
    void aReadOfAClosedPoolIsEmpty() {
        CachingPoolResource pool = pool(true);
        fill(pool, new Random(1), 20);
        pool.close();

        assertThat(pool.segments()).isEmpty();
    }
}
