package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.ComputeBackend;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A buffer dropped without close() is found, reported with where it was allocated, and its memory returns. */
class LeakDetectionTest {

    private static UnifiedMemoryManager manager(LeakDetectionLevel level) {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).leakDetection(level)
                .timelineInterval(Duration.ZERO).build();
    }

    @SuppressWarnings("resource")
    private static void leak(UnifiedMemoryManager manager) {
        manager.allocate(4096, MemoryLocation.DEVICE).copyFrom(new byte[] {1});
    }

    @SuppressWarnings("resource")
    private static void leakMapping(UnifiedMemoryManager manager, Path file) throws IOException {
        manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY).copyTo(new byte[1]);
    }

    /** Until the leaked buffer's memory is back and counted as a leak: the detector counts it after it gives the memory back. */
    private static void awaitCollected(UnifiedMemoryManager manager, long expectedLive) throws InterruptedException {
        for (int i = 0; i < 100 && (manager.statistics(MemoryLocation.DEVICE).liveBuffers() != expectedLive || manager.leaksDetected() == 0); i++) {
            System.gc();
            Thread.sleep(20);
        }
    }

    @Test
    void paranoidReportsTheSiteAndGivesTheMemoryBack() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.PARANOID)) {
            leak(manager);
            List<LiveBufferReport> live = manager.liveBuffers();
            assertThat(live).singleElement().satisfies(r -> {
                assertThat(r.sizeBytes()).isEqualTo(4096);
                assertThat(r.allocationSite()).contains("LeakDetectionTest.leak");
            });
            awaitCollected(manager, 0);
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
            assertThat(manager.leaksDetected()).isEqualTo(1);
        }
    }

    @Test
    void disabledTracksNothingAndClosedBuffersAreNotLeaks() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.DISABLED)) {
            leak(manager);
            assertThat(manager.liveBuffers()).singleElement().satisfies(r -> assertThat(r.allocationSite()).isNull());
            System.gc();
            Thread.sleep(50);
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).as("untracked: lost until close").isEqualTo(1);
        }
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.PARANOID)) {
            manager.allocate(64, MemoryLocation.DEVICE).close();
            System.gc();
            Thread.sleep(50);
            assertThat(manager.leaksDetected()).isZero();
        }
    }

    @Test
    void simpleSamplesAboutOneBufferInTheInterval() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.SIMPLE)) {
            int n = LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL * 40;
            for (int i = 0; i < n; i++) {
                leak(manager);
            }
            long before = manager.statistics(MemoryLocation.DEVICE).liveBuffers();
            for (int i = 0; i < 20; i++) {
                System.gc();
                Thread.sleep(20);
            }
            // a leak is counted once its memory is back: read until no leak is between the two, as the last GC may
            // still have the detector at work
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            long found;
            long live;
            do {
                found = manager.leaksDetected();
                live = manager.statistics(MemoryLocation.DEVICE).liveBuffers();
            } while (live != before - found && System.nanoTime() < deadline);
            assertThat(found).isBetween(10L, 100L);
            assertThat(live).isEqualTo(before - found);
        }
    }

    @Test
    void everyLeakedMappingIsFoundAtSimpleAndUnmapped(@TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("leaked.bin"), new byte[4096]);
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.SIMPLE)) {
            for (int i = 0; i < 3; i++) {
                leakMapping(manager, file);
            }
            assertThat(manager.mappedFileStatistics().openMappings()).isEqualTo(3);
            // each leak is counted once its mapping is gone: wait for the counts too
            for (int i = 0; i < 100 && (manager.mappedFileStatistics().openMappings() > 0 || manager.leaksDetected() < 3); i++) {
                System.gc();
                Thread.sleep(20);
            }
            assertThat(manager.mappedFileStatistics().openMappings()).as("not a sample: every mapping is tracked").isZero();
            assertThat(manager.leaksDetected()).isEqualTo(3);
        }
    }

    /**
     * One thread copies into a buffer, another closes it meanwhile, and neither touches it after: a close, no leak. The
     * close waits on the buffer for the copy; compiled, as a service's code is, neither frame needs the handle any more
     * by then, and unless the close keeps it reachable until it is done, the collector may take it and the detector
     * report it (an ERROR line, the count and the listeners' event, for a buffer that was closed).
     */
    @Test
    void aBufferClosedWhileAnotherThreadCopiesIntoItIsNoLeak() throws Exception {
        HeldCopies copies = new HeldCopies(new SimulatedDiscreteBackend());
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(copies.backend())
                .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(Duration.ZERO).build()) {
            byte[] data = new byte[64];
            AtomicReference<UnifiedBuffer> toCopy = new AtomicReference<>();
            AtomicReference<UnifiedBuffer> toClose = new AtomicReference<>();
            try (UnifiedMemoryManager untracked = manager(LeakDetectionLevel.DISABLED)) {
                for (int i = 0; i < 20_000; i++) { // until the JIT has compiled the two below (no stack walks meanwhile)
                    toCopy.set(untracked.allocate(4096, MemoryLocation.DEVICE));
                    toClose.set(toCopy.get());
                    copyInto(toCopy, data);
                    close(toClose);
                }
            }
            for (int round = 0; round < 5; round++) {
                toCopy.set(manager.allocate(4096, MemoryLocation.DEVICE));
                toClose.set(toCopy.get());
                CountDownLatch begun = copies.holdNext();
                Thread copier = Thread.ofPlatform().start(() -> copyInto(toCopy, data));
                assertThat(begun.await(10, TimeUnit.SECONDS)).isTrue();
                Thread closer = Thread.ofPlatform().start(() -> close(toClose));
                while (closer.isAlive() && closer.getState() != Thread.State.BLOCKED) {
                    Thread.onSpinWait(); // the close waits for the copy
                }
                System.gc();
                Thread.sleep(50); // the detector's moment to find the handle collected
                copies.release();
                copier.join();
                closer.join();
            }
            System.gc();
            Thread.sleep(50);
            assertThat(manager.leaksDetected()).as("buffers closed while in use reported as leaks").isZero();
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
        }
    }

    /** Takes the buffer out, so that only this frame holds it, and copies into it. */
    private static void copyInto(AtomicReference<UnifiedBuffer> buffer, byte[] data) {
        buffer.getAndSet(null).copyFrom(data);
    }

    /** Takes the buffer out, so that only this frame holds it, and closes it. */
    private static void close(AtomicReference<UnifiedBuffer> buffer) {
        buffer.getAndSet(null).close();
    }

    /** A backend whose copy to the device, once {@link #holdNext()} was called, waits after it began until {@link #release()}. */
    private static final class HeldCopies {
        private final ComputeBackend backend;
        private volatile CountDownLatch begun;
        private volatile CountDownLatch released = new CountDownLatch(0);

        HeldCopies(ComputeBackend delegate) {
            this.backend = (ComputeBackend) Proxy.newProxyInstance(ComputeBackend.class.getClassLoader(), new Class<?>[] {ComputeBackend.class},
                    (proxy, method, args) -> {
                        CountDownLatch started = begun;
                        if (started != null && method.getName().equals("copyToDevice")) {
                            begun = null;
                            started.countDown();
                            released.await(10, TimeUnit.SECONDS);
                        }
                        try {
                            return method.invoke(delegate, args);
                        } catch (InvocationTargetException e) {
                            throw e.getCause();
                        }
                    });
        }

        ComputeBackend backend() {
            return backend;
        }

        CountDownLatch holdNext() {
            released = new CountDownLatch(1);
            CountDownLatch started = new CountDownLatch(1);
            begun = started;
            return started;
        }

        void release() {
            released.countDown();
        }
    }
}
