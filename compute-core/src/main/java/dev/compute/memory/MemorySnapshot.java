package dev.compute.memory;

import java.util.List;
import org.jspecify.annotations.Nullable;

/** The segments of one location's pool and the blocks in them, at one moment. */
public record MemorySnapshot(MemoryLocation location, List<Segment> segments) {

    public MemorySnapshot {
        segments = List.copyOf(segments);
    }

    /** A range the pool holds from the backend: a plain allocation, or a reserved range whose pages are mapped on demand. */
    public record Segment(long address, long sizeBytes, boolean expandable, List<Block> blocks) {
        public Segment {
            blocks = List.copyOf(blocks);
        }
    }

    /**
     * A block within a segment, at an offset from the segment's start. Blocks tile their segment.
     * {@code allocationSite} is known for live blocks when leak detection is {@code paranoid}.
     */
    public record Block(long offset, long sizeBytes, BlockState state, long requestedBytes, @Nullable String allocationSite) {}

    public enum BlockState {
        /** Handed to a buffer that is still open. */
        LIVE,
        /** Free and backed by memory: reusable without a backend call. */
        FREE,
        /** Free and not backed: address space of an expandable segment whose pages are unmapped. */
        UNMAPPED,
        /** Freed by its buffer, but device work queued on it has not finished; not reusable yet. */
        PENDING,
        /**
         * Its buffer was closed, but a view, an access or an op still holds it (a thread that took a view and has not
         * let go); not reusable yet: it goes back when they end.
         */
        HELD,
        /**
         * Free, and on its way back to the backend: a trim is giving it back (a free or an unmap under way); not
         * reusable, not counted as cached, gone from the pool when the backend returns.
         */
        RELEASING
    }
}
