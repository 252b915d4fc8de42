package dev.compute.memory.contract;

import static dev.compute.memory.contract.CompactionTestBuffers.BUFFER_BYTES;
import static dev.compute.memory.contract.CompactionTestBuffers.DEVICE;
import static dev.compute.memory.contract.CompactionTestBuffers.FLOATS;
import static dev.compute.memory.contract.CompactionTestBuffers.MiB;
import static dev.compute.memory.contract.CompactionTestBuffers.assertHolds;
import static dev.compute.memory.contract.CompactionTestBuffers.deviceOffset;
import static dev.compute.memory.contract.CompactionTestBuffers.firstTwoAndLast;
import static dev.compute.memory.contract.CompactionTestBuffers.pattern;
import static dev.compute.memory.contract.CompactionTestBuffers.written;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.CompactionReport;
import dev.compute.memory.DataType;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.LiveBufferReport;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.ViewScope;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Compaction against what else holds or counts a buffer, on every backend: a view kept by another thread, device work
 * that never ends, async work queued just before, a newer host copy, and the figures kept beside the pool (budgets,
 * recordings, leak sites, snapshots). A backend module subclasses this as {@link CompactionContractTest}.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
public abstract class CompactionHoldersContractTest {


    /** A builder on the backend under test; the test adds its settings. */
    protected abstract UnifiedMemoryManagerBuilder builder();

    private UnifiedMemoryManager manager() {
        return builder().releaseThreshold(0).build();
    }

