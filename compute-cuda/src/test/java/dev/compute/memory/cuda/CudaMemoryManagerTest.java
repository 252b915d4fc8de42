package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReference;
import jcuda.Pointer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The manager and its pool on a real device: what only a GPU can show. */
class CudaMemoryManagerTest {

    private UnifiedMemoryManager manager;

    @AfterEach
    void close() {
        if (manager != null) {
            manager.close();
        }
    }

    private CudaBackend open(boolean expandableSegments) {
        CudaBackend backend = CudaTestSupport.openBackend();
        manager = CudaTestSupport.managerOn(backend).expandableSegments(expandableSegments).releaseThreshold(0).build();
        return backend;
    }

    @Test
    void anImpossibleRequestFailsWithTheDiagnosticAndLeavesThePoolWholeWithExpandableSegments() {
        impossibleRequest(true);
    }

    @Test
    void anImpossibleRequestFailsWithTheDiagnosticAndLeavesThePoolWholeWithPlainSegments() {
        impossibleRequest(false);
    }

    /** Twice the device's memory, under a pool cap that allows it: the driver itself refuses. */
    private void impossibleRequest(boolean expandableSegments) {
        CudaBackend backend = CudaTestSupport.openBackend();
        long total = backend.info().deviceTotalBytes();
        manager = CudaTestSupport.managerOn(backend).expandableSegments(expandableSegments).releaseThreshold(0)
                .maxPoolSize(total * 8).build();
        try (UnifiedBuffer kept = manager.allocate(DataType.FLOAT32, 1 << 20, MemoryLocation.DEVICE)) {
            kept.copyFrom(new float[] {1, 2, 3});
            MemoryStatistics before = manager.statistics(MemoryLocation.DEVICE);
            long impossible = total * 2;
            assertThatThrownBy(() -> manager.allocate(impossible, MemoryLocation.DEVICE))
                    .isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("requested " + impossible)
                    .hasMessageContaining("device free")
                    .hasMessageContaining(expandableSegments ? "cuMemCreate" : "cuMemAlloc")
                    .hasMessageContaining("CUDA_ERROR_OUT_OF_MEMORY (2)");
            MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
            assertThat(after.allocatedBytes()).isEqualTo(before.allocatedBytes());
            assertThat(after.liveBuffers()).isEqualTo(before.liveBuffers());
            assertThat(backend.memoryInfo().freeBytes()).as("nothing stays mapped for the failed request").isGreaterThan(total / 2);
            float[] back = new float[3];
            kept.copyTo(0, back, 0, 3);
            assertThat(back).containsExactly(1, 2, 3);
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, 1 << 20, MemoryLocation.DEVICE)) {
                manager.ops().fill(next, 2);
                assertThat(manager.ops().sum(next)).isEqualTo(2.0 * (1 << 20));
            }
        }
    }

    @Test
    void trimmingExpandableSegmentsRaisesTheDevicesFreeMemory() {
        CudaBackend backend = open(true);
        long bytes = 1L << 30;
        try (UnifiedBuffer big = manager.allocate(bytes, MemoryLocation.DEVICE)) {
            big.copyFrom(new byte[4096]);
        }
        MemoryStatistics cached = manager.statistics(MemoryLocation.DEVICE);
        assertThat(cached.cachedBytes()).as("the closed buffer's memory stays cached").isGreaterThanOrEqualTo(bytes);
        long freeBefore = backend.memoryInfo().freeBytes();
        long released = manager.releaseCachedMemory();
        long freeAfter = backend.memoryInfo().freeBytes();
        assertThat(released).isGreaterThanOrEqualTo(bytes);
        assertThat(freeAfter - freeBefore).isGreaterThanOrEqualTo(bytes * 9 / 10);
    }

    @Test
    void pinnedBuffersAreReused() {
        open(true);
        for (int i = 0; i < 5; i++) {
            try (UnifiedBuffer pinned = manager.allocate(4 << 20, MemoryLocation.PINNED)) {
                pinned.hostView().set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0, (byte) i);
            }
        }
        MemoryStatistics pinned = manager.statistics(MemoryLocation.PINNED);
        assertThat(pinned.backendAllocations()).isEqualTo(1);
        assertThat(pinned.poolHits()).isGreaterThanOrEqualTo(4);
    }

    @Test
    void twoThreadsOnOneDevice() throws Exception {
        open(true);
        CountDownLatch start = new CountDownLatch(1);
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            List<Future<?>> runs = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int seed = t;
                runs.add(threads.submit(() -> {
                    Random random = new Random(seed);
                    start.await();
                    for (int i = 0; i < 50; i++) {
                        int n = 1 + random.nextInt(500_000);
                        float[] data = new float[n];
                        for (int j = 0; j < n; j++) {
                            data[j] = random.nextInt(1000);
                        }
                        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
                            buffer.copyFrom(data);
                            manager.ops().scale(buffer, 2);
                            float[] back = new float[n];
                            buffer.copyTo(back);
                            for (int j = 0; j < n; j++) {
                                if (back[j] != 2 * data[j]) {
                                    throw new AssertionError("thread " + seed + ", round " + i + ", element " + j + ": " + back[j] + " != " + 2 * data[j]);
                                }
                            }
                        }
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> run : runs) {
                run.get();
            }
        } finally {
            threads.shutdown();
        }
    }

    /**
     * A buffer closed right after a kernel on it was launched must not be handed to a new owner before the
     * kernel ends. The kernel here is a fill queued behind a spin of about a second on this thread's stream
     * (2e9 clock cycles: 1.0 s at the H100's 1.98 GHz boost clock, longer at lower clocks); the new owner writes
     * from another thread, whose stream is not ordered after the fill, so memory reused early would be
     * overwritten by the late fill.
     *
     * <p>While the spin runs, the new owner's allocation must make no driver call: the pool is warmed first (a
     * spare block of the same size, mapped and freed), so the new owner gets the spare's memory from the pool.
     * Mapping pages ({@code cuMemCreate}, {@code cuMemMap}, {@code cuMemSetAccess}) is not documented as
     * asynchronous to running kernels ("any CUDA API call may block or synchronize"); had it waited for the spin,
     * the check that the fill is still queued would fail although the pool is right. The staging buffers the new
     * owner's copy borrows were made by {@code first}'s upload, before the spin.
     */
    @Test
    void aBufferClosedWhileItsKernelRunsIsNotReusedBeforeTheKernelEnds() throws Exception {
        CudaBackend backend = open(true);
        int n = 4 << 20;
        try (PtxModule tests = backend.loadModule("/dev/compute/memory/cuda/test-kernels.ptx")) {
            UnifiedBuffer spare = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE);
            UnifiedBuffer first = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE);
            spare.close();
            first.copyFrom(new float[n]);
            long mapCallsBefore = manager.statistics(MemoryLocation.DEVICE).backendAllocations();
            jcuda.driver.CUstream stream = backend.enter();
            CudaKernelOps.launch(tests.function("spin"), 1, stream, Pointer.to(Pointer.to(new long[] {2_000_000_000L})));
            CompletableFuture<Void> fill = manager.ops().fillAsync(first, 7);
            first.close();
            assertThat(fill).as("the spin keeps the fill queued").isNotDone();

            float[] mine = new float[n];
            Arrays.fill(mine, 3);
            AtomicReference<UnifiedBuffer> second = new AtomicReference<>();
            Thread writer = Thread.ofPlatform().unstarted(() -> {
                UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE);
                buffer.copyFrom(mine);
                second.set(buffer);
            });
            // the writer must work on another stream than this thread, or stream order alone would protect it
            for (int tries = 0; backend.streams().index(writer) == backend.streams().index(Thread.currentThread()); tries++) {
                assertThat(tries).isLessThan(100);
                writer = Thread.ofPlatform().unstarted(writer::run);
            }
            writer.start();
            writer.join();
            assertThat(manager.statistics(MemoryLocation.DEVICE).backendAllocations())
                    .as("the new owner's memory came from the pool, with no driver call while the spin ran").isEqualTo(mapCallsBefore);
            assertThat(fill).as("the new owner wrote while the old kernel was still queued").isNotDone();
            fill.join();
            try (UnifiedBuffer buffer = second.get()) {
                float[] back = new float[n];
                buffer.copyTo(back);
                assertThat(back).as("the new owner's data after the old kernel ran").containsOnly(3f);
            }
        }
    }
}
