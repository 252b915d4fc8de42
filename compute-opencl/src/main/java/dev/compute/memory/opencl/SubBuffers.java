package dev.compute.memory.opencl;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.jocl.cl_mem;
import org.jspecify.annotations.Nullable;

/**
 * The sub-buffers device accesses hand out, kept for the next access to the same bytes: a sub-buffer is only a range
 * and flags of its parent, so one made for a block serves every later access to that block, whichever buffer holds it
 * then. Making and releasing one per access was a tenth of a short kernel's launch on PoCL.
 *
 * <p>Each sub-buffer is counted: the cache holds one reference and every open access one more; the last to let go
 * releases it, so an entry evicted or dropped while an access uses it lives until that access ends. The cache is
 * bounded ({@link #CAPACITY}), and a parent's entries are dropped before the parent is released
 * ({@link #dropAll(cl_mem)}): a kept sub-buffer would keep its parent's memory.
 */
final class SubBuffers {

    /** Entries kept at most; past it, inserting one drops others (in no particular order). */
    static final int CAPACITY = 256;

    private record Range(long parent, long offset, long bytes, long flags) {
        boolean is(long parent, long offset, long bytes, long flags) {
            return this.parent == parent && this.offset == offset && this.bytes == bytes && this.flags == flags;
        }
    }

    /** A sub-buffer and its references: the cache's and one per access using it; 0 when released. */
    static final class Shared {
        private final Range range;
        private final cl_mem memory;
        private final Consumer<cl_mem> releaser;
        /** From the start, the cache's and its first caller's. */
        private final AtomicInteger references = new AtomicInteger(2);
        /** Set once out of the cache: {@link #recent} no longer hands it out. */
        private volatile boolean dropped;

        private Shared(Range range, cl_mem memory, Consumer<cl_mem> releaser) {
            this.range = range;
            this.memory = memory;
            this.releaser = releaser;
        }

        cl_mem memory() {
            return memory;
        }

        private boolean retain() {
            for (int held = references.get(); held > 0; held = references.get()) {
                if (references.compareAndSet(held, held + 1)) {
                    return true;
                }
            }
            return false;
        }

        /** Lets go of one reference; the last releases the sub-buffer (OpenCL keeps it for commands queued on it). */
        void release() {
            if (references.decrementAndGet() == 0) {
                releaser.accept(memory);
            }
        }

        /** The cache's reference, if it still keeps it, and one per access using it. */
        int references() {
            return references.get();
        }
    }

    private final Map<Range, Shared> kept = new ConcurrentHashMap<>();
    /** The entry last found or kept in {@link #acquire}, for {@link #recent}. */
    private volatile @Nullable Shared recent;
    private final Consumer<cl_mem> releaser;

    SubBuffers() {
        this(JoclCalls::clReleaseMemObject);
    }

    /** With {@code releaser} in place of {@code clReleaseMemObject}: a test counts the releases. */
    SubBuffers(Consumer<cl_mem> releaser) {
        this.releaser = releaser;
    }

    /**
     * The kept sub-buffer of {@code parent} over {@code [offset, offset + bytes)} with {@code flags}, or a new one from
     * {@code create} (kept from now on); the caller holds one reference and {@linkplain Shared#release() releases} it
     * when its access ends.
     */
    Shared acquire(cl_mem parent, long offset, long bytes, long flags, Supplier<cl_mem> create) {
        Range range = new Range(parent.getNativePointer(), offset, bytes, flags);
        while (true) {
            Shared found = kept.get(range);
            if (found == null) {
                Shared made = new Shared(range, create.get(), releaser);
                if (kept.putIfAbsent(range, made) == null) {
                    trim(range);
                    recent = made;
                    return made;
                }
                releaser.accept(made.memory()); // another thread kept one first: use that
            } else if (found.retain()) {
                recent = found;
                return found;
            }
            // else dropped (out of the map) and released since the lookup: look again
        }
    }

    /**
     * As {@link #acquire}, where the entry asked for is the one last found or kept and is still kept; else null. A chain
     * of device accesses to the same bytes finds it here, with no key made and no map looked up (nor, in its caller, a
     * way to create one).
     */
    @Nullable Shared recent(cl_mem parent, long offset, long bytes, long flags) {
        Shared last = recent;
        // a drop between the look and the retain is the map's race too: the entry lives until its last holder lets go
        return last != null && !last.dropped && last.range.is(parent.getNativePointer(), offset, bytes, flags) && last.retain()
                ? last : null;
    }

    /** Drops the entries of {@code parent}, which is about to be released. */
    void dropAll(cl_mem parent) {
        long pointer = parent.getNativePointer();
        dropIf(range -> range.parent() == pointer);
    }

    /** Drops every entry: the backend is closing. */
    void dropAll() {
        dropIf(range -> true);
    }

    private void dropIf(Predicate<Range> which) {
        kept.forEach((range, shared) -> {
            if (which.test(range)) {
                drop(range, shared);
            }
        });
    }

    /** Out of the cache, then the cache's reference let go: whoever finds it afterwards cannot retain it. */
    private boolean drop(Range range, Shared shared) {
        if (!kept.remove(range, shared)) {
            return false;
        }
        shared.dropped = true;
        shared.release();
        return true;
    }

    /** Entries kept now. */
    int size() {
        return kept.size();
    }

    private void trim(Range keep) {
        if (kept.size() <= CAPACITY) {
            return;
        }
        int excess = kept.size() - CAPACITY / 2;
        for (Map.Entry<Range, Shared> entry : kept.entrySet()) {
            if (excess <= 0) {
                return;
            }
            if (!entry.getKey().equals(keep) && drop(entry.getKey(), entry.getValue())) {
                excess--;
            }
        }
    }
}
