package dev.compute.benchmarks;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * {@code pinned-waste}: what the PINNED pool reserves for a set of buffers held at once, against what they ask for and
 * against rounding each up to a power of two (what PyTorch's pinned host allocator, {@code CachingHostAllocator}, does:
 * its users saw 20.4 GiB pinned take 32 GiB). PINNED memory maps no pages on any backend (CUDA's {@code cuMemHostAlloc},
 * the CPU backend's locked pages), so the pool carves plain segments: for blocks up to 1 MiB, ones that grow with the
 * arena from 256 KiB to 2 MiB (each at most 1/32 of what it holds), 20 MiB ones shared by blocks under 10 MiB, and a
 * block of 10 MiB or more rounded up to 2 MiB. The pool here is that one, over an
 * address-space device (no memory behind it, so sets of gigabytes measure on any machine), at default settings. Sets:
 * <ul>
 * <li>{@code uniform}: 400 sizes drawn uniformly from 1 to 64 MiB (seeded);</li>
 * <li>{@code bert-inputs}: the inputs of BERT batches as the BERT trace's workload makes them (batch 4, 8 or 16, sequence
 * length 32 to 512 in steps of 16; four int64 tensors a batch: input ids, token types, attention mask, labels), every
 * such batch held at once (372 tensors, 1 to 64 KiB);</li>
 * <li>{@code bert-inputs x64}: the same batches 64 times over, as a loader that pins ahead would hold them.</li>
 * </ul>
 * Prints a Markdown table; exit status 0, 2 for a wrong command line.
 */
public final class PinnedWaste {

    private static final long MiB = 1L << 20;

    private PinnedWaste() {}

    /** One set: its name and sizes. */
    record SizeSet(String name, long[] sizes) {}

    /**
     * What the pool and power-of-two rounding reserve for a set held at once, and the backend calls the pool made for it
     * ({@code cuMemHostAlloc} on CUDA; PyTorch's allocator makes one a buffer).
     */
    record Row(String set, int buffers, long requested, long poolReserved, long poolCalls, long powerOfTwoReserved) {

        double poolRatio() {
            return (double) poolReserved / requested;
        }

        double powerOfTwoRatio() {
            return (double) powerOfTwoReserved / requested;
        }
    }

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length != 0) {
            err.println("pinned-waste: takes no arguments, got " + String.join(" ", args));
            return 2;
        }
        out.println("| set | buffers | requested | PINNED pool reserves | pool / requested | pool's backend calls | power-of-two rounding | power of two / requested |");
        out.println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        for (SizeSet set : sets()) {
            Row row = measure(set);
            out.printf(Locale.ROOT, "| %s | %d | %.1f MiB | %.1f MiB | %.3f | %d | %.1f MiB | %.3f |%n", row.set(), row.buffers(),
                    row.requested() / (double) MiB, row.poolReserved() / (double) MiB, row.poolRatio(), row.poolCalls(),
                    row.powerOfTwoReserved() / (double) MiB, row.powerOfTwoRatio());
        }
        return 0;
    }

    static List<SizeSet> sets() {
        SplittableRandom random = new SplittableRandom(20);
        long[] uniform = new long[400];
        for (int i = 0; i < uniform.length; i++) {
            uniform[i] = MiB + random.nextLong(63 * MiB + 1);
        }
        List<Long> inputs = new ArrayList<>();
        for (int batch : new int[] {4, 8, 16}) {
            for (int sequence = 32; sequence <= 512; sequence += 16) {
                for (int tensor = 0; tensor < 4; tensor++) {
                    inputs.add(8L * batch * sequence);
                }
            }
        }
        long[] bert = inputs.stream().mapToLong(Long::longValue).toArray();
        long[] bert64 = new long[64 * bert.length];
        for (int i = 0; i < bert64.length; i++) {
            bert64[i] = bert[i % bert.length];
        }
        return List.of(new SizeSet("uniform 1–64 MiB", uniform), new SizeSet("BERT batch inputs", bert),
                new SizeSet("BERT batch inputs ×64", bert64));
    }

    /** Allocates every size of the set from a fresh PINNED pool of plain segments and holds them: what it reserves then. */
    static Row measure(SizeSet set) {
        long requested = 0;
        long powerOfTwo = 0;
        for (long size : set.sizes()) {
            requested += size;
            powerOfTwo += Long.highestOneBit(size - 1) << 1;
        }
        BackendResource upstream = new BackendResource(new AddressSpaceBackend(1L << 40, AddressSpaceBackend.DEFAULT_GRANULARITY, false),
                MemoryLocation.PINNED, 1L << 40, "compute.memory.pinning.max-pinned-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT,
                MemoryEventListener.NONE);
        try (CachingPoolResource pool = new CachingPoolResource(upstream, PoolSettings.plainSegments(), MemoryEventListener.NONE)) {
            List<Block> held = new ArrayList<>(set.sizes().length);
            for (long size : set.sizes()) {
                held.add(pool.allocate(size));
            }
            long reserved = pool.reservedBytes();
            long calls = upstream.backendAllocations();
            held.forEach(pool::deallocate);
            return new Row(set.name(), set.sizes().length, requested, reserved, calls, powerOfTwo);
        }
    }
}
