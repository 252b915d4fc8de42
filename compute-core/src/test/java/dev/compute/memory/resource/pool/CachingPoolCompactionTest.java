package dev.compute.memory.resource.pool;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The pool's half of compaction: {@link CachingPoolResource#compactionOrder()} and {@link CachingPoolResource#relocate}.
 * The address-space backend holds no bytes, so each test keeps a model of the memory (which block's data lies at which
 * address) that the copies update: after every move, each live block's data must be where the block now says it is.
 */
class CachingPoolCompactionTest {

    private static final long MiB = 1L << 20;
    private static final long GiB = 1L << 30;

    private final AddressSpaceBackend backend = new AddressSpaceBackend(16 * GiB, AddressSpaceBackend.DEFAULT_GRANULARITY, true);
    /** The model of memory: the id of the block whose data starts at an address. */
    private final Map<Long, Integer> dataAt = new HashMap<>();
    private final Map<Block, Integer> idOf = new IdentityHashMap<>();
    private int nextId;

    private static CachingPoolResource pool(AddressSpaceBackend backend, boolean expandable) {
        return new CachingPoolResource(new BackendResource(backend, MemoryLocation.DEVICE, 16 * GiB, "compute.memory.pooling.max-pool-size",
                PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE),
                expandable ? PoolSettings.expandable() : PoolSettings.plainSegments(), MemoryEventListener.NONE);
    }

    private static long address(Block block) {
        return block.segment().address() + block.offset();
    }

    private Block allocate(StatisticsResource statistics, long bytes) {
        Block block = statistics.allocate(bytes);
        int id = nextId++;
        idOf.put(block, id);
        dataAt.put(address(block), id);
        return block;
    }

    private void free(StatisticsResource statistics, Block block) {
        dataAt.remove(address(block));
        idOf.remove(block);
        statistics.deallocate(block);
    }

    /** The copy a move makes, on the model: the data must be at the old place, and lands at the new one. */
    private void copy(Block from, Block to) {
        assertThat(from.size()).isEqualTo(to.size());
        assertThat(address(from)).isNotEqualTo(address(to));
        Integer data = dataAt.remove(address(from));
        assertThat(data).as("the data of the block moved is at its old place").isEqualTo(idOf.get(from));
        dataAt.put(address(to), data);
    }

    /** Moves every live block it can, as the manager does; returns how many moved. */
    private int compact(CachingPoolResource pool) {
        int moved = 0;
        for (Block block : pool.compactionOrder()) {
            if (pool.relocate(block, this::copy)) {
                moved++;
            }
        }
        return moved;
    }

    private void assertDataInPlace(List<Block> live) {
        for (Block block : live) {
            assertThat(dataAt.get(address(block))).as("%s finds its data where it says it is", block).isEqualTo(idOf.get(block));
        }
    }

    @Test
    void emptiesTheSparsestPlainSegmentIntoTheHolesOfTheFullestAndGivesItBack() {
        CachingPoolResource pool = pool(backend, false);
        StatisticsResource statistics = new StatisticsResource(pool);
        List<Block> live = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            live.add(allocate(statistics, 2 * MiB));
        }
        assertThat(pool.segmentCount()).as("two 20 MiB segments of ten blocks").isEqualTo(2);
        // six blocks stay in the first segment, three in the second
        for (int i : new int[] {19, 18, 17, 16, 15, 14, 13, 9, 7, 5, 3}) {
            free(statistics, live.remove(i));
        }
        pool.trim(0);
        long reservedBefore = pool.reservedBytes();

        int moved = compact(pool);
        long released = pool.trim(0);

