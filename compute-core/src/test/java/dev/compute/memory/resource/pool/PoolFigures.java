package dev.compute.memory.resource.pool;

import dev.compute.memory.resource.StatisticsResource;
import org.jspecify.annotations.Nullable;

/** A pool's figures (and those of a statistics adaptor over it) read at one moment, for tests of the resources alone. */
record PoolFigures(long reservedBytes, long reservedBytesPeak, int segments, long largestFreeBlockBytes,
                   long poolHits, long poolMisses, long oomRetries, long backendAllocations, long backendFrees,
                   long allocatedBytes, long requestedBytes) {

    static PoolFigures figures(CachingPoolResource pool) {
        return figures(null, pool);
    }

    static PoolFigures figures(@Nullable StatisticsResource statistics, CachingPoolResource pool) {
        StatisticsResource.Counts counts = statistics == null ? null : statistics.counts();
        return new PoolFigures(pool.reservedBytes(), pool.reservedBytesPeak(), pool.segmentCount(), pool.largestFreeBlockBytes(),
                pool.poolHits(), pool.poolMisses(), pool.oomRetries(), pool.upstream().backendAllocations(),
                pool.upstream().backendFrees(), counts == null ? 0 : counts.allocatedBytes(), counts == null ? 0 : counts.requestedBytes());
    }
}
