package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Closes of a child budget racing every allocation form on other threads: the books must come back to nothing. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class BudgetCloseRaceTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    @Test
    void everyFormRacingACloseLeavesNothingCounted() throws Exception {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).closeTimeout(Duration.ofSeconds(2)).deviceWaitTimeout(Duration.ofSeconds(2)).build()) {
            MemoryBudget tenant = manager.budget("tenant", 40 * MiB);
            ConcurrentLinkedQueue<UnifiedBuffer> got = new ConcurrentLinkedQueue<>();
            ConcurrentLinkedQueue<CompletableFuture<UnifiedBuffer>> futures = new ConcurrentLinkedQueue<>();
            AtomicReference<Throwable> unexpected = new AtomicReference<>();
            for (int round = 0; round < 150; round++) {
                BudgetSpec spec = BudgetSpec.of("request-" + round, 16 * MiB);
                if (round % 3 == 0) {
                    spec = spec.withReservation(DEVICE, 2 * MiB);
                }
                MemoryBudget request = tenant.child(spec);
                CountDownLatch start = new CountDownLatch(1);
                List<Thread> workers = new ArrayList<>();
                for (int t = 0; t < 3; t++) {
                    workers.add(Thread.ofPlatform().start(() -> {
                        try {
                            start.await();
                            work(request, got, futures);
                        } catch (Throwable e) {
                            unexpected.compareAndSet(null, e);
                        }
                    }));
                }
                start.countDown();
                for (int spin = ThreadLocalRandom.current().nextInt(2000); spin > 0; spin--) {
                    Thread.onSpinWait();
                }
                if (round % 2 == 0) {
                    request.close();
                } else {
                    tenant.children().forEach(MemoryBudget::close);
                }
                for (Thread worker : workers) {
                    worker.join(60_000);
                    assertThat(worker.isAlive()).isFalse();
                }
                for (UnifiedBuffer buffer; (buffer = got.poll()) != null; ) {
                    buffer.close();
                }
            }
            for (CompletableFuture<UnifiedBuffer> future : futures) {
                try {
                    future.get(30, TimeUnit.SECONDS).close();
                } catch (java.util.concurrent.ExecutionException | java.util.concurrent.CancellationException expected) {
                    // refused, timed out, cancelled or closed
                }
            }
            assertThat(unexpected.get()).isNull();
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
            assertThat(figures.liveBuffers()).as(figures.toString()).isZero();
            assertThat(figures.waitingRequests()).isZero();
            assertThat(figures.allocatedBytesPeak()).isLessThanOrEqualTo(40 * MiB);
            assertThat(tenant.children()).isEmpty();
            // all 40 MiB are the tenant's again, and nothing stays counted under way
            try (UnifiedBuffer all = tenant.allocate(40 * MiB, DEVICE)) {
                assertThat(tenant.statistics().allocatedBytes()).isEqualTo(40 * MiB);
            }
            tenant.close();
            // and the cap is all free: a root may reserve every byte of it
            try (MemoryBudget whole = manager.budget(BudgetSpec.of("whole", 64 * MiB).withReservation(DEVICE, 64 * MiB))) {
                assertThat(whole.statistics().reservedBytes()).isEqualTo(64 * MiB);
            }
        }
    }

    /**
     * What {@code closeAndReport} says a closing tree still held is what its callers were handed and left open: a buffer
     * whose allocation failed with the close is no request's leftover, and one handed out is never left out; mapped
     * files among them, which leave nothing mapped.
     */
    @Test
    void theCloseReportsExactlyTheBuffersItsCallersGot(@TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("mapped.bin"), new byte[8192]);
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).build()) {
            for (int round = 0; round < 40; round++) {
                MemoryBudget root = manager.budget("root", 48 * MiB);
                MemoryBudget mid = root.child("mid", 40 * MiB);
                MemoryBudget leaf = mid.child("leaf", 30 * MiB);
                MemoryBudget[] through = {root, mid, leaf, leaf};
                ConcurrentLinkedQueue<UnifiedBuffer> got = new ConcurrentLinkedQueue<>();
                AtomicReference<Throwable> unexpected = new AtomicReference<>();
                CountDownLatch started = new CountDownLatch(through.length);
                List<Thread> workers = new ArrayList<>();
                for (int t = 0; t < through.length; t++) {
                    MemoryBudget budget = through[t];
                    int first = t;
                    workers.add(Thread.ofPlatform().start(() -> {
                        started.countDown();
                        for (int i = first; i < first + 400; i++) {
                            try {
                                switch (i % 5) {
                                    case 0 -> got.add(budget.allocate(4096, DEVICE));
                                    case 1 -> got.addAll(budget.allocateBatch(DataType.INT8, new long[] {20480, 100}, MemoryLocation.HOST));
                                    case 2 -> budget.tryAllocate(8192, DEVICE).ifPresent(got::add);
                                    case 3 -> got.add(budget.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY));
                                    default -> got.add(budget.allocateAsync(12288, DEVICE, Duration.ofMillis(5)).join());
                                }
                            } catch (IllegalStateException closed) {
                                // the close came first
                            } catch (java.util.concurrent.CompletionException failed) {
                                if (!(failed.getCause() instanceof IllegalStateException)) {
                                    unexpected.compareAndSet(null, failed);
                                }
                            } catch (Throwable e) {
                                unexpected.compareAndSet(null, e);
                            }
                        }
                    }));
                }
                started.await();
                for (int spin = ThreadLocalRandom.current().nextInt(20_000); spin > 0; spin--) {
                    Thread.onSpinWait();
                }
                List<MemoryBudget.Leftover> left = root.closeAndReport();
                for (Thread worker : workers) {
                    worker.join();
                }
                assertThat(unexpected.get()).isNull();
                assertThat(got).allMatch(UnifiedBuffer::isClosed);
                assertThat(left.stream().mapToLong(MemoryBudget.Leftover::buffers).sum()).as("round %d: %s", round, left).isEqualTo(got.size());
                assertThat(left.stream().mapToLong(MemoryBudget.Leftover::bytes).sum()).as("round %d: %s", round, left)
                        .isEqualTo(got.stream().mapToLong(UnifiedBuffer::byteSize).sum());
                assertThat(manager.statistics(DEVICE).liveBuffers()).isZero();
                assertThat(manager.mappedFileStatistics().openMappings()).isZero();
            }
        }
    }

    /**
     * A close that came as mapFile counted its mapping reported the mapping as still held by the budget, though mapFile
     * then closed it and threw: its caller never had it. Only a mapping its caller got is a leftover now.
     */
    @Test
    void aMappingRacingItsBudgetsCloseIsALeftoverOnlyWhereItsCallerGotIt(@TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("mapped.bin"), new byte[4096]);
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).build()) {
            for (int round = 0; round < 1000; round++) {
                MemoryBudget budget = manager.budget("mapping", MiB);
                List<UnifiedBuffer> got = new ArrayList<>();
                AtomicReference<Throwable> unexpected = new AtomicReference<>();
                CountDownLatch started = new CountDownLatch(1);
                Thread mapping = Thread.ofPlatform().start(() -> {
                    started.countDown();
                    try {
                        while (got.size() < 1000) { // mapping until the close comes, so that it comes during one
                            got.add(budget.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY));
                        }
                    } catch (IllegalStateException closed) {
                        // the close came
                    } catch (Throwable e) {
                        unexpected.set(e);
                    }
                });
                started.await();
                for (int spin = ThreadLocalRandom.current().nextInt(20_000); spin > 0; spin--) {
                    Thread.onSpinWait();
                }
                List<MemoryBudget.Leftover> left = budget.closeAndReport();
                mapping.join();
                assertThat(unexpected.get()).isNull();
                assertThat(left.stream().mapToLong(MemoryBudget.Leftover::buffers).sum()).as("round %d", round).isEqualTo(got.size());
                assertThat(manager.mappedFileStatistics().openMappings()).isZero();
            }
        }
    }

    private static void work(MemoryBudget request, ConcurrentLinkedQueue<UnifiedBuffer> got, ConcurrentLinkedQueue<CompletableFuture<UnifiedBuffer>> futures) {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        List<UnifiedBuffer> mine = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            long size = (1 + random.nextInt(8)) * (MiB / 4);
            try {
                switch (random.nextInt(5)) {
                    case 0 -> mine.add(request.allocate(size, DEVICE));
                    case 1 -> request.tryAllocate(size, DEVICE).ifPresent(mine::add);
                    case 2 -> {
                        CompletableFuture<UnifiedBuffer> f = request.allocateAsync(size, DEVICE, Duration.ofMillis(random.nextInt(50)));
                        if (random.nextBoolean()) {
                            f.cancel(false);
                        }
                        futures.add(f);
                    }
                    case 3 -> mine.addAll(request.allocateBatch(DataType.INT8, new long[] {size, size / 2, 1}, DEVICE));
                    default -> {
                        if (!mine.isEmpty()) {
                            mine.remove(random.nextInt(mine.size())).close();
                        }
                    }
                }
            } catch (DeviceOutOfMemoryException | IllegalStateException expected) {
                // refused, or the budget closed
            }
        }
        got.addAll(mine);
    }
}
