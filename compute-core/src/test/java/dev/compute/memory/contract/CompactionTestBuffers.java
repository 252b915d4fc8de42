package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.List;

/**
 * The buffers the compaction contracts fragment a pool with, and how they check them: 3 MiB FLOAT32 buffers at DEVICE
 * (a page and a half of 2 MiB pages, six to a 20 MiB plain segment: holes that a trim alone cannot give back), each
 * written whole with a pattern of its seed. ("Test" in its name: allocation sites count it as the caller's code, not the
 * manager's.)
 */
final class CompactionTestBuffers {

    static final long MiB = 1L << 20;
    static final MemoryLocation DEVICE = MemoryLocation.DEVICE;
    static final int BUFFER_BYTES = (int) (3 * MiB);
    static final int FLOATS = BUFFER_BYTES / 4;

    private CompactionTestBuffers() {}

    static byte[] pattern(int length, int seed) {
        byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++) {
            bytes[i] = (byte) (i * 31 + seed * 7 + (i >>> 12));
        }
        return bytes;
    }

    static UnifiedBuffer written(UnifiedMemoryManager manager, int seed) {
        return written(manager, DEVICE, seed);
    }

    static UnifiedBuffer written(UnifiedMemoryManager manager, MemoryLocation location, int seed) {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, FLOATS, location);
        buffer.copyFrom(pattern(BUFFER_BYTES, seed));
        return buffer;
    }

    static void assertHolds(UnifiedBuffer buffer, int seed) {
        byte[] read = new byte[(int) buffer.byteSize()];
        buffer.copyTo(read);
        assertThat(read).as("%s keeps its data", buffer).isEqualTo(pattern(read.length, seed));
    }

    /** Twenty buffers; every fourth stays (seeds 0, 4, 8, ...), the rest are closed: holes everywhere. */
    static List<UnifiedBuffer> fragmented(UnifiedMemoryManager manager) {
        return everyNth(manager, 20, 4);
    }

    /** {@code count} buffers; every {@code n}th stays (seeds 0, n, 2n, ...), the rest are closed. */
    static List<UnifiedBuffer> everyNth(UnifiedMemoryManager manager, int count, int n) {
        return everyNth(manager, DEVICE, count, n);
    }

    /** As {@link #everyNth(UnifiedMemoryManager, int, int)}, at {@code location}. */
    static List<UnifiedBuffer> everyNth(UnifiedMemoryManager manager, MemoryLocation location, int count, int n) {
        List<UnifiedBuffer> all = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            all.add(written(manager, location, i));
        }
        List<UnifiedBuffer> kept = new ArrayList<>();
        for (int i = 0; i < all.size(); i++) {
            if (i % n == 0) {
                kept.add(all.get(i));
            } else {
                all.get(i).close();
            }
        }
        return kept;
    }

    /**
     * Twenty buffers of which the first two and the last stay (seeds 0, 1, 19): the last has a place right after the
     * first two, at another offset, whatever the layout (a range, or 20 MiB plain segments of six).
     */
    static List<UnifiedBuffer> firstTwoAndLast(UnifiedMemoryManager manager) {
        List<UnifiedBuffer> all = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            all.add(written(manager, i));
        }
        for (int i = 2; i < 19; i++) {
            all.get(i).close();
        }
        return List.of(all.get(0), all.get(1), all.get(19));
    }

    static long deviceOffset(UnifiedBuffer buffer) {
        try (BufferAccess access = buffer.deviceAccess(AccessMode.READ)) {
            return access.offset();
        }
    }
}
