package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.AddressSpaceBackend;
import dev.compute.memory.testing.FaultInjectingBackend;
import dev.compute.memory.testing.FaultInjectingBackend.AllocationFault;
import dev.compute.memory.testing.ManagerInvariants;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** After every injected backend failure: a clear exception for the caller, a consistent pool, no segment lost. */
class FaultInjectionTest {

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend(256L << 20);
    private final FaultInjectingBackend faults = new FaultInjectingBackend(device, 7);

    /** No timeline and no scheduled trim: a test's figures move only by what it does. */
    private static UnifiedMemoryManagerBuilder quiet(UnifiedMemoryManagerBuilder builder) {
        return builder.timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO);
    }

    private UnifiedMemoryManager manager() {
        return UnifiedMemoryManager.builder().backend(faults).leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build();
    }

    @Test
    void aDriverErrorOnAllocationReachesTheCallerAndChangesNothing() {
        try (UnifiedMemoryManager manager = manager()) {
            UnifiedBuffer kept = manager.allocate(1000, MemoryLocation.DEVICE);
            manager.releaseCachedMemory();
            faults.failAllocation(1, AllocationFault.DRIVER_ERROR);
            Throwable thrown = catchThrowable(() -> manager.allocate(64 << 20, MemoryLocation.DEVICE));
            assertThat(thrown).hasMessageContaining("injected fault: driver error");
            ManagerInvariants.checkQuiescent(manager);
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isEqualTo(1);
            manager.allocate(64 << 20, MemoryLocation.DEVICE).close();
            kept.close();
        }
        assertThat(device.liveAllocations()).as("every segment freed at close").isZero();
    }

    @Test
    void anOutOfMemoryOnAllocationIsRetriedOrReportedWithFigures() {
        try (UnifiedMemoryManager manager = manager()) {
            faults.failAllocation(1, AllocationFault.OUT_OF_MEMORY);
            Throwable thrown = catchThrowable(() -> manager.allocate(1 << 20, MemoryLocation.DEVICE).close());
            if (thrown != null) {
                assertThat(thrown).isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("requested");
            }
            ManagerInvariants.checkQuiescent(manager);
        }
        assertThat(device.liveAllocations()).isZero();
    }

    /** A location whose backend refuses to give memory back stops no other location's trim, and its failure is not lost. */
    @Test
    void aTrimRefusedAtOneLocationStillTrimsTheOthersAndThrowsTheRefusal() {
        try (UnifiedMemoryManager manager = manager()) {
            manager.allocate(4 << 20, MemoryLocation.DEVICE).close();
            manager.allocate(4 << 20, MemoryLocation.HOST).close();
            faults.failGivingBackAt(MemoryLocation.DEVICE);
            assertThatThrownBy(manager::releaseCachedMemory).hasMessageContaining("injected fault: free at DEVICE");
            assertThat(manager.statistics(MemoryLocation.HOST).reservedBytes()).as("HOST trimmed though DEVICE refused").isZero();
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).as("DEVICE's memory kept").isPositive();
            ManagerInvariants.checkQuiescent(manager);
            faults.failGivingBackAt(null);
            manager.releaseCachedMemory();
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
        }
        assertThat(device.liveAllocations()).isZero();
    }

    /**
     * Before a new peak the pool moves free mapped pages rather than map more beside them: a saving, not a need, so a
     * backend that refuses the move's unmap fails no allocation; the pages stay mapped, free, and counted.
     */
    @Test
    void anUnmapRefusedWhileMovingFreePagesFailsNoAllocation() {
        FaultInjectingBackend refusing = new FaultInjectingBackend(new AddressSpaceBackend(1L << 30), 7);
        try (UnifiedMemoryManager manager = quiet(UnifiedMemoryManager.builder().backend(refusing)).build()) {
            UnifiedBuffer first = manager.allocate(64 << 20, MemoryLocation.DEVICE);
            UnifiedBuffer second = manager.allocate(64 << 20, MemoryLocation.DEVICE);
            first.close();
            refusing.failGivingBackAt(MemoryLocation.DEVICE);
            try (UnifiedBuffer larger = manager.allocate(256 << 20, MemoryLocation.DEVICE)) {
                assertThat(refusing.injectedFaults()).as("the move was tried").isPositive();
                MemoryStatistics statistics = manager.statistics(MemoryLocation.DEVICE);
                assertThat(statistics.liveBuffers()).isEqualTo(2);
                assertThat(statistics.cachedBytes()).as("the first buffer's pages, kept").isGreaterThanOrEqualTo(64 << 20);
                ManagerInvariants.checkQuiescent(manager);
            }
            second.close();
            refusing.failGivingBackAt(null);
            manager.releaseCachedMemory();
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
        }
    }

    /**
     * Out of memory, the pool gives its cached memory back and tries again: a backend that refuses to take it back leaves
     * the allocation out of memory (so {@code tryAllocate} is empty), with the refusal attached, not a driver error instead.
     */
    @Test
    void aRefusedGiveBackDuringOutOfMemoryRecoveryLeavesTheAllocationOutOfMemory() {
        FaultInjectingBackend refusing = new FaultInjectingBackend(new AddressSpaceBackend(1L << 30), 7);
        try (UnifiedMemoryManager manager = quiet(UnifiedMemoryManager.builder().backend(refusing)).maxPoolSize(64L << 20).build()) {
            UnifiedBuffer first = manager.allocate(30 << 20, MemoryLocation.DEVICE);
            UnifiedBuffer second = manager.allocate(30 << 20, MemoryLocation.DEVICE);
            first.close();
            refusing.failGivingBackAt(MemoryLocation.DEVICE);
            assertThat(manager.tryAllocate(40 << 20, MemoryLocation.DEVICE)).isEmpty();
            assertThatThrownBy(() -> manager.allocate(40 << 20, MemoryLocation.DEVICE))
                    .isInstanceOf(DeviceOutOfMemoryException.class)
                    .satisfies(e -> assertThat(e.getSuppressed()).anySatisfy(s -> assertThat(s).hasMessageContaining("injected fault")));
            ManagerInvariants.checkQuiescent(manager);
            refusing.failGivingBackAt(null);
            manager.allocate(34 << 20, MemoryLocation.DEVICE).close(); // once the backend takes the memory back
            second.close();
            manager.releaseCachedMemory();
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
        }
    }

    /**
     * A compaction's move that mapped pages for its new place unmaps the old place's pages at once: a saving, so a backend
     * refusing it ends neither the move (the buffer is at its new place, the old one free and mapped) nor the compaction.
     */
    @Test
    void anUnmapRefusedAfterACompactionsMoveEndsNeitherTheMoveNorTheCompaction() {
        FaultInjectingBackend refusing = new FaultInjectingBackend(new AddressSpaceBackend(1L << 30), 7);
        try (UnifiedMemoryManager manager = quiet(UnifiedMemoryManager.builder().backend(refusing)).releaseThreshold(64L << 20).build()) {
            long mib = 1L << 20;
            // 2 MiB pages: first [0, 1.5) MiB, hole [1.5, 6.5) with pages 1 and 2 wholly in it, third [6.5, 10), last
            // [10, 15) on pages 5 to 7: moving the last into the hole maps two pages and frees three
            UnifiedBuffer first = manager.allocate(3 * mib / 2, MemoryLocation.DEVICE);
            UnifiedBuffer hole = manager.allocate(5 * mib, MemoryLocation.DEVICE);
            UnifiedBuffer third = manager.allocate(7 * mib / 2, MemoryLocation.DEVICE);
            UnifiedBuffer last = manager.allocate(5 * mib, MemoryLocation.DEVICE);
            hole.close();
            manager.releaseCachedMemory(); // the hole's whole pages unmapped
            refusing.failGivingBackAt(MemoryLocation.DEVICE);
            CompactionReport report = manager.compact(MemoryLocation.DEVICE);
            assertThat(report.buffersMoved()).isEqualTo(1);
            assertThat(refusing.injectedFaults()).as("the old place's unmap was tried").isPositive();
            ManagerInvariants.checkQuiescent(manager);
            refusing.failGivingBackAt(null);
            first.close();
            third.close();
            last.close();
            manager.releaseCachedMemory();
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
        }
    }

    /**
     * Without a pool, a buffer's close frees its memory at once: where the backend refuses, the close says so, and the
     * memory is cached memory (reserved, free, in one piece), not an open buffer; a trim or the manager's close tries again.
     */
    @Test
    void aFreeRefusedWithoutAPoolLeavesCachedMemoryNotAnOpenBufferAndATrimTriesAgain() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(faults).poolingEnabled(false)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
            UnifiedBuffer buffer = manager.allocate(1 << 20, MemoryLocation.DEVICE);
            faults.failGivingBackAt(MemoryLocation.DEVICE);
            assertThatThrownBy(buffer::close).hasMessageContaining("injected fault: free at DEVICE");
            assertThat(buffer.isClosed()).isTrue();
            MemoryStatistics kept = manager.statistics(MemoryLocation.DEVICE);
            assertThat(kept.liveBuffers()).isZero();
            assertThat(kept.reservedBytes()).isEqualTo(1 << 20);
            assertThat(kept.cachedBytes()).isEqualTo(1 << 20);
            assertThat(kept.fragmentation()).isZero();
            assertThat(manager.liveBuffers()).as("no buffer is open").isEmpty();
            assertThatThrownBy(manager::releaseCachedMemory).hasMessageContaining("injected fault: free at DEVICE");
            faults.failGivingBackAt(null);
            assertThat(manager.releaseCachedMemory()).isEqualTo(1 << 20);
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
            assertThat(device.liveAllocations()).isZero();
            UnifiedBuffer another = manager.allocate(1 << 20, MemoryLocation.DEVICE);
            faults.failGivingBackAt(MemoryLocation.DEVICE);
            assertThatThrownBy(another::close).hasMessageContaining("injected fault");
            faults.failGivingBackAt(null);
        }
        assertThat(device.liveAllocations()).as("the manager's close tried again").isZero();
    }

    /**
     * A free the backend leaves unfinished (memory it holds and can no longer hand out) stays reserved, no cache, and
     * shown, whether a trim of the pool or a buffer's close without pooling made it; the next trim, or the close, ends it.
     */
    @Test
    void aFreeLeftUnfinishedStaysReservedAndOutOfUseUntilATrimOrTheCloseEndsIt() {
        for (boolean pooling : new boolean[] {true, false}) {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(faults).poolingEnabled(pooling)
                    .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
                manager.allocate(4 << 20, MemoryLocation.DEVICE).close();
                long reserved = manager.statistics(MemoryLocation.DEVICE).reservedBytes();
                faults.leaveFreesUnfinishedAt(MemoryLocation.DEVICE);
                manager.allocate(4 << 20, MemoryLocation.DEVICE).close();
                assertThat(manager.releaseCachedMemory()).as("pooling %s: nothing given back", pooling).isZero();
                MemoryStatistics kept = manager.statistics(MemoryLocation.DEVICE);
                assertThat(kept.reservedBytes()).as("pooling %s: still held", pooling).isEqualTo(pooling ? reserved : 4 << 20);
                assertThat(kept.cachedBytes()).as("pooling %s: nothing to serve from", pooling).isZero();
                assertThat(manager.snapshot(MemoryLocation.DEVICE).segments()).singleElement()
                        .satisfies(segment -> assertThat(segment.blocks()).singleElement()
                                .satisfies(block -> assertThat(block.state()).isEqualTo(MemorySnapshot.BlockState.RELEASING)));
                long backendAllocations = kept.backendAllocations();
                manager.allocate(4 << 20, MemoryLocation.DEVICE).close();
                assertThat(manager.statistics(MemoryLocation.DEVICE).backendAllocations())
                        .as("pooling %s: the memory left unfinished is not handed out again", pooling).isEqualTo(backendAllocations + 1);

                faults.leaveFreesUnfinishedAt(null);
                assertThat(manager.releaseCachedMemory()).isPositive();
                assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
                assertThat(device.liveAllocations()).isZero();

                faults.leaveFreesUnfinishedAt(MemoryLocation.DEVICE);
                manager.allocate(4 << 20, MemoryLocation.DEVICE).close();
                manager.releaseCachedMemory();
                faults.leaveFreesUnfinishedAt(null);
            }
            assertThat(device.liveAllocations()).as("pooling %s: the close ends the free left unfinished", pooling).isZero();
        }
    }

    /** An {@link Error} from the backend's free, at the manager's close without a pool, stops no other free. */
    @Test
    void anErrorFromOneFreeAtTheCloseStopsNoOther() {
        SimulatedDiscreteBackend host = new SimulatedDiscreteBackend(256L << 20);
        FaultInjectingBackend erring = new FaultInjectingBackend(host, 7);
        UnifiedMemoryManager manager = quiet(UnifiedMemoryManager.builder().backend(erring)).poolingEnabled(false).build();
        manager.allocate(1 << 20, MemoryLocation.DEVICE);
        manager.allocate(1 << 20, MemoryLocation.DEVICE);
        manager.allocate(1 << 20, MemoryLocation.HOST);
        erring.failGivingBackWithAnErrorAt(MemoryLocation.DEVICE);
        manager.close(); // logs what it could not free
        assertThat(erring.injectedFaults()).as("both DEVICE frees tried").isEqualTo(2);
        assertThat(host.liveAllocations()).as("the DEVICE buffers the backend kept").isEqualTo(2);
        erring.failGivingBackWithAnErrorAt(null);
    }

    @Test
    void aFailedCopyLeavesDataAndStateAsTheyWere() {
        try (UnifiedMemoryManager manager = manager(); UnifiedBuffer buffer = manager.allocate(DataType.INT32, 4, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new int[] {1, 2, 3, 4});
            BufferState before = buffer.state();
            faults.failCopy(1);
            assertThatThrownBy(() -> buffer.copyFrom(new int[] {9, 9, 9, 9})).hasMessageContaining("injected fault");
            assertThat(buffer.state()).isEqualTo(before);
            int[] back = new int[4];
            buffer.copyTo(back);
            assertThat(back).containsExactly(1, 2, 3, 4);
            faults.failCopy(1);
            assertThatThrownBy(buffer::syncToHost).hasMessageContaining("injected fault");
            buffer.syncToHost();
            assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
        }
    }

    /**
     * The copy of a compaction on out-of-memory fails: the allocation still fails as out of memory (so {@code tryAllocate}
     * is empty, not thrown at), with the copy's failure attached, and every buffer keeps its place and data.
     */
    @Test
    void aFailedCopyOfACompactionOnOutOfMemoryLeavesTheAllocationOutOfMemory() {
        long mib = 1L << 20;
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(faults).maxPoolSize(60 * mib).releaseThreshold(0)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
            List<UnifiedBuffer> all = new ArrayList<>();
            for (int i = 0; i < 18; i++) {
                UnifiedBuffer buffer = manager.allocate(DataType.INT32, 3 * mib / 4, MemoryLocation.DEVICE);
                buffer.copyFrom(new int[] {i, i + 1, i + 2});
                all.add(buffer);
            }
            List<UnifiedBuffer> kept = new ArrayList<>();
            for (int i = 0; i < all.size(); i++) {
                if (i % 3 == 0) {
                    kept.add(all.get(i));
                } else {
                    all.get(i).close();
                }
            }

            faults.failCopy(1);
            Throwable thrown = catchThrowable(() -> manager.allocate(40 * mib, MemoryLocation.DEVICE));

            assertThat(thrown).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(thrown.getSuppressed()).singleElement().satisfies(suppressed ->
                    assertThat(suppressed).hasMessageContaining("injected fault: copy within device"));
            faults.failCopy(1);
            assertThat(manager.tryAllocate(40 * mib, MemoryLocation.DEVICE)).isEmpty();
            for (int i = 0; i < kept.size(); i++) {
                int[] back = new int[3];
                kept.get(i).copyTo(back);
                assertThat(back).containsExactly(3 * i, 3 * i + 1, 3 * i + 2);
            }
            manager.allocate(40 * mib, MemoryLocation.DEVICE).close();
            kept.forEach(UnifiedBuffer::close);
            ManagerInvariants.checkQuiescent(manager);
        }
        assertThat(device.liveAllocations()).isZero();
    }

    @Test
    void randomFaultsNeverCorruptThePoolOrLoseASegment() {
        Random random = new Random(11);
        int failures = 0;
        try (UnifiedMemoryManager manager = manager()) {
            faults.failRandomly(0.05, AllocationFault.DRIVER_ERROR);
            List<UnifiedBuffer> live = new ArrayList<>();
            for (int step = 0; step < 3000; step++) {
                try {
                    if (live.isEmpty() || random.nextInt(3) > 0 && live.size() < 40) {
                        live.add(manager.allocate(1 + random.nextInt(4 << 20), random.nextBoolean() ? MemoryLocation.DEVICE : MemoryLocation.HOST));
                    } else if (random.nextBoolean()) {
                        live.remove(random.nextInt(live.size())).close();
                    } else {
                        UnifiedBuffer b = live.get(random.nextInt(live.size()));
                        b.copyFrom(0, new byte[] {1, 2}, 0, (int) Math.min(2, b.byteSize()));
                        b.hostView();
                        b.syncToDevice();
                    }
                } catch (FaultInjectingBackend.InjectedFault | DeviceOutOfMemoryException expected) {
                    failures++;
                    faults.failRandomly(0, AllocationFault.DRIVER_ERROR);
                    ManagerInvariants.checkQuiescent(manager);
                    faults.failRandomly(0.05, AllocationFault.DRIVER_ERROR);
                }
            }
            faults.failRandomly(0, AllocationFault.DRIVER_ERROR);
            live.forEach(UnifiedBuffer::close);
            ManagerInvariants.checkQuiescent(manager);
        }
        assertThat(failures).isGreaterThan(50);
        assertThat(faults.injectedFaults()).isGreaterThanOrEqualTo(failures);
        assertThat(device.liveAllocations()).as("every segment freed at close").isZero();
    }
}
