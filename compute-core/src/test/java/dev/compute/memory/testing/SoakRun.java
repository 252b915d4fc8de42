package dev.compute.memory.testing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

/**
 * A bounded soak: several threads mix allocations of many sizes at every location, copies in and out (each
 * verified byte for byte), buffer-to-buffer copies and ops, while a checker verifies the pools' structure
 * periodically. At the end every buffer is closed, the full invariants are checked and all cached memory is
 * released, which must bring reserved memory back to zero everywhere.
 */
public final class SoakRun {

    /** What the soak did. */
    public record Report(long operations, long bytesAllocated, long bytesCopied, long peakReservedBytes, long structureChecks) {
        @Override
        public String toString() {
            return String.format("soak: %,d operations, %,d bytes allocated, %,d bytes copied, peak reserved %,d bytes, %d structure checks",
                    operations, bytesAllocated, bytesCopied, peakReservedBytes, structureChecks);
        }
    }

    private SoakRun() {}

    /**
     * Runs for {@code duration} and at least {@code minOperations} operations, the second a floor of work that a loaded
     * machine reaches late rather than a speed a test could only time: it gives up at five times the duration past the
     * first, so a soak that hangs still ends (and its report then shows fewer operations than asked).
     */
    public static Report run(UnifiedMemoryManager manager, int threads, Duration duration, long minOperations, long seed) throws Exception {
        AtomicLong operations = new AtomicLong();
        AtomicLong bytesAllocated = new AtomicLong();
        AtomicLong bytesCopied = new AtomicLong();
        AtomicLong peakReserved = new AtomicLong();
        AtomicLong checks = new AtomicLong();
        long deadline = System.nanoTime() + duration.toNanos();
        long giveUp = deadline + 5 * duration.toNanos();
        BooleanSupplier goOn = () -> {
            long now = System.nanoTime();
            return now < deadline || (operations.get() < minOperations && now < giveUp);
        };
        AtomicBoolean working = new AtomicBoolean(true);
        List<MemoryLocation> locations = manager.locations();
        ExecutorService executor = Executors.newFixedThreadPool(threads + 1);
        try {
            List<Future<?>> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                SplittableRandom random = new SplittableRandom(seed + t);
                workers.add(executor.submit(() -> {
                    List<UnifiedBuffer> mine = new ArrayList<>();
                    try {
                        while (goOn.getAsBoolean()) {
                            step(manager, random, locations, mine, bytesAllocated, bytesCopied);
                            operations.incrementAndGet();
                        }
                    } finally {
                        mine.forEach(UnifiedBuffer::close);
                    }
                    return null;
                }));
            }
            Future<?> checker = executor.submit(() -> {
                while (working.get()) {
                    ManagerInvariants.checkStructure(manager);
                    long reserved = manager.statistics().values().stream().mapToLong(s -> s.reservedBytes()).sum();
                    peakReserved.accumulateAndGet(reserved, Math::max);
                    checks.incrementAndGet();
                    Thread.sleep(100);
                }
                return null;
            });
            try {
                for (Future<?> worker : workers) {
                    worker.get();
                }
            } finally {
                working.set(false);
            }
            checker.get();
        } finally {
            executor.shutdownNow();
        }
        ManagerInvariants.checkQuiescent(manager);
        manager.releaseCachedMemory();
        manager.statistics().forEach((location, s) -> {
            assertThat(s.liveBuffers()).as("%s live after the soak", location).isZero();
            assertThat(s.reservedBytes()).as("%s reserved back to its baseline after trim", location).isZero();
        });
        return new Report(operations.get(), bytesAllocated.get(), bytesCopied.get(), peakReserved.get(), checks.get());
    }

    private static void step(UnifiedMemoryManager manager, SplittableRandom random, List<MemoryLocation> locations,
                             List<UnifiedBuffer> mine, AtomicLong bytesAllocated, AtomicLong bytesCopied) {
        int action = random.nextInt(10);
        if (mine.isEmpty() || (action < 4 && mine.size() < 24)) {
            // sizes spread over six orders of magnitude, as real workloads are
            long size = 1L << random.nextInt(23);
            size += random.nextLong(size);
            MemoryLocation location = locations.get(random.nextInt(locations.size()));
            UnifiedBuffer buffer = random.nextBoolean() && size >= 4
                    ? manager.allocate(DataType.FLOAT32, size / 4, location)
                    : manager.allocate(size, location);
            bytesAllocated.addAndGet(buffer.byteSize());
            mine.add(buffer);
        } else if (action < 6) {
            mine.remove(random.nextInt(mine.size())).close();
        } else if (action < 8) {
            UnifiedBuffer buffer = mine.get(random.nextInt(mine.size()));
            int length = (int) Math.min(buffer.byteSize(), 1 + random.nextInt(64 << 10));
            long offset = random.nextLong(buffer.byteSize() - length + 1);
            byte[] data = new byte[length];
            random.nextBytes(data);
            buffer.copyFrom(offset, data, 0, length);
            byte[] back = new byte[length];
            buffer.copyTo(offset, back, 0, length);
            assertThat(back).as("bytes at %d of %s", offset, buffer).isEqualTo(data);
            bytesCopied.addAndGet(2L * length);
        } else if (action < 9) {
            UnifiedBuffer a = mine.get(random.nextInt(mine.size()));
            UnifiedBuffer b = mine.get(random.nextInt(mine.size()));
            long length = Math.min(a.byteSize(), b.byteSize());
            if (a != b) {
                b.copyFrom(a, 0, 0, length);
                bytesCopied.addAndGet(length);
            }
        } else {
            UnifiedBuffer buffer = mine.get(random.nextInt(mine.size()));
            if (buffer.dataType() == DataType.FLOAT32) {
                manager.ops().fill(buffer, 1.0);
                double sum = manager.ops().sum(buffer);
                assertThat(sum).isEqualTo((double) buffer.elementCount());
            }
        }
    }
}
