package dev.compute.memory.resource;

/**
 * Counts what passes through, as RMM's statistics adaptor: allocated bytes (as the upstream set them aside) and
 * requested bytes, current and peak, and the number of allocations and frees. Counted where blocks pass, striped
 * by thread and lock-free on the way ({@link StripedByteCounters}, which says how exact the figures are: peaks
 * included, whichever thread frees what another allocated), so that counting costs two threads no more than one,
 * and reading them costs the upstream nothing. Thread-safe.
 */
public final class StatisticsResource extends ObservingResource {

    /** The figures of a {@link StatisticsResource}, read together. */
    public record Counts(long allocatedBytes, long allocatedBytesPeak, long requestedBytes, long requestedBytesPeak,
                         long allocations, long frees) {

        /** Blocks handed out and not given back. */
        public long liveBlocks() {
            return allocations - frees;
        }
    }

    private final StripedByteCounters counters = new StripedByteCounters();

    public StatisticsResource(MemoryResource upstream) {
        super(upstream);
    }

    @Override
    protected void allocated(Block block) {
        counters.allocated(block.size(), block.requestedSize());
    }

    /**
     * Counted before the block goes upstream: once there, the pool may lend the memory to another thread at once, and
     * counting that allocation before this free would raise the peak above anything ever held. A free the upstream then
     * throws from is counted all the same: the caller has given the block up.
     */
    @Override
    protected void freeing(Block block) {
        counters.freed(block.size(), block.requestedSize());
    }

    public Counts counts() {
        return counters.read();
    }

    /**
     * Counts every block still counted as freed: for when the memory under them went back as a whole (the chain
     * closed with blocks live, and its bottom freed everything). A chain that kept its memory (device work that did
     * not finish) keeps them counted.
     */
    public void countAllFreed() {
        counters.freeAll();
    }
}
