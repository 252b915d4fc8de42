package dev.compute.memory.manager;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.WarmupBlocks;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.pool.CachingPoolResource;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A location's warm-up at start ({@code compute.memory.pooling.warmup}), as RMM's initial pool size and Genesis's
 * warm-up cache: the pool allocates every block asked for, all at once so that each is memory of its own, and frees
 * them, so that they stay cached; then it trims to the release threshold, as the scheduled trim will. What is still
 * reserved then is what later trims keep while the cache holds nothing else: if it is less than the warm-up (the
 * pool's segments round up, and a trim gives back whole segments), the manager does not start, naming both
 * properties. The blocks go to the pool itself, beneath the manager's statistics and the application's adaptors:
 * they show in reserved and cached bytes and the pool's misses, not as allocations.
 */
public final class PoolWarmup {

    private static final System.Logger LOG = ManagerLog.logger();

    private PoolWarmup() {}

    /** {@code compute.memory.pooling.warmup.<location>}, as messages name it. */
    public static String property(MemoryLocation location) {
        return "compute.memory.pooling.warmup." + location.name().toLowerCase(Locale.ROOT);
    }

    static void warm(CachingPoolResource pool, List<WarmupBlocks> warmup, long releaseThreshold) {
        MemoryLocation location = pool.upstream().location();
        String property = property(location);
        long asked = 0;
        long start = System.nanoTime();
        List<Block> blocks = new ArrayList<>();
        try {
            for (WarmupBlocks entry : warmup) {
                asked += entry.totalBytes();
                for (int i = 0; i < entry.count(); i++) {
                    blocks.add(pool.allocate(entry.sizeBytes()));
                }
            }
        } catch (DeviceOutOfMemoryException e) {
            throw new InvalidSettingException(property, warmup, "what the device gives at start; it refused: " + e.getMessage());
        } finally {
            blocks.forEach(pool::deallocate);
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
