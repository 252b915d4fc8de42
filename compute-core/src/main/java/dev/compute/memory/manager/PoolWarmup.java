package dev.compute.memory.manager;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.WarmupBlocks;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.pool.CachingPoolResource;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A location's warm-up at start ({@code compute.memory.pooling.warmup}), as RMM's initial pool size and Genesis's
 * warm-up cache: the pool allocates every block asked for, all at once so that each is memory of its own, and frees
 * them, so that they stay cached; then it trims to the release threshold, as the scheduled trim will. What is still
 * reserved then is what later trims keep while the cache holds nothing else: if it is less than the warm-up (the
 * pool's segments round up, and a trim gives back whole segments), the manager does not start, naming both
 * properties. The blocks go to the pool itself, beneath the manager's statistics and the application's adaptors:
 * they show in reserved and cached bytes and as backend allocations, not as allocations, pool hits or misses, so that
 * the hit rate says what the callers' requests found.
 */
public final class PoolWarmup {

    private static final System.Logger LOG = ManagerLog.logger();

    private PoolWarmup() {}

    /** {@code compute.memory.pooling.warmup.<location>}, as messages name it. */
    public static String property(MemoryLocation location) {
        return "compute.memory.pooling.warmup." + location.name().toLowerCase(Locale.ROOT);
    }

    /** What a warm-up needs whatever the device: a pool, positive sizes and counts, a total that fits in a long. */
    public static void validate(Map<MemoryLocation, List<WarmupBlocks>> warmup, boolean poolingEnabled, boolean pinningEnabled) {
        if (!warmup.isEmpty() && !poolingEnabled) {
            throw new InvalidSettingException("compute.memory.pooling.warmup", warmup,
                    "no warm-up while compute.memory.pooling.enabled is false: without the pool nothing stays cached");
        }
        if (warmup.containsKey(MemoryLocation.PINNED) && !pinningEnabled) {
            throw new InvalidSettingException(property(MemoryLocation.PINNED), warmup.get(MemoryLocation.PINNED),
                    "no PINNED warm-up while compute.memory.pinning.enabled is false: the manager has no PINNED memory");
        }
        warmup.forEach((location, entries) -> {
            long total = 0;
            for (WarmupBlocks entry : entries) {
                if (entry.sizeBytes() <= 0 || entry.count() <= 0) {
                    throw new InvalidSettingException(property(location), entry,
                            "blocks of a positive size and a count of 1 or more, such as size 4MB, count 16");
                }
                try {
                    total = Math.addExact(total, entry.totalBytes());
                } catch (ArithmeticException e) {
                    throw new InvalidSettingException(property(location), entries, "a total of at most " + Long.MAX_VALUE + " bytes");
                }
            }
        });
    }

    /**
     * Once the cap is known in bytes: each location's warm-up at most its cap ({@code pinnedCap} for PINNED, else
     * {@code cap}) and at most the release threshold, which a trim would cut it down to.
     */
    public static void checkAgainstCaps(Map<MemoryLocation, List<WarmupBlocks>> warmup, long cap, long pinnedCap, long releaseThreshold) {
        warmup.forEach((location, entries) -> {
            long total = total(entries);
            long locationCap = location == MemoryLocation.PINNED ? pinnedCap : cap;
            if (total > locationCap) {
                throw new InvalidSettingException(property(location), total + " bytes in all", "at most "
                        + ManagerSettings.capPropertyOf(location) + " (" + locationCap + " bytes): the pool may not reserve more");
            }
            if (total > releaseThreshold) {
                throw new InvalidSettingException(property(location), total + " bytes in all",
                        "at most compute.memory.pooling.release-threshold (" + releaseThreshold + " bytes): a trim gives cached memory beyond it"
                        + " back, so the rest of the warm-up would not stay; raise compute.memory.pooling.release-threshold or warm up less");
            }
        });
    }

    /** The largest location's warm-up in bytes; 0 with none. */
    public static long largestTotal(Map<MemoryLocation, List<WarmupBlocks>> warmup) {
        long largest = 0;
        for (List<WarmupBlocks> entries : warmup.values()) {
            largest = Math.max(largest, total(entries));
        }
        return largest;
    }

    private static long count(List<WarmupBlocks> entries) {
        long count = 0;
        for (WarmupBlocks entry : entries) {
            count += entry.count();
        }
        return count;
    }

    private static long total(List<WarmupBlocks> entries) {
        long total = 0;
        for (WarmupBlocks entry : entries) {
            total += entry.totalBytes();
        }
        return total;
    }

    /**
     * A warm-up within the cap in bytes (checked before) may still not fit in the whole pieces the pool takes memory in
     * (plain segments or pages): refused before anything is allocated, saying so, rather than with the pool's
     * out-of-memory report.
     */
    private static void refuseBeyondPieces(CachingPoolResource pool, List<WarmupBlocks> warmup) {
        long[] sizes = warmup.stream().mapToLong(WarmupBlocks::sizeBytes).toArray();
        long taken = pool.leastTakenFor(sizes, i -> warmup.get(i).count());
        long cap = pool.upstream().limitBytes();
        if (taken > cap) {
            MemoryLocation location = pool.upstream().location();
            String capProperty = ManagerSettings.capPropertyOf(location);
            throw new InvalidSettingException(property(location), total(warmup) + " bytes in all", "a warm-up whose blocks fit under "
                    + capProperty + " (" + cap + " bytes) in the pool's pieces (" + pool.pieces() + "), where they take "
                    + taken + " bytes; raise " + capProperty + " or warm up less");
        }
    }

    static void warm(CachingPoolResource pool, List<WarmupBlocks> warmup, long releaseThreshold) {
        MemoryLocation location = pool.upstream().location();
        String property = property(location);
        long asked = 0;
        long start = System.nanoTime();
        List<Block> blocks = new ArrayList<>();
        refuseBeyondPieces(pool, warmup);
        long hits = pool.poolHits();
        long misses = pool.poolMisses();
        try {
            for (WarmupBlocks entry : warmup) {
                asked += entry.totalBytes();
                for (int i = 0; i < entry.count(); i++) {
                    blocks.add(pool.allocate(entry.sizeBytes()));
                }
            }
        } catch (DeviceOutOfMemoryException e) {
            if (e.reason() == OutOfMemoryReason.POOL_LIMIT) { // the cap, not the device: say so in a line, not the pool's report
                String capProperty = ManagerSettings.capPropertyOf(location);
                throw new InvalidSettingException(property, total(warmup) + " bytes in all", "a warm-up whose blocks the pool can place under "
                        + capProperty + " (" + pool.upstream().limitBytes() + " bytes): block " + (blocks.size() + 1) + " of " + count(warmup)
                        + " (" + e.requestedBytes() + " bytes) did not fit beside those before it, in the " + pool.reservedBytes()
                        + " bytes the pool held; raise " + capProperty + " or warm up less");
            }
            throw new InvalidSettingException(property, warmup, "what the device gives at start; it refused: " + e.getMessage());
        } finally {
            blocks.forEach(pool::deallocate);
            pool.uncount(pool.poolHits() - hits, pool.poolMisses() - misses);
        }
        pool.trim(releaseThreshold);
        long kept = pool.reservedBytes();
        if (kept < asked) {
            throw new InvalidSettingException(property, asked + " bytes in all", "a warm-up that stays under compute.memory.pooling.release-threshold ("
                    + releaseThreshold + " bytes) in the pool's segments: after the first trim the pool kept " + kept
                    + " bytes; raise compute.memory.pooling.release-threshold or warm up less");
        }
        LOG.log(System.Logger.Level.INFO, "warmed " + location + " memory up: " + warmup + ", " + kept + " bytes reserved and cached in "
                + (System.nanoTime() - start) / 1_000_000 + " ms");
    }
}