        assertThat(moved).as("the second segment's three blocks moved into the first's holes").isEqualTo(3);
        assertThat(released).isEqualTo(20 * MiB);
        assertThat(pool.segmentCount()).isEqualTo(1);
        assertThat(pool.reservedBytes()).isEqualTo(reservedBefore - 20 * MiB);
        assertDataInPlace(live);
        PoolInvariants.check(pool, statistics, backend, live);
        live.forEach(block -> free(statistics, block));
        PoolInvariants.check(pool, statistics, backend, List.of());
    }

    @Test
    void packsARangeLowSoThatATrimGivesBackMoreThanWithout() {
        long[] reservedAfterTrim = new long[2];
        for (int run = 0; run < 2; run++) {
            CachingPoolResource pool = pool(backend, true);
            StatisticsResource statistics = new StatisticsResource(pool);
            List<Block> live = new ArrayList<>();
            List<Block> all = new ArrayList<>();
            for (int i = 0; i < 32; i++) {
                all.add(allocate(statistics, 3 * MiB)); // a page and a half: holes share pages with their neighbours
            }
            for (int i = 0; i < all.size(); i++) {
                if (i % 4 == 0) {
                    live.add(all.get(i));
                } else {
                    free(statistics, all.get(i));
                }
            }
            if (run == 1) {
                assertThat(compact(pool)).isPositive();
            }
            pool.trim(0);
            reservedAfterTrim[run] = pool.reservedBytes();
            assertDataInPlace(live);
            PoolInvariants.check(pool, statistics, backend, live);
            live.forEach(block -> free(statistics, block));
            pool.close();
        }
        assertThat(reservedAfterTrim[1]).as("8 live blocks of 3 MiB packed: 24 MiB of pages, against pages spread over 96 MiB")
                .isEqualTo(24 * MiB)
                .isLessThan(reservedAfterTrim[0]);
    }

    @Test
    void afterATrimAMoveMapsPagesOnlyWhereItFreesMoreAndGivesThemBackAtOnce() {
        CachingPoolResource pool = pool(backend, true);
        StatisticsResource statistics = new StatisticsResource(pool);
        List<Block> all = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            all.add(allocate(statistics, 3 * MiB));
        }
        List<Block> live = new ArrayList<>();
        for (int i = 0; i < all.size(); i++) {
            if (i % 4 == 0) {
                live.add(all.get(i));
            } else {
                free(statistics, all.get(i));
            }
        }
        pool.trim(0); // every hole's free pages are given back: a move must map pages for its new place
        long reserved = pool.reservedBytes();

        int moved = compact(pool);

        assertThat(moved).isPositive();
        assertThat(pool.reservedBytes()).as("each move gave back more pages than it mapped").isLessThan(reserved);
        pool.trim(0);
        assertThat(pool.reservedBytes()).as("8 live blocks of 3 MiB packed: 24 MiB of pages").isEqualTo(24 * MiB);
        assertDataInPlace(live);
        PoolInvariants.check(pool, statistics, backend, live);
    }

    @Test
    void aMoveThatWouldMapAsManyPagesAsItFreesIsNotMade() {
        CachingPoolResource pool = pool(backend, true);
        StatisticsResource statistics = new StatisticsResource(pool);
        List<Block> all = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            all.add(allocate(statistics, 4 * MiB)); // two whole pages each: a move frees two and maps two
        }
        for (int i = 1; i < 7; i++) {
            free(statistics, all.get(i));
        }
        pool.trim(0);
        long mapCalls = backend.mapCalls();

        assertThat(compact(pool)).isZero();
        assertThat(backend.mapCalls()).isEqualTo(mapCalls);
        assertDataInPlace(List.of(all.get(0), all.get(7)));
    }

    @Test
    void neverMapsMemoryForAMoveThatGainsNothingNorTouchesPendingBlocks() {
        CachingPoolResource pool = pool(backend, true);
        StatisticsResource statistics = new StatisticsResource(pool);
        List<Block> all = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            all.add(allocate(statistics, 4 * MiB));
        }
        Block pending = all.get(1);
        CompletableFuture<Void> work = new CompletableFuture<>();
        dataAt.remove(address(pending));
        statistics.deallocate(pending, work);
        free(statistics, all.get(2));
        pool.trim(0); // the hole at block 2 is unmapped now: a block moving there would free no more pages than it maps
        long mapCalls = backend.mapCalls();
        long reserved = pool.reservedBytes();
        List<Block> live = List.of(all.get(0), all.get(3), all.get(4), all.get(5), all.get(6), all.get(7));

        assertThat(pool.compactionOrder()).doesNotContain(pending);
        assertThat(compact(pool)).isZero();
        assertThat(backend.mapCalls()).isEqualTo(mapCalls);
        assertThat(pool.reservedBytes()).isEqualTo(reserved);
        assertDataInPlace(live);
        work.complete(null);
        PoolInvariants.check(pool, statistics, backend, live);
    }

    @Test
    void aFailingCopyLeavesTheBlockWhereItWasAndThePlaceFree() {
        CachingPoolResource pool = pool(backend, false);
        StatisticsResource statistics = new StatisticsResource(pool);
        Block low = allocate(statistics, 2 * MiB);
        Block high = allocate(statistics, 2 * MiB);
        free(statistics, low);
        long at = address(high);

        assertThatThrownBy(() -> pool.relocate(high, (from, to) -> {
            throw new IllegalStateException("copy failed");
        })).hasMessage("copy failed");

        assertThat(address(high)).isEqualTo(at);
        PoolInvariants.check(pool, statistics, backend, List.of(high));
        assertThat(pool.relocate(high, this::copy)).isTrue();
        assertThat(address(high)).isLessThan(at);
        assertDataInPlace(List.of(high));
        PoolInvariants.check(pool, statistics, backend, List.of(high));
    }

    @Test
    void aBlockThatIsNotLiveHereIsRefused() {
        CachingPoolResource pool = pool(backend, true);
        CachingPoolResource other = pool(backend, true);
        Block freed = pool.allocate(2 * MiB);
        pool.deallocate(freed);
        Block foreign = other.allocate(2 * MiB);

        assertThatThrownBy(() -> pool.relocate(freed, this::copy)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("live");
        assertThatThrownBy(() -> pool.relocate(foreign, this::copy)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not allocated by this pool");
        pool.close();
        assertThatThrownBy(pool::compactionOrder).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    @Test
    void onlyLargeBlocksAreMovableForTheirUsers() {
        CachingPoolResource pool = pool(backend, true);
        assertThat(pool.movable(pool.allocate(MiB))).isFalse();
        assertThat(pool.movable(pool.allocate(MiB + 1))).isTrue();
        assertThat(pool.movable(pool(backend, true).allocate(4 * MiB))).as("another pool's block").isFalse();
        assertThat(pool.smallestMovableBytes()).isEqualTo(MiB + 1);
        assertThat((pool.smallestMovableBytes() - 1) % SizeClasses.ALIGNMENT)
                .as("a request below the smallest movable size is rounded to a block below it").isZero();
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void compactionsAmongRandomAllocationsKeepEveryInvariant(boolean expandable) {
        long seed = ThreadLocalRandom.current().nextLong();
        Random random = new Random(seed);
        CachingPoolResource pool = pool(backend, expandable);
        StatisticsResource statistics = new StatisticsResource(pool);
        List<Block> live = new ArrayList<>();
        try {
            for (int step = 0; step < 600; step++) {
                int action = random.nextInt(100);
                if (action < 50 || live.isEmpty()) {
                    long bytes = random.nextInt(3) == 0 ? 1 + random.nextInt((int) MiB) : MiB + random.nextInt((int) (24 * MiB));
                    live.add(allocate(statistics, bytes));
                } else if (action < 90) {
                    free(statistics, live.remove(random.nextInt(live.size())));
                } else if (action < 97) {
                    compact(pool);
                } else {
                    pool.trim(random.nextInt(2) == 0 ? 0 : random.nextLong(64 * MiB));
                }
                assertDataInPlace(live);
                PoolInvariants.check(pool, statistics, backend, live);
            }
        } catch (AssertionError e) {
            throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
        }
        live.forEach(block -> free(statistics, block));
        pool.trim(0);
        PoolInvariants.check(pool, statistics, backend, List.of());
        assertThat(backend.usedBytes()).isZero();
    }
}
