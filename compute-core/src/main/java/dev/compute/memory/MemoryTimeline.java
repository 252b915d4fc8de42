package dev.compute.memory;

import java.util.ArrayList;
import java.util.List;

/**
 * A bounded ring buffer of samples of one location's reserved, allocated and cached bytes: the history the
 * memory map page draws. Thread-safe; the oldest sample is dropped when full.
 */
public final class MemoryTimeline {

    /** One sample; {@code epochMillis} is wall-clock time. */
    public record Sample(long epochMillis, long reservedBytes, long allocatedBytes, long cachedBytes) {}

    private final Sample[] ring;
    private int next;
    private int size;

    public MemoryTimeline(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("timeline capacity must be positive: " + capacity);
        }
        ring = new Sample[capacity];
    }

    public synchronized void add(Sample sample) {
        ring[next] = sample;
        next = (next + 1) % ring.length;
        size = Math.min(size + 1, ring.length);
    }

    public synchronized List<Sample> samples() {
        List<Sample> out = new ArrayList<>(size);
        int start = (next - size + ring.length) % ring.length;
        for (int i = 0; i < size; i++) {
            out.add(ring[(start + i) % ring.length]);
        }
        return out;
    }
}
