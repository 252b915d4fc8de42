package dev.compute.memory.resource.pool;

import static dev.compute.memory.resource.pool.PoolFigures.figures;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.internal.ThreadStripes;
import java.time.Duration;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.MemoryResourceContract;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.ReservedRoom;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class CachingPoolResourceTest extends MemoryResourceContract {

    @Override
    protected MemoryResource create(BackendResource upstream) {
        return new CachingPoolResource(upstream, PoolSettings.expandable(), MemoryEventListener.NONE);
    }

    private static final long GiB = 1L << 30;

    private static CachingPoolResource pool(AddressSpaceBackend backend, long maxPoolSize, boolean expandable) {
        return new CachingPoolResource(new BackendResource(backend, MemoryLocation.DEVICE, maxPoolSize, "compute.memory.pooling.max-pool-size",
                PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE),
                expandable ? PoolSettings.expandable() : PoolSettings.plainSegments(), MemoryEventListener.NONE);
    }

    private static AddressSpaceBackend backend(long capacity, boolean pageMapping) {
        return new AddressSpaceBackend(capacity, AddressSpaceBackend.DEFAULT_GRANULARITY, pageMapping);
    }

    /** Mostly small sizes, some large ones, a few big ones: the mix of a training step. */
    private static long randomSize(Random random) {
        int kind = random.nextInt(10);
        if (kind < 6) {
            return 1 + random.nextInt((int) MiB);
        }
        if (kind < 9) {
            return MiB + random.nextInt((int) (12 * MiB));
        }
        return 12 * MiB + random.nextInt((int) (60 * MiB));
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void randomSequencesKeepEveryInvariant(boolean expandable) {
        long seed = ThreadLocalRandom.current().nextLong();
        Random random = new Random(seed);
        // room enough that pending blocks never have to be waited for (their work completes only when the test says)
        AddressSpaceBackend backend = backend(16 * GiB, true);
        CachingPoolResource pool = pool(backend, 16 * GiB, expandable);
        StatisticsResource statistics = new StatisticsResource(pool);
        List<Block> live = new ArrayList<>();
        List<CompletableFuture<Void>> inFlight = new ArrayList<>();
        try {
            for (int step = 0; step < 1_500; step++) {
                int action = random.nextInt(100);
                if (action < 5) {
                    List<Block> together = statistics.allocateAdjacent(new long[] {randomSize(random), randomSize(random), randomSize(random)});
                    if (together != null) {
                        live.addAll(together);
                    }
                } else if (action < 50 || live.isEmpty()) {
                    live.add(statistics.allocate(randomSize(random)));
                } else if (action < 85) {
                    statistics.deallocate(live.remove(random.nextInt(live.size())));
                } else if (action < 92) {
                    CompletableFuture<Void> work = new CompletableFuture<>();
                    inFlight.add(work);
                    statistics.deallocate(live.remove(random.nextInt(live.size())), work);
                } else if (action < 97 && !inFlight.isEmpty()) {
                    inFlight.remove(random.nextInt(inFlight.size())).complete(null);
                } else {
                    pool.trim(random.nextInt(4) == 0 ? 0 : random.nextLong(256 * MiB));
                }
                PoolInvariants.check(pool, statistics, backend, live);
            }
            inFlight.forEach(work -> work.complete(null));
            live.forEach(statistics::deallocate);
            live.clear();
            pool.trim(0);
            PoolInvariants.check(pool, statistics, backend, live);
            assertThat(figures(statistics, pool).reservedBytes()).as("nothing live, trimmed to nothing (seed %d)", seed).isZero();
            assertThat(backend.usedBytes()).isZero();
        } catch (AssertionError | RuntimeException e) {
            throw new AssertionError("random sequence with seed " + seed + " failed: " + e.getMessage(), e);
        } finally {
            statistics.close();
        }
        assertThat(backend.liveAllocations()).as("close gives every segment and range back").isZero();
    }

    /**
     * Random sequences at a cap they keep reaching (6 MiB), where requests take the other arena's free space and mapped
     * runs inside free blocks: every invariant holds after each step, and a refusal never reports a largest free block
     * that would have held the request (one did, with expandable segments, for a mapped run after a page given back).
     */
    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void randomSequencesAtTheCapKeepEveryInvariantAndRefuseOnlyWhatNoFreeBlockHolds(boolean expandable) {
        for (int sequence = 0; sequence < 3; sequence++) {
            long seed = ThreadLocalRandom.current().nextLong();
            Random random = new Random(seed);
            AddressSpaceBackend backend = backend(GiB, true);
            CachingPoolResource pool = new CachingPoolResource(new BackendResource(backend, MemoryLocation.DEVICE, 6 * MiB,
                    "compute.memory.pooling.max-pool-size", Duration.ofMillis(1), MemoryEventListener.NONE),
                    (expandable ? PoolSettings.expandable() : PoolSettings.plainSegments()).withDeviceWaitTimeout(Duration.ofMillis(1)),
                    MemoryEventListener.NONE);
            StatisticsResource statistics = new StatisticsResource(pool);
            List<Block> live = new ArrayList<>();
            List<CompletableFuture<Void>> inFlight = new ArrayList<>();
            try {
                for (int step = 0; step < 800; step++) {
                    int action = random.nextInt(100);
                    try {
                        if (action < 50 || live.isEmpty()) {
                            live.add(statistics.allocate(sizeUnderASmallCap(random)));
                        } else if (action < 80) {
                            statistics.deallocate(live.remove(random.nextInt(live.size())));
                        } else if (action < 85) {
                            CompletableFuture<Void> work = new CompletableFuture<>();
                            inFlight.add(work);
                            statistics.deallocate(live.remove(random.nextInt(live.size())), work);
                        } else if (action < 90 && !inFlight.isEmpty()) {
                            inFlight.remove(random.nextInt(inFlight.size())).complete(null);
                        } else if (action < 95) {
                            for (Block block : pool.compactionOrder()) {
                                if (pool.movable(block)) {
                                    pool.relocate(block, (from, to) -> {});
                                }
                            }
                        } else {
                            pool.trim(random.nextInt(2) == 0 ? 0 : random.nextLong(8 * MiB));
                        }
                    } catch (DeviceOutOfMemoryException refused) {
                        String message = refused.getMessage();
                        int at = message.indexOf("largest free block ") + "largest free block ".length();
                        long largestFree = Long.parseLong(message.substring(at, message.indexOf(' ', at)));
                        assertThat(largestFree).as(message).isLessThan(SizeClasses.round(refused.requestedBytes()));
                    }
                    PoolInvariants.check(pool, statistics, backend, live);
                }
                inFlight.forEach(work -> work.complete(null));
                live.forEach(statistics::deallocate);
                live.clear();
                pool.trim(0);
                PoolInvariants.check(pool, statistics, backend, live);
                assertThat(pool.reservedBytes()).isZero();
            } catch (AssertionError | RuntimeException e) {
                throw new AssertionError("random sequence at the cap with seed " + seed + " failed: " + e.getMessage(), e);
            } finally {
                statistics.close();
            }
        }
    }

    /** Small blocks, blocks over 1 MiB and a few up to 5 MiB: a cap of 6 MiB holds a handful. */
    private static long sizeUnderASmallCap(Random random) {
        int kind = random.nextInt(10);
        if (kind < 6) {
            return 1 + random.nextInt((int) MiB);
        }
        return kind < 9 ? MiB + 1 + random.nextInt((int) MiB) : 2 * MiB + random.nextInt((int) (3 * MiB));
    }

    @Test
    void threadsAllocatingAndFreeingAtRandomLeaveAConsistentPool() throws InterruptedException {
        AddressSpaceBackend backend = backend(8 * GiB, true);
        CachingPoolResource pool = pool(backend, 8 * GiB, true);
        StatisticsResource statistics = new StatisticsResource(pool);
        ConcurrentLinkedQueue<Block> shared = new ConcurrentLinkedQueue<>();
        AtomicInteger handedOver = new AtomicInteger();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long until = System.nanoTime() + 2_000_000_000L;
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            threads.add(Thread.ofPlatform().start(() -> {
                Random random = new Random();
                List<Block> mine = new ArrayList<>();
                try {
                    while (System.nanoTime() < until) {
                        int action = random.nextInt(10);
                        if (action < 5 || mine.isEmpty()) {
                            // few distinct sizes, so that frees and allocations meet on the fast path
                            long bytes = random.nextInt(4) == 0 ? randomSize(random) : 512L << random.nextInt(6);
                            mine.add(statistics.allocate(bytes));
                        } else if (action < 8) {
                            statistics.deallocate(mine.remove(random.nextInt(mine.size())));
                        } else if (action < 9) {
                            // bounded: the queue's length walks at random, and unbounded it now and then held the whole cap
                            if (handedOver.get() < 256) {
                                handedOver.incrementAndGet();
                                shared.add(mine.remove(random.nextInt(mine.size())));
                            }
                        } else {
                            // free a block another thread allocated
                            Block other = shared.poll();
                            if (other != null) {
                                handedOver.decrementAndGet();
                                statistics.deallocate(other);
                            }
                        }
                        if (mine.size() > 200) {
                            statistics.deallocate(mine.removeFirst());
                        }
                    }
                    shared.addAll(mine);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        for (Thread thread : threads) {
            joinWithin(thread);
        }
        assertThat(failure.get()).isNull();
        PoolInvariants.check(pool, statistics, backend, List.copyOf(shared));
        assertThat(figures(statistics, pool).poolHits()).as("most allocations were served from the pool").isGreaterThan(figures(statistics, pool).poolMisses());
        shared.forEach(statistics::deallocate);
        pool.trim(0);
        assertThat(figures(statistics, pool).reservedBytes()).isZero();
        assertThat(figures(statistics, pool).allocatedBytes()).isZero();
        statistics.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void outOfMemoryReleasesTheCacheAndRetries(boolean expandable) {
        AddressSpaceBackend backend = backend(100 * MiB, true);
        CachingPoolResource pool = pool(backend, GiB, expandable);
        // the small blocks' memory is cached in the small arena when the large one needs it
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < 160; i++) {
            blocks.add(pool.allocate(512 * 1024));
        }
        blocks.forEach(pool::deallocate);
        assertThat(figures(pool).reservedBytes()).as("freed blocks stay cached").isGreaterThanOrEqualTo(80 * MiB);

        Block big = pool.allocate(90 * MiB);

        assertThat(big.size()).isGreaterThanOrEqualTo(90 * MiB);
        assertThat(figures(pool).oomRetries()).isEqualTo(1);
        assertThat(backend.usedBytes()).isLessThanOrEqualTo(100 * MiB);
        pool.close();
    }

    /**
     * With plain segments, a small arena grown to 2 MiB segments holds one with a single 64 KiB block live and the rest
     * free, and the cap leaves no room for a block over 1 MiB to have a segment of its own: the block takes the small
     * arena's free space (refused before, the largest free block larger than the request), and a new segment is no
     * backend call; freed, its space is the small arena's again.
     */
    @Test
    void atTheCapALargeBlockTakesTheSmallArenasFreeSpace() {
        long grownTo = smallBlocksUntilA2MiBSegment(pool(backend(GiB, false), GiB, false), new ArrayList<>());
        CachingPoolResource pool = pool(backend(GiB, false), grownTo + MiB, false);
        List<Block> live = new ArrayList<>();
        assertThat(smallBlocksUntilA2MiBSegment(pool, live)).isEqualTo(grownTo);
        long calls = figures(pool).backendAllocations();

        Block large = pool.allocate(MiB + 1);

        assertThat(large.segment()).as("in the small arena's last segment").isEqualTo(live.getLast().segment());
        assertThat(figures(pool).backendAllocations()).isEqualTo(calls);
        assertThat(pool.reservedBytes()).isEqualTo(grownTo);
        pool.deallocate(large);
        assertThat(pool.allocate(MiB + 1).segment()).isEqualTo(live.getLast().segment());
        live.forEach(pool::deallocate);
        pool.close();
    }

    /**
     * With expandable segments, a free block whose first page was given back and whose mapped rest shares a page with a
     * live block: at the cap a request that the mapped rest holds takes it (refused before, while the error reported
     * that rest as the largest free block), and no page is mapped for it.
     */
    @Test
    void atTheCapARequestTakesAMappedRunInsideAFreeBlock() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, 6 * MiB, true);
        StatisticsResource statistics = new StatisticsResource(pool);
        Block first = statistics.allocate(2 * MiB);
        Block beside = statistics.allocate(3 * MiB / 2);
        Block last = statistics.allocate(5 * MiB / 2);
        statistics.deallocate(first);
        pool.trim(0); // the first page, wholly free, goes back
        statistics.deallocate(beside); // free from offset 0, its mapped part on the page it shares with the last block
        List<Block> live = new ArrayList<>(List.of(last, statistics.allocate(MiB), statistics.allocate(MiB))); // the small arena's page: the cap
        assertThat(pool.reservedBytes()).isEqualTo(6 * MiB);
        assertThat(pool.largestFreeBlockBytes()).isEqualTo(3 * MiB / 2);
        long calls = figures(pool).backendAllocations();

        Block taken = statistics.allocate(5 * MiB / 4);
        live.add(taken);

        assertThat(taken.segment()).isEqualTo(last.segment());
        assertThat(taken.offset()).as("on the mapped page before the last block").isEqualTo(2 * MiB);
        assertThat(figures(pool).backendAllocations()).isEqualTo(calls);
        PoolInvariants.check(pool, statistics, backend, live);
        live.forEach(statistics::deallocate);
        pool.trim(0);
        assertThat(pool.reservedBytes()).isZero();
        pool.close();
    }

    /**
     * With plain segments, a large block's segment has free space after it and the cap leaves no room for a small
     * arena's segment: a small request takes that free space (refused before, "largest free block" larger than it),
     * and gives it back to the large arena when freed, where a large request can have it whole again.
     */
    @Test
    void atTheCapASmallBlockTakesTheLargeArenasFreeSpace() {
        CachingPoolResource pool = pool(backend(GiB, false), 20 * MiB, false);
        Block large = pool.allocate(20 * MiB - 200 * 1024); // a 20 MiB segment of its own, under a 20 MiB cap
        long calls = figures(pool).backendAllocations();

        Block small = pool.allocate(64 * 1024);

        assertThat(small.segment()).as("the large block's segment").isEqualTo(large.segment());
        assertThat(figures(pool).backendAllocations()).isEqualTo(calls);
        pool.deallocate(small);
        assertThat(pool.allocate(200 * 1024).segment()).as("the free space whole again").isEqualTo(large.segment());
        pool.close();
    }

    /**
     * A small block that took the large arena's free space at the cap goes back to the large arena when freed, not to
     * the fast path's cache: from there the next request of its size on its thread, below the cap, took it again, and
     * held a 20 MiB plain segment for one block of 64 KiB, which no trim could give back (small blocks never move).
     */
    @Test
    void aSmallBlockThatTookTheLargeArenasSpaceAtTheCapIsNotCachedForRequestsBelowIt() {
        CachingPoolResource pool = pool(backend(GiB, false), 20 * MiB, false);
        Block large = pool.allocate(20 * MiB - 200 * 1024);
        Block small = pool.allocate(64 * 1024);
        assertThat(small.segment()).as("at the cap, in the large block's segment").isEqualTo(large.segment());
        pool.deallocate(small);
        pool.deallocate(large);

        Block again = pool.allocate(64 * 1024); // below the cap: nothing is live
        pool.trim(0);

        assertThat(again.segment()).as("a segment of the small arena").isNotEqualTo(large.segment());
        assertThat(pool.reservedBytes()).as("a small arena's first segment, not the 20 MiB one").isEqualTo(256 * 1024);
        pool.deallocate(again);
        pool.close();
    }

    /**
     * A small arena's plain segments grow with it, so that the last one's unused tail stays a small share of what it
     * holds: 256 KiB at first, then 1/32 of what its segments hold, in whole 64 KiB, 2 MiB at most; and a block larger
     * than that gets a segment of its own size.
     */
    @Test
    void aSmallArenasPlainSegmentsGrowWithItFrom256KiBTo2MiB() {
        CachingPoolResource pool = pool(backend(GiB, false), GiB, false);
        List<Block> live = new ArrayList<>();
        long held = 0;
        int segments = 0;
        while (held < 80 * MiB) {
            Block block = pool.allocate(64 * 1024);
            live.add(block);
            if (block.offset() == 0) {
                long expected = Math.clamp(Math.ceilDiv(held / 32, 64 * 1024) * 64 * 1024, 256 * 1024, 2 * MiB);
                assertThat(block.segment().sizeBytes()).as("segment %d, after %d bytes", segments, held).isEqualTo(expected);
                held += expected;
                segments++;
            }
        }
        assertThat(pool.reservedBytes()).isEqualTo(held);
        assertThat(segments).as("more calls than 40 segments of 2 MiB, while the arena is small").isBetween(41, 200);
        live.forEach(pool::deallocate);
        pool.close();

        CachingPoolResource fresh = pool(backend(GiB, false), GiB, false);
        Block large = fresh.allocate(700 * 1024 + 1);
        assertThat(large.segment().sizeBytes()).as("the block, in whole 64 KiB").isEqualTo(704 * 1024);
        fresh.deallocate(large);
        fresh.close();
    }

    /**
     * Allocates 64 KiB blocks, which fill a small arena's segments exactly, until one is the first of a 2 MiB segment (the
     * most a small arena's grow to); returns what the pool then reserves.
     */
    private static long smallBlocksUntilA2MiBSegment(CachingPoolResource pool, List<Block> live) {
        Block last;
        do {
            last = pool.allocate(64 * 1024);
            live.add(last);
        } while (last.segment().sizeBytes() < 2 * MiB);
        assertThat(last.offset()).as("the first of its segment: the ones before are full").isZero();
        return pool.reservedBytes();
    }

    @Test
    void aSegmentWhoseFreeTheBackendRefusedStaysThePoolsAndALaterTrimGivesItBack() {
        AddressSpaceBackend device = backend(64 * MiB, false);
        AtomicBoolean refuseNextFree = new AtomicBoolean();
        ComputeBackend refusing = (ComputeBackend) Proxy.newProxyInstance(ComputeBackend.class.getClassLoader(),
                new Class<?>[] {ComputeBackend.class}, (proxy, method, args) -> {
                    if (method.getName().equals("free") && refuseNextFree.getAndSet(false)) {
                        throw new IllegalStateException("the driver refuses this free"); // and frees nothing
                    }
                    try {
                        return method.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        CachingPoolResource pool = new CachingPoolResource(new BackendResource(refusing, MemoryLocation.DEVICE, GiB,
                "compute.memory.pooling.max-pool-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE),
                PoolSettings.plainSegments(), MemoryEventListener.NONE);
        pool.deallocate(pool.allocate(4 * MiB));
        long reserved = pool.reservedBytes();
        refuseNextFree.set(true);

        assertThatThrownBy(() -> pool.trim(0)).hasMessage("the driver refuses this free");
        assertThat(pool.reservedBytes()).as("not freed: still the pool's").isEqualTo(reserved).isEqualTo(device.usedBytes());

        assertThat(pool.trim(0)).as("given back by the next trim").isEqualTo(reserved);
        assertThat(device.usedBytes()).isZero();
        assertThat(pool.reservedBytes()).isZero();
        pool.close();
    }

    @Test
    void aTrimBesideAnotherWhoseFreesAreUnderWayGivesBackAllButWhatItKeeps() throws InterruptedException {
        AddressSpaceBackend device = backend(GiB, false);
        CountDownLatch secondFreeCalled = new CountDownLatch(1);
        CountDownLatch driverReturns = new CountDownLatch(1);
        ComputeBackend slow = slowFrees(device, 2, secondFreeCalled, driverReturns); // the first free has returned
        CachingPoolResource pool = new CachingPoolResource(new BackendResource(slow, MemoryLocation.DEVICE, GiB,
                "compute.memory.pooling.max-pool-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE),
                PoolSettings.plainSegments(), MemoryEventListener.NONE);
        Block[] blocks = {pool.allocate(64 * MiB), pool.allocate(64 * MiB), pool.allocate(64 * MiB)};
        for (Block block : blocks) {
            pool.deallocate(block);
        }
        long segment = pool.reservedBytes() / 3;
        AtomicLong releasedByFirst = new AtomicLong();
        Thread first = Thread.ofPlatform().start(() -> releasedByFirst.set(pool.trim(segment))); // two segments of three
        try {
            assertThat(secondFreeCalled.await(30, TimeUnit.SECONDS)).isTrue();

            assertThat(pool.trim(0)).as("the segment the first trim keeps, given back by the second").isEqualTo(segment);
        } finally {
            driverReturns.countDown();
            joinWithin(first);
        }
        assertThat(releasedByFirst.get()).isEqualTo(2 * segment);
        assertThat(pool.reservedBytes()).as("nothing cached once both trims are done").isZero().isEqualTo(device.usedBytes());
        pool.close();
    }

    /**
     * A segment a trim is giving back, its free still in the driver, shows in the memory map as RELEASING: it is not
     * FREE (nothing can be served from it, and the figures no longer count it cached), and it is gone once the free returns.
     */
    @Test
    void theMemoryMapShowsWhatATrimIsGivingBackAsReleasingNotFree() throws InterruptedException {
        AddressSpaceBackend device = backend(GiB, false);
        CountDownLatch freeCalled = new CountDownLatch(1);
        CountDownLatch driverReturns = new CountDownLatch(1);
        ComputeBackend slow = slowFrees(device, 0, freeCalled, driverReturns);
        CachingPoolResource pool = new CachingPoolResource(new BackendResource(slow, MemoryLocation.DEVICE, GiB,
                "compute.memory.pooling.max-pool-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE),
                PoolSettings.plainSegments(), MemoryEventListener.NONE);
        pool.deallocate(pool.allocate(64 * MiB));
        Thread trimming = Thread.ofPlatform().start(() -> pool.trim(0));
        try {
            assertThat(freeCalled.await(30, TimeUnit.SECONDS)).isTrue();

            assertThat(pool.segments()).singleElement().satisfies(segment -> assertThat(segment.blocks())
                    .extracting(MemorySnapshot.Block::state).containsOnly(MemorySnapshot.BlockState.RELEASING));
        } finally {
            driverReturns.countDown();
            joinWithin(trimming);
        }
        assertThat(pool.segments()).isEmpty();
        pool.close();
    }

    /** {@code device} whose {@code nth} free (from 1; 0: every one) says it was called and waits for {@code returns}, as a slow driver's. */
    private static ComputeBackend slowFrees(AddressSpaceBackend device, int nth, CountDownLatch called, CountDownLatch returns) {
        AtomicInteger frees = new AtomicInteger();
        return (ComputeBackend) Proxy.newProxyInstance(ComputeBackend.class.getClassLoader(),
                new Class<?>[] {ComputeBackend.class}, (proxy, method, args) -> {
                    if (method.getName().equals("free") && (nth == 0 || frees.incrementAndGet() == nth)) {
                        called.countDown();
                        returns.await();
                    }
                    try {
                        return method.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void anImpossibleRequestFailsWithTheFiguresAndLeavesThePoolWhole(boolean expandable) {
        AddressSpaceBackend backend = backend(64 * MiB, true);
        CachingPoolResource pool = pool(backend, GiB, expandable);
        StatisticsResource statistics = new StatisticsResource(pool);
        List<Block> live = new ArrayList<>(List.of(statistics.allocate(30 * MiB), statistics.allocate(1000)));
        statistics.deallocate(statistics.allocate(5 * MiB));

        assertThatThrownBy(() -> statistics.allocate(100 * MiB))
                .isInstanceOf(DeviceOutOfMemoryException.class)
                .hasMessageContaining("requested 104857600 bytes")
                .hasMessageContaining("bytes live (allocated)")
                .hasMessageContaining("bytes cached")
                .hasMessageContaining("bytes reserved")
                .hasMessageContaining("device free")
                .hasMessageContaining("largest free block")
                .satisfies(e -> assertThat(((DeviceOutOfMemoryException) e).requestedBytes()).isEqualTo(100 * MiB));

        PoolInvariants.check(pool, statistics, backend, live);
        live.add(statistics.allocate(20 * MiB));
        PoolInvariants.check(pool, statistics, backend, live);
        assertThat(figures(statistics, pool).oomRetries()).isEqualTo(1);
        statistics.close();
    }

    /**
     * A refusal's live figure is counted (what the arenas lent, less what the fast path's cache holds), not walked
     * block by block: it still counts every live block and none of those freed, cached first.
     */
    @Test
    void aRefusalSaysExactlyWhatIsLiveWithoutWalkingTheBlocks() {
        AddressSpaceBackend backend = backend(64 * MiB, true);
        CachingPoolResource pool = pool(backend, 16 * MiB, true);
        List<Block> live = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            live.add(pool.allocate(1000 + i % 3 * 700)); // three small classes
        }
        for (int i = 0; i < 12; i++) {
            pool.deallocate(live.removeLast()); // kept by the fast path's cache, not live
        }
        long liveBytes = live.stream().mapToLong(Block::size).sum();

        assertThatThrownBy(() -> pool.allocate(15 * MiB)).isInstanceOf(DeviceOutOfMemoryException.class)
                .hasMessageContaining("; " + liveBytes + " bytes live (allocated)");
        live.forEach(pool::deallocate);
        pool.close();
    }

    @Test
    void maxPoolSizeCapsReservedBytes() {
        AddressSpaceBackend backend = backend(4 * GiB, true);
        CachingPoolResource pool = pool(backend, 64 * MiB, true);
        List<Block> live = new ArrayList<>();
        assertThatThrownBy(() -> {
            while (true) {
                live.add(pool.allocate(3 * MiB));
                assertThat(figures(pool).reservedBytes()).isLessThanOrEqualTo(64 * MiB);
            }
        }).isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("max-pool-size");
        assertThat(live).hasSizeBetween(20, 21);
        assertThat(backend.usedBytes()).isLessThanOrEqualTo(64 * MiB);
        pool.close();
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void aRequestAboveTheCapFailsAtOnceAndLeavesTheCacheAsItIs(boolean expandable) {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, 64 * MiB, expandable);
        Block kept = pool.allocate(10 * MiB);
        pool.deallocate(pool.allocate(20 * MiB));
        pool.deallocate(pool.allocate(1000));
        PoolFigures before = figures(pool);
        List<MemorySnapshot.Segment> segmentsBefore = pool.segments();
        long callsBefore = backend.memoryCalls();
        assertThat(before.reservedBytes() - kept.size()).as("cached").isGreaterThanOrEqualTo(20 * MiB);

        assertThatThrownBy(() -> pool.allocate(64 * MiB + 1))
                .isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> assertThat(e.requestedBytes()).isEqualTo(64 * MiB + 1))
                .hasMessageContaining("requested " + (64 * MiB + 1) + " bytes")
                .hasMessageContaining("above compute.memory.pooling.max-pool-size (" + 64 * MiB + " bytes)");

        PoolFigures after = figures(pool);
        assertThat(backend.memoryCalls()).as("no backend call, no free").isEqualTo(callsBefore);
        assertThat(after.reservedBytes()).isEqualTo(before.reservedBytes());
        assertThat(after.oomRetries()).isZero();
        assertThat(pool.segments()).isEqualTo(segmentsBefore);
        pool.deallocate(kept);
        pool.close();
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void readingFiguresAndSegmentsLeavesACachedBlockInTheCache(boolean expandable) {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, expandable);
        Block small = pool.allocate(512);
        pool.deallocate(small);
        List<MemorySnapshot.Segment> segmentsBefore = pool.segments();
        PoolFigures before = figures(pool);
        long callsBefore = backend.memoryCalls();
        assertThat(blockAt(segmentsBefore, small)).as("the cached block shows as a free block of its own, not coalesced")
                .satisfies(block -> assertThat(block.state()).isEqualTo(MemorySnapshot.BlockState.FREE))
                .satisfies(block -> assertThat(block.sizeBytes()).isEqualTo(512));

        for (int scrape = 0; scrape < 10; scrape++) {
            for (int meter = 0; meter < 22; meter++) {
                figures(pool);
            }
            pool.segments();
        }

        assertThat(pool.segments()).isEqualTo(segmentsBefore);
        assertThat(figures(pool)).isEqualTo(before);
        Block again = pool.allocate(512);
        assertThat(again).as("the block cached, from the fast path").isSameAs(small);
        PoolFigures after = figures(pool);
        assertThat(after.poolHits()).isEqualTo(before.poolHits() + 1);
        assertThat(after.poolMisses()).isEqualTo(before.poolMisses());
        assertThat(backend.memoryCalls()).as("no backend call").isEqualTo(callsBefore);
        pool.close();
    }

    @Test
    void readingLeavesABlockWhoseWorkCompletedPendingUntilThePoolsNextCall() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        pool.deallocate(pool.allocate(4 * MiB), kernel);
        kernel.complete(null);

        figures(pool);
        assertThat(states(pool)).as("reading drains nothing").contains(MemorySnapshot.BlockState.PENDING);

        pool.deallocate(pool.allocate(4 * MiB));
        assertThat(states(pool)).doesNotContain(MemorySnapshot.BlockState.PENDING);
        pool.close();
    }

    @Test
    void aBlockFreedWithWorkInFlightIsNotReusedUntilTheWorkCompletes() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block first = pool.allocate(4 * MiB);
        CompletableFuture<Void> kernel = new CompletableFuture<>();

        pool.deallocate(first, kernel);

        assertThat(states(pool)).contains(MemorySnapshot.BlockState.PENDING);
        Block second = pool.allocate(4 * MiB);
        assertThat(second.offset()).as("the pending block is not handed out again").isNotEqualTo(first.offset());
        pool.deallocate(second);
        kernel.complete(null);
        Block third = pool.allocate(4 * MiB);
        assertThat(third.offset()).as("once the work is done the lowest fit is the old block").isEqualTo(first.offset());
        assertThat(states(pool)).doesNotContain(MemorySnapshot.BlockState.PENDING);
        pool.close();
    }

    @Test
    void closeWaitsForWorkInFlightBeforeGivingMemoryBack() throws InterruptedException {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        pool.deallocate(pool.allocate(4 * MiB), kernel);
        long[] usedWhenKernelEnded = new long[1];
        Thread device = Thread.ofPlatform().start(() -> {
            // the kernel ends once close waits on it
            awaitDependents(kernel, 1);
            usedWhenKernelEnded[0] = backend.usedBytes();
            kernel.complete(null);
        });

        pool.close();

        joinWithin(device);
        assertThat(usedWhenKernelEnded[0]).as("nothing was freed under the running kernel").isPositive();
        assertThat(backend.usedBytes()).isZero();
    }

    @Test
    void workThatNeverFinishesNeitherHangsTheCloseNorIsFreedUnder() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = new CachingPoolResource(new BackendResource(backend, MemoryLocation.DEVICE, GiB,
                "compute.memory.pooling.max-pool-size", Duration.ofMillis(200), MemoryEventListener.NONE),
                PoolSettings.expandable().withDeviceWaitTimeout(Duration.ofMillis(200)), MemoryEventListener.NONE);
        pool.deallocate(pool.allocate(4 * MiB), new CompletableFuture<>());
        long used = backend.usedBytes();
        long started = System.nanoTime();
        pool.close();
        assertThat((System.nanoTime() - started) / 1_000_000).as("close waited its bound, not forever").isBetween(150L, 5_000L);
        assertThat(backend.usedBytes()).as("the memory under the stuck work is kept").isEqualTo(used);
    }

    @Test
    void anAllocationThatNeedsMemoryStuckWorkHoldsFailsInTimeSayingSo() {
        AddressSpaceBackend backend = backend(32 * MiB, true);
        CachingPoolResource pool = new CachingPoolResource(new BackendResource(backend, MemoryLocation.DEVICE, GiB,
                "compute.memory.pooling.max-pool-size", Duration.ofMillis(200), MemoryEventListener.NONE),
                PoolSettings.expandable().withDeviceWaitTimeout(Duration.ofMillis(200)), MemoryEventListener.NONE);
        CompletableFuture<Void> stuck = new CompletableFuture<>();
        pool.deallocate(pool.allocate(24 * MiB), stuck);
        assertThatThrownBy(() -> pool.allocate(24 * MiB)).isInstanceOf(DeviceOutOfMemoryException.class)
                .hasMessageContaining("did not finish within 200 ms").hasMessageContaining("may be stuck");
        stuck.complete(null);
        pool.deallocate(pool.allocate(24 * MiB));
        pool.close();
    }

    @Test
    void anAllocationThatNeedsMemoryATrimStuckInTheDriverGivesBackFailsInTimeSayingSo() throws InterruptedException {
        whileATrimIsStuckInTheDriver(Duration.ofMillis(200), pool -> assertThatThrownBy(() -> pool.allocate(64 * MiB))
                .isInstanceOf(DeviceOutOfMemoryException.class)
                .hasMessageContaining("a trim giving back 67108864 bytes had not returned from the backend within 200 ms")
                .hasMessageNotContaining("0 freed block(s)"));
    }

    @Test
    void anInterruptedAllocationStopsWaitingForATrimInTheDriverAtOnce() throws InterruptedException {
        whileATrimIsStuckInTheDriver(Duration.ofMinutes(10), pool -> {
            CompletableFuture<Throwable> interruptedAllocation = CompletableFuture.supplyAsync(() -> {
                Thread.currentThread().interrupt();
                Throwable failure = catchThrowable(() -> pool.allocate(64 * MiB));
                return Thread.interrupted() ? failure : new AssertionError("the thread's interrupt was not kept", failure);
            }, runnable -> Thread.ofPlatform().start(runnable));
            assertThat(interruptedAllocation).as("the wait cut short by the interrupt, not the device wait timeout's 10 minutes")
                    .succeedsWithin(Duration.ofSeconds(30))
                    .satisfies(failure -> assertThat(failure).isInstanceOf(DeviceOutOfMemoryException.class)
                            .hasMessageContaining("the wait for a trim giving back 67108864 bytes was interrupted")
                            .hasMessageNotContaining("may be stuck"));
        });
    }

    /**
     * Runs {@code check} on a pool of plain segments (device wait {@code deviceWait}) whose 64 MiB of cached memory a trim
     * is giving back in a driver call that has not returned; then lets the driver return and checks the pool serves again.
     */
    private static void whileATrimIsStuckInTheDriver(Duration deviceWait, Consumer<CachingPoolResource> check) throws InterruptedException {
        CountDownLatch freeCalled = new CountDownLatch(1);
        CountDownLatch driverReturns = new CountDownLatch(1);
        ComputeBackend stuck = slowFrees(backend(GiB, false), 0, freeCalled, driverReturns);
        CachingPoolResource pool = new CachingPoolResource(new BackendResource(stuck, MemoryLocation.DEVICE, 96 * MiB,
                "compute.memory.pooling.max-pool-size", deviceWait, MemoryEventListener.NONE),
                PoolSettings.plainSegments().withDeviceWaitTimeout(deviceWait), MemoryEventListener.NONE);
        pool.deallocate(pool.allocate(64 * MiB));
        Thread trimming = Thread.ofPlatform().start(() -> pool.trim(0));
        try {
            assertThat(freeCalled.await(30, TimeUnit.SECONDS)).isTrue();
            check.accept(pool);
        } finally {
            driverReturns.countDown();
            joinWithin(trimming);
        }
        pool.deallocate(pool.allocate(64 * MiB));
        pool.close();
    }

    /**
     * An allocating thread that is interrupted (a request's thread its server cancels) does not wait for the device work
     * that freed memory waits on: the wait ends at once, and the allocation failed as {@code DEVICE_WORK_STUCK}, saying
     * the work "did not finish within 60000 ms" and "may be stuck", of a wait it never made and work that was running fine.
     */
    @Test
    void anInterruptedAllocationDoesNotCallDeviceWorkStuck() {
        AddressSpaceBackend backend = backend(32 * MiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        pool.deallocate(pool.allocate(24 * MiB), kernel);

        Thread.currentThread().interrupt();
        Throwable failure = catchThrowable(() -> pool.allocate(24 * MiB));
        boolean interrupted = Thread.interrupted();

        assertThat(interrupted).as("the thread's interrupt, kept").isTrue();
        assertThat(failure).isInstanceOfSatisfying(DeviceOutOfMemoryException.class,
                        e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.DEVICE_MEMORY))
                .hasMessageContaining("the wait for device work that 1 freed block(s) wait on was interrupted")
                .hasMessageNotContaining("may be stuck");
        kernel.complete(null);
        pool.deallocate(pool.allocate(24 * MiB));
        pool.close();
    }

    @Test
    void outOfMemoryWaitsForPendingBlocksBeforeGivingUp() throws InterruptedException {
        AddressSpaceBackend backend = backend(32 * MiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block held = pool.allocate(30 * MiB);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        pool.deallocate(held, kernel);
        Thread device = Thread.ofPlatform().start(() -> {
            // the device finishes once the allocation below waits for it (its join is the second dependent)
            awaitDependents(kernel, 2);
            kernel.complete(null);
        });

        Block again = pool.allocate(30 * MiB);

        assertThat(again.offset()).isEqualTo(held.offset());
        assertThat(figures(pool).oomRetries()).isEqualTo(1);
        joinWithin(device);
        pool.close();
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void blocksAskedForTogetherAreCarvedOneAfterAnotherFromARegionOfEachArenaAndFreedAlone(boolean expandable) {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, expandable);
        assertThat(pool.allocateAdjacent(new long[] {4096, 3 * MiB})).as("nothing held yet").isNull();
        pool.deallocate(pool.allocate(32 * MiB));
        pool.deallocate(pool.allocate(MiB));
        pool.trim(GiB); // flushes the small block out of the fast path's cache into its arena
        long calls = backend.memoryCalls();

        List<Block> together = pool.allocateAdjacent(new long[] {3 * MiB, 5000, 700, 12 * MiB});

        assertThat(together).isNotNull().extracting(Block::size).containsExactly(3 * MiB, 5120L, 1024L, 12 * MiB);
        assertThat(together).extracting(Block::requestedSize).containsExactly(3 * MiB, 5000L, 700L, 12 * MiB);
        assertThat(backend.memoryCalls()).isEqualTo(calls);
        assertThat(together.get(3).segment()).isSameAs(together.get(0).segment());
        assertThat(together.get(3).offset()).isEqualTo(together.get(0).offset() + together.get(0).size());
        assertThat(together.get(2).segment()).isSameAs(together.get(1).segment()).isNotSameAs(together.get(0).segment());
        assertThat(together.get(2).offset()).isEqualTo(together.get(1).offset() + together.get(1).size());

        pool.deallocate(together.get(0));
        Block reused = pool.allocate(3 * MiB);
        assertThat(reused.offset()).as("the freed first block, alone, is reused").isEqualTo(together.get(0).offset());
        assertThat(pool.allocateAdjacent(new long[] {64 * MiB})).as("no free region that large is held").isNull();
        assertThat(backend.memoryCalls()).isEqualTo(calls);
        pool.deallocate(reused);
        together.subList(1, 4).forEach(pool::deallocate);
        pool.trim(0);
        assertThat(pool.reservedBytes()).isZero();
        pool.close();
    }

    @Test
    void aSmallSizeFreedAndAskedForAgainComesBackWithoutABackendCall() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block first = pool.allocate(3000);
        pool.deallocate(first);
        long calls = backend.memoryCalls();

        Block again = pool.allocate(2900);

        assertThat(again).isSameAs(first);
        assertThat(again.size()).isEqualTo(3072);
        assertThat(again.requestedSize()).isEqualTo(2900);
        assertThat(backend.memoryCalls()).isEqualTo(calls);
        assertThat(figures(pool).poolHits()).isGreaterThanOrEqualTo(1);
        pool.close();
    }

    @Test
    void threadsFreeingEachOthersCachedSizesWhileAnotherTrimsLeaveAConsistentPool() throws InterruptedException {
        AddressSpaceBackend backend = backend(8 * GiB, true);
        CachingPoolResource pool = pool(backend, 8 * GiB, true);
        StatisticsResource statistics = new StatisticsResource(pool);
        // few small sizes, so that blocks go back and forth between the stripes of the threads that allocated them
        long[] sizes = {512, 3000, 4096, 65_536, 300_000, MiB};
        ConcurrentLinkedQueue<Block> handedOver = new ConcurrentLinkedQueue<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicInteger working = new AtomicInteger(4);
        long until = System.nanoTime() + 1_500_000_000L;
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            threads.add(Thread.ofPlatform().start(() -> {
                Random random = new Random();
                try {
                    while (System.nanoTime() < until) {
                        Block block = statistics.allocate(sizes[random.nextInt(sizes.length)]);
                        if (random.nextBoolean() && handedOver.size() < 64) {
                            handedOver.add(block); // another thread frees it
                        } else {
                            statistics.deallocate(block);
                        }
                        Block other = random.nextBoolean() ? handedOver.poll() : null;
                        if (other != null) {
                            statistics.deallocate(other);
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                } finally {
                    working.decrementAndGet();
                }
            }));
        }
        threads.add(Thread.ofPlatform().start(() -> {
            Random random = new Random();
            try {
                while (working.get() > 0) {
                    pool.trim(random.nextBoolean() ? 0 : random.nextLong(16 * MiB));
                    Thread.sleep(1);
                }
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            }
        }));
        for (Thread thread : threads) {
            joinWithin(thread);
        }

        assertThat(failure.get()).isNull();
        PoolInvariants.check(pool, statistics, backend, List.copyOf(handedOver));
        handedOver.forEach(statistics::deallocate);
        assertThat(statistics.counts().liveBlocks()).isZero();
        pool.trim(0);
        assertThat(figures(statistics, pool).reservedBytes()).as("every block came back, from whichever stripe held it").isZero();
        pool.close();
    }

    @Test
    void eachThreadKeepsItsOwnBlockOfASizeWhileTheArenaHasRoom() throws InterruptedException {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block mine = pool.allocate(3000);
        pool.deallocate(mine);
        List<Block> theirs = new ArrayList<>();
        runOnAnotherStripe(() -> {
            for (int round = 0; round < 2; round++) {
                Block block = pool.allocate(3000);
                theirs.add(block);
                pool.deallocate(block);
            }
        });

        assertThat(theirs.getFirst()).as("the other thread took a block of its own from the arena, not this thread's").isNotSameAs(mine);
        assertThat(theirs.getLast()).as("and found it again on its own stripe").isSameAs(theirs.getFirst());
        assertThat(pool.allocate(3000)).as("this thread's block stayed on this thread's stripe").isSameAs(mine);
        pool.close();
    }

    @Test
    void aBlockFreedOnAnotherThreadGoesBackToTheStripeOfTheThreadThatAllocatedIt() throws InterruptedException {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block block = pool.allocate(3000);
        runOnAnotherStripe(() -> pool.deallocate(block));

        assertThat(pool.allocate(3000)).as("a consumer's free caches the block where its producer looks").isSameAs(block);
        pool.close();
    }

    @Test
    void belowTheAllowanceAThreadGrowsRatherThanTakeAnotherThreadsCachedBlock() throws InterruptedException {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, false);
        // blocks of 1 MiB take a plain segment each (a small arena's first are no larger): the arena has no free space left
        Block cached = pool.allocate(MiB);
        Block live = pool.allocate(MiB);
        pool.deallocate(cached);
        long calls = backend.memoryCalls();
        AtomicReference<Block> taken = new AtomicReference<>();
        runOnAnotherStripe(() -> taken.set(pool.allocate(MiB)));

        assertThat(taken.get()).as("a block of the other thread's own").isNotSameAs(cached).isNotSameAs(live);
        assertThat(backend.memoryCalls()).as("from a new segment").isEqualTo(calls + 1);
        assertThat(pool.allocate(MiB)).as("this thread's block stayed on this thread's stripe").isSameAs(cached);
        pool.close();
    }

    @Test
    void onceSmallBlocksHoldTheAllowanceAThreadTakesAnotherThreadsCachedBlockRatherThanGrow() throws InterruptedException {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, false);
        // blocks of 1 MiB past the allowance of two stripes, in plain segments whose free tails are under 1 MiB until
        // they hold two: the arena has no free space left for one
        List<Block> live = new ArrayList<>();
        while (figures(pool).reservedBytes() <= 2 * CachingPoolResource.SMALL_BLOCKS_KEPT_UNFLUSHED) {
            live.add(pool.allocate(MiB));
            live.add(pool.allocate(MiB));
        }
        Block cached = live.removeLast();
        pool.deallocate(cached);
        long calls = backend.memoryCalls();
        AtomicReference<Block> taken = new AtomicReference<>();
        runOnAnotherStripe(() -> taken.set(pool.allocate(MiB)));

        assertThat(taken.get()).as("the block cached on this thread's stripe").isSameAs(cached);
        assertThat(backend.memoryCalls()).as("no new segment").isEqualTo(calls);
        assertThat(figures(pool).poolHits()).isGreaterThanOrEqualTo(1);
        live.forEach(pool::deallocate);
        pool.close();
    }

    /** Joins a test's thread, failing the test rather than hanging the build when it does not end. */
    private static void joinWithin(Thread thread) throws InterruptedException {
        thread.join(Duration.ofSeconds(60));
        assertThat(thread.isAlive()).as("thread %s did not end within 60 s", thread.getName()).isFalse();
    }

    /**
     * Waits, on a stand-in for the device, until {@code dependents} wait on the kernel; after 10 s it gives up, so that
     * the kernel completes anyway and the test fails on what it checks instead of hanging.
     */
    private static void awaitDependents(CompletableFuture<Void> kernel, int dependents) {
        long until = System.nanoTime() + 10_000_000_000L;
        while (kernel.getNumberOfDependents() < dependents && System.nanoTime() < until) {
            Thread.onSpinWait();
        }
    }

    /** Runs {@code task} to its end on a thread whose stripe of the size-class cache is not the calling thread's. */
    private static void runOnAnotherStripe(Runnable task) throws InterruptedException {
        Thread thread = threadOnAnotherStripe(task);
        thread.start();
        joinWithin(thread);
    }

    /**
     * A thread whose stripe of the size-class cache is not the calling thread's: as {@link ThreadStripes} maps its id now,
     * not as ids start (a contended thread of an earlier test in this JVM may have moved a bucket: the test that used the
     * starting mapping failed once in a full run, the other thread landing on this one's stripe).
     */
    private static Thread threadOnAnotherStripe(Runnable task) {
        int mine = ThreadStripes.ofCurrentThread();
        for (int tries = 0; tries < 1000; tries++) {
            Thread thread = Thread.ofPlatform().unstarted(task);
            if (ThreadStripes.of(thread.threadId()) != mine) {
                return thread;
            }
        }
        throw new AssertionError("no thread id fell on another stripe");
    }

    @Test
    void recurringSmallSizesStayCachedWhileSmallBlocksHoldLessThanTheAllowance() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        // 100 sizes, about 10 MiB in all: far more than the first mapping, well under the allowance
        long[] sizes = new long[100];
        for (int i = 0; i < sizes.length; i++) {
            sizes[i] = 100_000 + 512L * i;
        }
        Block[] firstRound = new Block[sizes.length];
        for (int i = 0; i < sizes.length; i++) {
            firstRound[i] = pool.allocate(sizes[i]);
            pool.deallocate(firstRound[i]);
        }
        long calls = backend.memoryCalls();

        for (int i = 0; i < sizes.length; i++) {
            Block again = pool.allocate(sizes[i]);
            assertThat(again).as("size %d comes back from the cache, not from a flushed and coalesced arena", sizes[i]).isSameAs(firstRound[i]);
            pool.deallocate(again);
        }

        assertThat(backend.memoryCalls()).as("the second round made no backend call").isEqualTo(calls);
        assertThat(figures(pool).reservedBytes()).isLessThan(CachingPoolResource.SMALL_BLOCKS_KEPT_UNFLUSHED);
        pool.close();
    }

    @Test
    void twoThreadsWalkingTheSameRecurringSizesKeepAnAllowanceEach() throws Exception {
        assumeTrue(Runtime.getRuntime().availableProcessors() >= 2, "the allowance counts once per thread stripe up to one per processor");
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        // 80 sizes, about 22 MiB in all, for each thread: together past one allowance, within two
        long[] sizes = new long[80];
        for (int i = 0; i < sizes.length; i++) {
            sizes[i] = 200_000 + 2048L * i;
        }
        Block[] mine = new Block[sizes.length];
        Block[] theirs = new Block[sizes.length];
        try (ExecutorService other = Executors.newSingleThreadExecutor(CachingPoolResourceTest::threadOnAnotherStripe)) {
            walk(pool, sizes, mine);
            other.submit(() -> walk(pool, sizes, theirs)).get();
            assertThat(theirs).as("the other thread grew blocks of its own rather than take this thread's").doesNotContainAnyElementsOf(List.of(mine));
            long calls = backend.memoryCalls();
            Block[] myFirst = mine.clone();
            Block[] theirFirst = theirs.clone();

            walk(pool, sizes, mine);
            other.submit(() -> walk(pool, sizes, theirs)).get();

            assertThat(mine).as("this thread's sizes came back from its stripe, not flushed by the other thread's growth").containsExactly(myFirst);
            assertThat(theirs).as("and the other thread's from its own").containsExactly(theirFirst);
            assertThat(backend.memoryCalls()).as("the second rounds made no backend call").isEqualTo(calls);
        }
        pool.close();
    }

    /**
     * A request under a reservation whose budget has closed (one under way as the close came, served after it) takes its
     * memory from the shared arenas: arenas made for a reservation that no longer stands would never be dropped, each
     * holding an address range, until the manager closed.
     */
    @Test
    void aRequestUnderAReservationNoLongerStandingTakesTheSharedArenas() {
        AddressSpaceBackend backend = backend(GiB, true);
        BackendResource upstream = new BackendResource(backend, MemoryLocation.DEVICE, GiB, "compute.memory.pooling.max-pool-size",
                PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE);
        AtomicReference<Object> mark = new AtomicReference<>();
        upstream.keepAside(new ReservedRoom() {
            @Override
            public Map<Object, Long> reservations() {
                return Map.of(); // closed: it reserves nothing any more
            }

            @Override
            public Object reservingBudget() {
                return mark.get(); // the thread's mark, set before the close, still names it
            }
        });
        CachingPoolResource pool = new CachingPoolResource(upstream, PoolSettings.expandable(), MemoryEventListener.NONE);
        pool.deallocate(pool.allocate(4 * MiB)); // no one's: the shared large arena reserves its range
        mark.set(new Object());
        pool.deallocate(pool.allocate(4 * MiB));
        assertThat(pool.segments()).as("one range, the shared large arena's").hasSize(1);
        pool.close();
    }

    /**
     * What a reservation's arenas hold free is their memory less their blocks in use, kept as a running count (walking
     * the blocks held the lock 3.6 ms a read with 100,000 of them): right after every step of a churn of requests,
     * batches, frees with device work pending and its completion, and compaction's moves, with plain segments and mapped
     * pages alike.
     */
    @Test
    void aReservationsFreeBytesFollowItsBlocksThroughChurnBatchesPendingFreesAndMoves() {
        for (boolean expandable : new boolean[] {false, true}) {
            BackendResource upstream = new BackendResource(backend(GiB, expandable), MemoryLocation.DEVICE, GiB,
                    "compute.memory.pooling.max-pool-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE);
            Object reservation = new Object();
            upstream.keepAside(new ReservedRoom() {
                @Override
                public Map<Object, Long> reservations() {
                    return Map.of(reservation, 256 * MiB);
                }

                @Override
                public Object reservingBudget() {
                    return reservation;
                }
            });
            CachingPoolResource pool = new CachingPoolResource(upstream, expandable ? PoolSettings.expandable() : PoolSettings.plainSegments(),
                    MemoryEventListener.NONE);
            Random random = new Random(53);
            List<Block> live = new ArrayList<>();
            Map<Block, CompletableFuture<Void>> pending = new LinkedHashMap<>();
            for (int step = 0; step < 3_000; step++) {
                int what = random.nextInt(12);
                if (what < 5 && live.size() > 60) {
                    pool.deallocate(live.remove(random.nextInt(live.size()))); // within the device
                } else if (what < 5) {
                    live.add(pool.allocate(randomSize(random)));
                } else if (what == 5) {
                    List<Block> batch = pool.allocateAdjacent(new long[] {4096, 70_000, MiB + 12_345});
                    if (batch != null) {
                        live.addAll(batch);
                    }
                } else if (what < 9 && !live.isEmpty()) {
                    pool.deallocate(live.remove(random.nextInt(live.size())));
                } else if (what == 9 && !live.isEmpty()) {
                    Block block = live.remove(random.nextInt(live.size()));
                    CompletableFuture<Void> work = new CompletableFuture<>();
                    pool.deallocate(block, work);
                    pending.put(block, work);
                } else if (what == 10 && !pending.isEmpty()) {
                    Block done = pending.keySet().iterator().next();
                    pending.remove(done).complete(null);
                } else if (what == 11) {
                    for (Block block : pool.compactionOrder()) {
                        pool.relocate(block, (from, to) -> { }); // a block moved is the same block at its new place
                    }
                }
                long inUse = 0;
                for (Block block : live) {
                    inUse += block.size();
                }
                for (Block block : pending.keySet()) {
                    inUse += block.size();
                }
                pool.deallocate(pool.allocate(512)); // frees the blocks whose device work completed, as every next call does
                assertThat(pool.reservationsCachedBytes()).as("plain segments: %s, step %d", !expandable, step)
                        .isEqualTo(pool.reservedBytes() - inUse);
            }
            pool.close();
        }
    }

    /** Allocates and frees each size in turn, keeping what each allocation returned. */
    private static void walk(CachingPoolResource pool, long[] sizes, Block[] blocks) {
        for (int i = 0; i < sizes.length; i++) {
            blocks[i] = pool.allocate(sizes[i]);
            pool.deallocate(blocks[i]);
        }
    }

    @Test
    void beyondTheAllowanceSmallBlocksAreFlushedRatherThanGrow() {
        AddressSpaceBackend backend = backend(4 * GiB, true);
        CachingPoolResource pool = pool(backend, 4 * GiB, true);
        // 1000 distinct sizes of 512 KiB to 1 MiB, one live at a time: about 750 MiB if each stayed cached
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < 1000; i++) {
                pool.deallocate(pool.allocate(512 * 1024 + 512L * i));
            }
        }

        assertThat(figures(pool).reservedBytes()).as("the allowance, a growth chunk and one block at most")
                .isLessThanOrEqualTo(CachingPoolResource.SMALL_BLOCKS_KEPT_UNFLUSHED + 8 * MiB);
        pool.close();
    }

    /** The worked example of {@link CachingPoolResource}'s class comment, step by step. */
    @Test
    void theWorkedExampleOfTheClassComment() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);

        Block a = pool.allocate(3_000_000);
        assertThat(a.size()).isEqualTo(3_000_320);
        assertThat(a.offset()).isZero();
        assertThat(backend.mapCalls()).isEqualTo(1);
        assertThat(backend.usedBytes()).isEqualTo(4 * MiB);

        Block b = pool.allocate(5 * MiB);
        assertThat(b.offset()).isEqualTo(3_000_320);
        assertThat(backend.mapCalls()).isEqualTo(2);
        assertThat(backend.usedBytes()).isEqualTo(8 * MiB);

        pool.deallocate(a);
        Block c = pool.allocate(2_500_000);
        assertThat(c.size()).isEqualTo(2_500_096);
        assertThat(c.offset()).isZero();
        assertThat(backend.mapCalls()).as("mapped free pages are reused").isEqualTo(2);

        pool.deallocate(b);
        assertThat(pool.trim(0)).isEqualTo(4 * MiB);
        assertThat(backend.unmapCalls()).isEqualTo(1);
        assertThat(backend.usedBytes()).isEqualTo(4 * MiB);
        MemorySnapshot.Segment range = pool.segments().stream().filter(s -> s.address() == c.segment().address()).findFirst().orElseThrow();
        assertThat(range.expandable()).isTrue();
        assertThat(range.blocks()).extracting(MemorySnapshot.Block::state).containsExactly(
                MemorySnapshot.BlockState.LIVE, MemorySnapshot.BlockState.FREE, MemorySnapshot.BlockState.UNMAPPED);
        assertThat(range.blocks().get(1).offset()).isEqualTo(2_500_096);
        assertThat(range.blocks().get(2).offset()).isEqualTo(4 * MiB);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void aBlockTakesMappedFreeSpaceRatherThanABetterFitWhosePagesAreUnmapped() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block a = pool.allocate(8 * MiB);
        Block b = pool.allocate(8 * MiB);
        Block c = pool.allocate(8 * MiB);
        pool.deallocate(a);
        pool.trim(0);
        pool.deallocate(c);
        long mapCalls = backend.mapCalls();

        // free: a's 8 MiB at offset 0, unmapped (the best fit by size), and from c's offset on, c's pages still mapped
        Block d = pool.allocate(6 * MiB);

        assertThat(d.offset()).as("placed where the pages are mapped").isEqualTo(16 * MiB);
        assertThat(backend.mapCalls()).as("a pool hit, no backend call").isEqualTo(mapCalls);
        pool.deallocate(b);
        pool.deallocate(d);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void aLargeBlockTakesMappedFreeSpaceOfTheSmallArenaRatherThanMapPages() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        List<Block> small = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            small.add(pool.allocate(MiB));
        }
        long smallRange = small.getFirst().segment().address();
        small.forEach(pool::deallocate);
        long mapCalls = backend.mapCalls();
        long reserved = pool.reservedBytes();

        Block large = pool.allocate(3 * MiB);

        assertThat(large.segment().address()).as("carved from the small arena's range").isEqualTo(smallRange);
        assertThat(backend.mapCalls()).isEqualTo(mapCalls);
        assertThat(pool.reservedBytes()).isEqualTo(reserved);
        Block next = pool.allocate(MiB);
        assertThat(next.offset()).as("small blocks go around it").isGreaterThanOrEqualTo(large.offset() + large.size());
        pool.deallocate(large);
        pool.deallocate(next);
        assertThat(pool.trim(0)).as("freed into the small arena, whose pages a trim gives back").isEqualTo(reserved);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void growthMapsLargeChunksAndUnmapsFreePagesOnTrim() {
        AddressSpaceBackend backend = backend(4 * GiB, true);
        CachingPoolResource pool = pool(backend, 4 * GiB, true);
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            blocks.add(pool.allocate(5 * MiB + 1000));
        }
        assertThat(backend.mapCalls()).as("1000 MiB in 200 blocks mapped in chunks, not per block").isLessThan(50);
        blocks.forEach(pool::deallocate);
        pool.trim(100 * MiB);
        assertThat(backend.usedBytes()).as("a trim keeps what it is told to keep").isBetween(98 * MiB, 100 * MiB);
        pool.trim(0);
        assertThat(backend.usedBytes()).isZero();
        assertThat(pool.segments()).allSatisfy(segment -> assertThat(segment.blocks())
                .extracting(MemorySnapshot.Block::state).containsOnly(MemorySnapshot.BlockState.UNMAPPED));
        pool.close();
    }

    @Test
    void beforeANewPeakAtMostTheTwoLargestRunsOfFreePagesAreUnmapped() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        List<Block> holes = new ArrayList<>();
        List<Block> kept = new ArrayList<>();
        for (long hole : new long[] {8 * MiB, 10 * MiB, 12 * MiB}) {
            holes.add(pool.allocate(hole));
            kept.add(pool.allocate(2 * MiB));
        }
        holes.forEach(pool::deallocate);
        assertThat(pool.reservedBytes()).as("nothing unmapped yet: at the peak").isEqualTo(pool.reservedBytesPeak());
        long unmapCalls = backend.unmapCalls();

        // needs more pages than the three holes hold together
        Block large = pool.allocate(40 * MiB);

        assertThat(backend.unmapCalls() - unmapCalls).isEqualTo(2);
        List<MemorySnapshot.Segment> segments = pool.segments();
        assertThat(blockAt(segments, holes.get(0)).state()).as("the smallest hole stays mapped").isEqualTo(MemorySnapshot.BlockState.FREE);
        assertThat(blockAt(segments, holes.get(1)).state()).isEqualTo(MemorySnapshot.BlockState.UNMAPPED);
        assertThat(blockAt(segments, holes.get(2)).state()).isEqualTo(MemorySnapshot.BlockState.UNMAPPED);
        pool.deallocate(large);
        kept.forEach(pool::deallocate);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void inAnArenaHoldingIdleMappedPagesTheSlackRaisesThePeakByAQuarterChunkAtMost() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        List<Block> holes = new ArrayList<>();
        List<Block> kept = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            holes.add(pool.allocate(2 * MiB));
            kept.add(pool.allocate(2 * MiB));
        }
        // the mapped slack at the top, taken too, so that the next block needs pages mapped
        MemorySnapshot.Block top = pool.segments().getFirst().blocks().stream()
                .filter(b -> b.state() == MemorySnapshot.BlockState.FREE).reduce((a, b) -> b).orElseThrow();
        kept.add(pool.allocate(top.sizeBytes()));
        holes.forEach(pool::deallocate);
        long peak = pool.reservedBytesPeak();
        long chunk = pool.reservedBytes() >> PoolArena.MAP_CHUNK_SHIFT;
        assertThat(pool.reservedBytes()).isEqualTo(peak);

        // fits none of the 40 holes (80 MiB idle and mapped, more than two chunks)
        Block block = pool.allocate(4 * MiB);

        assertThat(pool.reservedBytesPeak() - peak).isPositive().isLessThanOrEqualTo(chunk >> PoolArena.SLACK_OVER_PEAK_SHIFT);
        assertThat(blockAt(pool.segments(), block).state()).isEqualTo(MemorySnapshot.BlockState.LIVE);
        pool.deallocate(block);
        kept.forEach(pool::deallocate);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void aRiseOfThePeakSmallerThanWhatAMapCallBroughtMovesNoPages() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block hole = pool.allocate(8 * MiB);
        List<Block> kept = withMappedSlackAtTheTopTaken(pool, pool.allocate(64 * MiB));
        pool.deallocate(hole);
        long peak = pool.reservedBytesPeak();
        long unmapCalls = backend.unmapCalls();
        assertThat(pool.reservedBytes()).isEqualTo(peak);
        assertThat(10 * MiB).as("the rise, against the bytes a map call brought").isLessThanOrEqualTo(peak / backend.mapCalls());

        // fits not the 8 MiB hole: its pages are mapped anew, 10 MiB over the peak
        Block block = pool.allocate(10 * MiB);

        assertThat(backend.unmapCalls()).as("the hole's pages are not moved").isEqualTo(unmapCalls);
        assertThat(blockAt(pool.segments(), hole).state()).isEqualTo(MemorySnapshot.BlockState.FREE);
        assertThat(pool.reservedBytesPeak()).isGreaterThanOrEqualTo(peak + 10 * MiB);
        pool.deallocate(block);
        kept.forEach(pool::deallocate);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void aMappingAfterAMoveTakesNoSlackOverThePeak() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block base = pool.allocate(256 * MiB);
        for (int i = 0; i < 30; i++) {
            // map calls that bring little: a map call's average falls below the rise to come
            pool.deallocate(pool.allocate(2 * MiB));
            pool.trim(0);
        }
        Block hole = pool.allocate(8 * MiB);
        List<Block> kept = withMappedSlackAtTheTopTaken(pool, base);
        pool.deallocate(hole);
        long peak = pool.reservedBytesPeak();
        long unmapCalls = backend.unmapCalls();
        assertThat(pool.reservedBytes()).isEqualTo(peak);
        assertThat(16 * MiB).as("the rise, against the bytes a map call brought").isGreaterThan(peak / backend.mapCalls());

        // fits not the 8 MiB hole: its pages move to the new block, which needs 8 MiB more; a chunk (1/8 of what is
        // mapped) would be larger than the block
        Block block = pool.allocate(16 * MiB);

        assertThat(backend.unmapCalls() - unmapCalls).as("the hole's pages are moved").isEqualTo(1);
        assertThat(pool.reservedBytesPeak()).as("the peak rises by what the move lacked, no slack").isEqualTo(peak + 8 * MiB);
        assertThat(pool.reservedBytes()).isEqualTo(pool.reservedBytesPeak());
        pool.deallocate(block);
        kept.forEach(pool::deallocate);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void onceTheMovesHaveUnmappedTheirShareOfTheMapCallsARiseWorthACallMovesNoPages() {
        AddressSpaceBackend backend = backend(4 * GiB, true);
        CachingPoolResource pool = pool(backend, 4 * GiB, true);
        Block base = pool.allocate(256 * MiB);
        for (int i = 0; i < 30; i++) {
            // map calls that bring little: a map call's average falls below the rises to come
            pool.deallocate(pool.allocate(2 * MiB));
            pool.trim(0);
        }
        List<Block> kept = new ArrayList<>(List.of(base));
        long moveUnmaps = 0;
        boolean heldByTheBudget = false;
        for (int step = 0; step < 40 && !heldByTheBudget; step++) {
            Block hole = pool.allocate(8 * MiB);
            kept.addAll(withMappedSlackAtTheTopTaken(pool));
            pool.deallocate(hole);
            long unmapCalls = backend.unmapCalls();
            long budget = (long) Math.ceil(PoolArena.MOVE_UNMAPS_PER_MAP * backend.mapCalls());
            assertThat(pool.reservedBytes()).isEqualTo(pool.reservedBytesPeak());
            assertThat(16 * MiB).as("the rise, against the bytes a map call brought").isGreaterThan(pool.reservedBytesPeak() / backend.mapCalls());

            // fits not the 8 MiB hole: its pages move while the moves' unmaps are under their share of the map calls
            kept.add(pool.allocate(16 * MiB));

            long unmapped = backend.unmapCalls() - unmapCalls;
            if (moveUnmaps < budget) {
                assertThat(unmapped).as("step %d: the hole's pages are moved", step).isEqualTo(1);
            } else {
                assertThat(unmapped).as("step %d: the budget is spent, the hole stays mapped", step).isZero();
                assertThat(blockAt(pool.segments(), hole).state()).isEqualTo(MemorySnapshot.BlockState.FREE);
                heldByTheBudget = true;
            }
            moveUnmaps += unmapped;
        }
        assertThat(heldByTheBudget).as("the moves stopped within 40 steps").isTrue();
        assertThat(moveUnmaps).isPositive();
        kept.forEach(pool::deallocate);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    /** The blocks given, and one taking the free mapped pages at the top of the first range where there are some, so that the next block there maps pages. */
    private static List<Block> withMappedSlackAtTheTopTaken(CachingPoolResource pool, Block... blocks) {
        List<Block> taken = new ArrayList<>(List.of(blocks));
        pool.segments().getFirst().blocks().stream().filter(b -> b.state() == MemorySnapshot.BlockState.FREE).reduce((a, b) -> b)
                .ifPresent(slack -> taken.add(pool.allocate(slack.sizeBytes())));
        return taken;
    }

    @Test
    void rangesAreTwiceWhatTheDeviceHoldsWhenTheCapIsLarger() {
        AddressSpaceBackend backend = backend(GiB, true);
        // twice 100 TiB is more address space than a process has
        CachingPoolResource pool = pool(backend, 100L << 40, true);
        List<Block> blocks = List.of(pool.allocate(1024), pool.allocate(10 * MiB));

        assertThat(pool.segments()).hasSize(2).allSatisfy(range -> assertThat(range.sizeBytes()).isEqualTo(2 * GiB));
        blocks.forEach(pool::deallocate);
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void rangesAreTwiceTheCapWhenTheDeviceHoldsMore() {
        AddressSpaceBackend backend = backend(4 * GiB, true);
        CachingPoolResource pool = pool(backend, 64 * MiB, true);
        Block block = pool.allocate(10 * MiB);

        assertThat(pool.segments()).singleElement().satisfies(range -> assertThat(range.sizeBytes()).isEqualTo(128 * MiB));
        pool.deallocate(block);
        pool.close();
    }

    @Test
    void withoutPageMappingSmallAndLargeBlocksComeFromTheirOwnSegments() {
        AddressSpaceBackend backend = backend(GiB, false);
        CachingPoolResource pool = pool(backend, GiB, true);
        assertThat(pool.expandable()).isFalse();
        Block small = pool.allocate(1000);
        Block large = pool.allocate(3 * MiB);
        assertThat(small.segment().sizeBytes()).as("a small arena's first segment").isEqualTo(256 * 1024);
        assertThat(large.segment().sizeBytes()).isEqualTo(20 * MiB);
        Block small2 = pool.allocate(100_000);
        assertThat(small2.segment()).isEqualTo(small.segment());
        assertThat(small2.offset()).isEqualTo(1024);
        pool.deallocate(small);
        pool.deallocate(small2);
        pool.deallocate(large);
        assertThat(pool.trim(0)).isEqualTo(20 * MiB + 256 * 1024);
        assertThat(backend.freeCalls()).isEqualTo(2);
        pool.close();
    }

    @Test
    void afterCloseAllocateFailsAndDeallocateDoesNothing() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        Block small = pool.allocate(100);
        pool.deallocate(pool.allocate(200));
        Block large = pool.allocate(50 * MiB);

        pool.close();

        assertThat(backend.liveAllocations()).isZero();
        assertThat(backend.usedBytes()).isZero();
        assertThatThrownBy(() -> pool.allocate(200)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        assertThatThrownBy(() -> pool.allocate(10 * MiB)).isInstanceOf(IllegalStateException.class);
        pool.deallocate(small);
        pool.deallocate(large);
        assertThat(pool.trim(0)).isZero();
        assertThat(pool.segments()).isEmpty();
    }

    @Test
    void freeingTwiceOrAForeignBlockIsRefused() {
        AddressSpaceBackend backend = backend(GiB, true);
        CachingPoolResource pool = pool(backend, GiB, true);
        CachingPoolResource other = pool(backend, GiB, true);
        Block large = pool.allocate(5 * MiB);
        pool.deallocate(large);
        assertThatThrownBy(() -> pool.deallocate(large)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("freed already");
        Block small = pool.allocate(700);
        pool.deallocate(small);
        assertThatThrownBy(() -> pool.deallocate(small)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("freed already");
        Block foreign = other.allocate(100);
        assertThatThrownBy(() -> pool.deallocate(foreign)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not allocated by this pool");
        pool.close();
        other.close();
    }

    private static MemorySnapshot.Block blockAt(List<MemorySnapshot.Segment> segments, Block block) {
        return segments.stream().filter(s -> s.address() == block.segment().address()).flatMap(s -> s.blocks().stream())
                .filter(b -> b.offset() == block.offset()).findFirst().orElseThrow();
    }

    private static List<MemorySnapshot.BlockState> states(CachingPoolResource pool) {
        return pool.segments().stream().flatMap(s -> s.blocks().stream()).map(MemorySnapshot.Block::state).toList();
    }
}