    @Test
    void deviceWorkThatNeverEndsIsWaitedForOnlyUntilTheDeviceWaitTimeoutAndItsBufferStays() {
        // a trim that keeps the holes: in a range, moves go only to free memory still mapped
        try (UnifiedMemoryManager manager = builder().releaseThreshold(128 * MiB).deviceWaitTimeout(Duration.ofMillis(200))
                .closeTimeout(Duration.ofMillis(200)).build()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            UnifiedBuffer last = kept.getLast();
            long offset = deviceOffset(last);
            CompletableFuture<Void> never = new CompletableFuture<>();
            try (BufferAccess access = last.deviceAccess(AccessMode.READ_WRITE)) {
                access.inFlightUntil(never);
            }

            CompactionReport stuck = manager.compact(DEVICE);
            List<CompactionReport> stuckEverywhere = manager.compact();

            assertThat(stuck.buffersInUse()).isEqualTo(1);
            assertThat(stuck.buffersMoved()).isZero();
            assertThat(stuckEverywhere).filteredOn(r -> r.location() == DEVICE).singleElement()
                    .extracting(CompactionReport::buffersInUse).isEqualTo(1L);
            never.complete(null);
            CompactionReport done = manager.compact(DEVICE);
            assertThat(done.buffersMoved()).isEqualTo(1);
            assertThat(deviceOffset(last)).isNotEqualTo(offset);
            assertHolds(last, 19);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * Device work that never ends on a buffer at every location: compacting them all waits for it once, up to the
     * device wait timeout, not once per location.
     */
    @Test
    void compactingEveryLocationWaitsForStuckDeviceWorkOnceInAll() {
        Duration deviceWait = Duration.ofSeconds(1);
        try (UnifiedMemoryManager manager = builder().releaseThreshold(0).deviceWaitTimeout(deviceWait)
                .closeTimeout(Duration.ofMillis(200)).build()) {
            CompletableFuture<Void> never = new CompletableFuture<>();
            List<UnifiedBuffer> stuck = new ArrayList<>();
            for (MemoryLocation location : manager.locations()) {
                UnifiedBuffer buffer = manager.allocate(BUFFER_BYTES, location);
                buffer.copyFrom(new byte[] {1});
                try (BufferAccess access = buffer.hostAccess(AccessMode.READ)) { // every location has a host access
                    access.inFlightUntil(never);
                }
                stuck.add(buffer);
            }
            assertThat(stuck).hasSizeGreaterThan(2);

            long start = System.nanoTime();
            List<CompactionReport> reports = manager.compact();
            Duration took = Duration.ofNanos(System.nanoTime() - start);

            assertThat(reports).allSatisfy(report -> assertThat(report.buffersInUse()).isEqualTo(1));
            assertThat(took).as("one device wait timeout for all locations, not one each")
                    .isLessThan(deviceWait.multipliedBy(stuck.size() - 1));
            never.complete(null);
            stuck.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void aViewThatAnotherThreadKeepsHoldsItsBufferAndItsSlicesInPlace() throws Exception {
        try (UnifiedMemoryManager manager = manager()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            UnifiedBuffer last = kept.getLast();
            UnifiedBuffer middle = kept.get(1);
            UnifiedBuffer sliceOfSlice = middle.slice(FLOATS / 2, FLOATS / 4).slice(16, 1024);
            CountDownLatch viewsTaken = new CountDownLatch(1);
            CountDownLatch compacted = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread holder = Thread.ofPlatform().start(() -> {
                try {
                    MemorySegment whole = last.hostView();
                    MemorySegment part = sliceOfSlice.hostView();
                    viewsTaken.countDown();
                    compacted.await();
                    byte[] expected = pattern(BUFFER_BYTES, 19);
                    for (int i = 0; i < BUFFER_BYTES; i += 4093) {
                        if (whole.get(ValueLayout.JAVA_BYTE, i) != expected[i]) {
                            throw new AssertionError("the view saw byte " + i + " change under it");
                        }
                    }
                    whole.fill((byte) 7);
                    part.fill((byte) 9);
                } catch (Throwable e) {
                    failure.set(e);
                }
            });
            viewsTaken.await();
            long lastOffset = deviceOffset(last);
            long middleOffset = deviceOffset(middle);

            CompactionReport report = manager.compact(DEVICE);
            compacted.countDown();
            holder.join();

            assertThat(failure.get()).isNull();
            assertThat(report.buffersInUse()).as("both buffers have an open view").isEqualTo(2);
            assertThat(deviceOffset(last)).isEqualTo(lastOffset);
            assertThat(deviceOffset(middle)).isEqualTo(middleOffset);
            byte[] read = new byte[BUFFER_BYTES];
            last.copyTo(read);
            assertThat(read).containsOnly((byte) 7);
            byte[] part = new byte[4096];
            sliceOfSlice.copyTo(part);
            assertThat(part).containsOnly((byte) 9);
            assertHolds(kept.getFirst(), 0);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A slice closed on one thread while another, inside a view scope, still has a view of it: the view lasts until the
     * scope ends, and until then the buffer must stay where the view reads it.
     */
    @Test
    void aViewOfASliceClosedByAnotherThreadStillHoldsTheBufferUntilItsThreadLetsGo() throws Exception {
        try (UnifiedMemoryManager manager = manager()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            UnifiedBuffer last = kept.getLast();
            UnifiedBuffer tail = last.slice(FLOATS - 1024, 1024);
            long offset = deviceOffset(last);
            CountDownLatch viewTaken = new CountDownLatch(1);
            CountDownLatch sliceClosedAndCompacted = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread holder = Thread.ofPlatform().start(() -> {
                try (ViewScope scope = ViewScope.open()) {
                    MemorySegment view = tail.hostView();
                    viewTaken.countDown();
                    sliceClosedAndCompacted.await();
                    byte[] expected = pattern(BUFFER_BYTES, 19);
                    for (int i = 0; i < 4096; i++) {
                        if (view.get(ValueLayout.JAVA_BYTE, i) != expected[BUFFER_BYTES - 4096 + i]) {
                            throw new AssertionError("the view of the closed slice saw byte " + i + " change under it");
                        }
                    }
                    view.fill((byte) 5);
                } catch (Throwable e) {
                    failure.set(e);
                }
            });
            viewTaken.await();
            tail.close();

            CompactionReport whileViewed = manager.compact(DEVICE);
            sliceClosedAndCompacted.countDown();
            holder.join();

            assertThat(failure.get()).isNull();
            assertThat(whileViewed.buffersInUse()).isEqualTo(1);
            assertThat(deviceOffset(last)).isEqualTo(offset);
            byte[] end = new byte[4096];
            last.copyTo(BUFFER_BYTES - 4096, end, 0, end.length);
            assertThat(end).containsOnly((byte) 5);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void asyncOpsAndCopiesQueuedJustBeforeLandInTheBuffersNewPlace() {
        try (UnifiedMemoryManager manager = manager(); Arena arena = Arena.ofConfined()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            UnifiedBuffer first = kept.getFirst();
            UnifiedBuffer last = kept.getLast();
            MemorySegment ones = arena.allocate(BUFFER_BYTES, 64);
            for (int i = 0; i < FLOATS; i++) {
                ones.setAtIndex(ValueLayout.JAVA_FLOAT, i, 1f);
            }
            long offset = deviceOffset(last);

            CompletableFuture<Void> copied = last.copyFromAsync(0, ones);
            CompletableFuture<Void> scaled = manager.ops().scaleAsync(last, 2);
            CompletableFuture<Void> filled = manager.ops().fillAsync(first, 0.5);
            CompletableFuture<Void> added = manager.ops().axpyAsync(4, first, last);
            CompactionReport report = manager.compact(DEVICE);
            CompletableFuture.allOf(copied, scaled, filled, added).join();

            assertThat(report.buffersMoved() + report.buffersInUse()).isPositive();
            assertThat(manager.ops().sum(last)).isEqualTo(4.0 * FLOATS);
            assertThat(manager.ops().sum(first)).isEqualTo(0.5 * FLOATS);
            float[] head = new float[16];
            last.copyTo(head);
            assertThat(head).containsOnly(4f);
            assertThat(manager.compact(DEVICE).buffersInUse()).isZero();
            assertThat(deviceOffset(last)).isNotEqualTo(offset);
            assertThat(manager.ops().sum(last)).isEqualTo(4.0 * FLOATS);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void aNewerHostCopyIsWhatTheBufferHoldsAfterItsDeviceMemoryMoved() {
        try (UnifiedMemoryManager manager = manager()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            UnifiedBuffer last = kept.getLast();
            // written only through the host: on a discrete device the device copy holds nothing yet
            UnifiedBuffer hostOnly = manager.allocate(DataType.FLOAT32, FLOATS, DEVICE);
            try (BufferAccess access = hostOnly.hostAccess(AccessMode.WRITE)) {
                access.segment().fill((byte) 0);
                for (int i = 0; i < FLOATS; i++) {
                    access.segment().setAtIndex(ValueLayout.JAVA_FLOAT, i, 3f);
                }
            }
            // written on the device, then changed through the host: the host copy is newer
            manager.ops().fill(last, 1);
            try (BufferAccess access = last.hostAccess(AccessMode.READ_WRITE)) {
                access.segment().setAtIndex(ValueLayout.JAVA_FLOAT, 0, 1001f);
            }

            manager.compact(DEVICE);

            assertThat(manager.ops().sum(last)).isEqualTo(FLOATS - 1 + 1001.0);
            assertThat(manager.ops().sum(hostOnly)).isEqualTo(3.0 * FLOATS);
            float[] read = new float[2];
            last.copyTo(read);
            assertThat(read).containsExactly(1001f, 1f);
            hostOnly.close();
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void budgetsRecordingsAndFiguresAgreeAfterMovesAndAfterTheBuffersClose() {
        try (UnifiedMemoryManager manager = manager()) {
            manager.startRecording(RecordingOptions.defaults());
            MemoryBudget budget = manager.budget("tenant", 256 * MiB);
            List<UnifiedBuffer> all = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                all.add(budget.allocate(DataType.FLOAT32, FLOATS + 1024L * i, DEVICE));
            }
            all.addAll(manager.allocateBatch(DataType.FLOAT32, new long[] {FLOATS, FLOATS + 77, 1024, FLOATS * 2}, DEVICE));
            for (int i = 0; i < 8; i++) {
                all.add(manager.allocate(DataType.FLOAT32, FLOATS + 4096L * i, DEVICE));
            }
            List<UnifiedBuffer> kept = new ArrayList<>();
            for (int i = 0; i < all.size(); i++) {
                if (i % 3 == 2) {
                    kept.add(all.get(i));
                    all.get(i).copyFrom(pattern((int) all.get(i).byteSize(), i));
                } else {
                    all.get(i).close();
                }
            }
            MemoryStatistics before = manager.statistics(DEVICE);
            BudgetStatistics budgetBefore = budget.statistics();

            CompactionReport report = manager.compact(DEVICE);

            assertThat(report.buffersMoved()).isPositive();
            MemoryStatistics after = manager.statistics(DEVICE);
            assertThat(after.allocatedBytes()).isEqualTo(before.allocatedBytes());
            assertThat(after.requestedBytes()).isEqualTo(before.requestedBytes());
            assertThat(after.liveBuffers()).isEqualTo(before.liveBuffers()).isEqualTo(kept.size());
            assertThat(budget.statistics()).isEqualTo(budgetBefore);
            assertTiles(manager.snapshot(DEVICE), kept);
            for (UnifiedBuffer buffer : kept) {
                byte[] read = new byte[(int) buffer.byteSize()];
                buffer.copyTo(read);
                assertThat(read).isEqualTo(pattern(read.length, all.indexOf(buffer)));
            }

            kept.forEach(UnifiedBuffer::close);

            AllocationTrace trace = manager.stopRecording();
            assertThat(trace.allocations()).isEqualTo(all.size());
            assertThat(trace.frees()).isEqualTo(all.size());
            assertThat(trace.earlierBlockFrees()).as("every free is matched to its allocation, moved or not").isZero();
            assertThat(budget.statistics().allocatedBytes()).isZero();
            assertThat(budget.statistics().liveBuffers()).isZero();
            MemoryStatistics closed = manager.statistics(DEVICE);
            assertThat(closed.allocatedBytes()).isZero();
            assertThat(closed.requestedBytes()).isZero();
            assertThat(closed.liveBuffers()).isZero();
            assertTiles(manager.snapshot(DEVICE), List.of());
        }
    }

    /** The blocks tile every segment, and the live ones are exactly the buffers' (by the bytes each asked for). */
    private static void assertTiles(MemorySnapshot snapshot, List<UnifiedBuffer> live) {
        List<Long> liveRequested = new ArrayList<>();
        for (MemorySnapshot.Segment segment : snapshot.segments()) {
            long at = 0;
            for (MemorySnapshot.Block block : segment.blocks()) {
                assertThat(block.offset()).as("blocks of %s tile it", segment).isEqualTo(at);
                at += block.sizeBytes();
                if (block.state() == MemorySnapshot.BlockState.LIVE) {
                    liveRequested.add(block.requestedBytes());
                }
            }
            assertThat(at).as("blocks of %s tile it", segment).isEqualTo(segment.sizeBytes());
        }
        assertThat(liveRequested).containsExactlyInAnyOrderElementsOf(live.stream().map(UnifiedBuffer::byteSize).toList());
    }

    @Test
    void leakDetectionKeepsEveryMovedBuffersAllocationSite() {
        try (UnifiedMemoryManager manager = builder().releaseThreshold(0).leakDetection(LeakDetectionLevel.PARANOID).build()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            assertThat(sitedLiveBlocks(manager.snapshot(DEVICE))).hasSize(3);

            assertThat(manager.compact(DEVICE).buffersMoved()).isPositive();

            assertThat(sitedLiveBlocks(manager.snapshot(DEVICE))).as("each live block, moved or not, keeps its site").hasSize(3)
                    .allSatisfy(site -> assertThat(site).contains("firstTwoAndLast"));
            assertThat(manager.liveBuffers()).filteredOn(b -> b.location() == DEVICE).hasSize(3)
                    .extracting(LiveBufferReport::allocationSite).allSatisfy(site -> assertThat(site).contains("firstTwoAndLast"));
            kept.forEach(UnifiedBuffer::close);
            assertThat(manager.leaksDetected()).isZero();
        }
    }

    private static List<String> sitedLiveBlocks(MemorySnapshot snapshot) {
        return snapshot.segments().stream().flatMap(s -> s.blocks().stream())
                .filter(b -> b.state() == MemorySnapshot.BlockState.LIVE && b.allocationSite() != null)
                .map(MemorySnapshot.Block::allocationSite).collect(Collectors.toList());
    }
}
