package dev.compute.memory.contract;

import static dev.compute.memory.contract.CompactionTestBuffers.BUFFER_BYTES;
import static dev.compute.memory.contract.CompactionTestBuffers.DEVICE;
import static dev.compute.memory.contract.CompactionTestBuffers.MiB;
import static dev.compute.memory.contract.CompactionTestBuffers.assertHolds;
import static dev.compute.memory.contract.CompactionTestBuffers.deviceOffset;
import static dev.compute.memory.contract.CompactionTestBuffers.everyNth;
import static dev.compute.memory.contract.CompactionTestBuffers.firstTwoAndLast;
import static dev.compute.memory.contract.CompactionTestBuffers.fragmented;
import static dev.compute.memory.contract.CompactionTestBuffers.pattern;
import static dev.compute.memory.contract.CompactionTestBuffers.written;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import dev.compute.memory.AccessMode;
import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.CompactionReport;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.resource.LimitingResource;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.jspecify.annotations.Nullable;

/**
 * Compaction on every backend ({@link UnifiedMemoryManager#compact}): buffers nothing holds move and keep their data
 * and their handles, held ones stay where their holders see them, the report adds up. A backend module subclasses this
 * and says how to begin a builder on its backend (skipping, with the reason, where its hardware is absent). The races
 * are in {@link CompactionSafetyContractTest}, in JVMs of their own.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
public abstract class CompactionContractTest {

    /** A builder on the backend under test; the test adds its settings. */
    protected abstract UnifiedMemoryManagerBuilder builder();

    private UnifiedMemoryManager manager() {
        return builder().releaseThreshold(0).build();
    }

    /** A listener that keeps every compaction report it hears. */
    private static final class HeardCompactions implements MemoryEventListener {
        final List<CompactionReport> reports = new CopyOnWriteArrayList<>();

        @Override
        public void compacted(CompactionReport report) {
            reports.add(report);
        }
    }

    @Test
    void movesTheBuffersNothingHoldsKeepsTheirDataAndGivesMemoryBack() {
        try (UnifiedMemoryManager manager = manager()) {
            List<UnifiedBuffer> kept = fragmented(manager);
            MemoryStatistics before = manager.statistics(DEVICE);

            CompactionReport report = manager.compact(DEVICE);

            MemoryStatistics after = manager.statistics(DEVICE);
            assertThat(report.location()).isEqualTo(DEVICE);
            assertThat(report.buffersMoved()).isPositive();
            assertThat(report.bytesMoved()).isGreaterThanOrEqualTo(report.buffersMoved() * BUFFER_BYTES);
            assertThat(report.buffersInUse()).isZero();
            assertThat(report.bytesReleased()).isPositive();
            assertThat(report.reservedBytesBefore()).isEqualTo(before.reservedBytes());
            assertThat(report.reservedBytesAfter()).isEqualTo(after.reservedBytes())
                    .isEqualTo(report.reservedBytesBefore() - report.bytesReleased());
            assertThat(report.fragmentationAfter()).isEqualTo(after.fragmentation());
            assertThat(report.duration()).isPositive();
            assertThat(after.allocatedBytes()).as("moving changes no figure of what is live").isEqualTo(before.allocatedBytes());
            assertThat(after.liveBuffers()).isEqualTo(5);
            for (int i = 0; i < kept.size(); i++) {
                assertHolds(kept.get(i), 4 * i);
            }
            kept.forEach(UnifiedBuffer::close);
            assertThat(manager.statistics(DEVICE).allocatedBytes()).isZero();
        }
    }

    @Test
    void aMovedBufferFindsItsNewPlaceForCopiesOpsAccessesAndSlices() {
        try (UnifiedMemoryManager manager = manager()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            UnifiedBuffer last = kept.getLast();
            UnifiedBuffer tail = last.slice(BUFFER_BYTES / 4 - 1024, 1024);
            long offsetBefore = deviceOffset(last);

            assertThat(manager.compact(DEVICE).buffersMoved()).isPositive();

            assertThat(deviceOffset(last)).as("the last buffer moved towards the start").isNotEqualTo(offsetBefore);
            byte[] read = new byte[4096];
            tail.copyTo(read);
            byte[] whole = pattern(BUFFER_BYTES, 19);
            assertThat(read).isEqualTo(Arrays.copyOfRange(whole, BUFFER_BYTES - 4096, BUFFER_BYTES));
            manager.ops().fill(last, 0);
            assertThat(manager.ops().sum(last)).isZero();
            last.copyFrom(whole);
            assertHolds(last, 19);
            assertHolds(kept.getFirst(), 0);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void aBufferHeldByAnAccessStaysWhereItsHolderSeesItAndMovesOnceReleased() {
        // a trim that keeps the holes mapped: in a range, a move into them maps nothing
        try (UnifiedMemoryManager manager = builder().releaseThreshold(128 * MiB).build()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            UnifiedBuffer last = kept.getLast();
            long offset;
            CompactionReport held;
            try (BufferAccess access = last.deviceAccess(AccessMode.READ_WRITE)) {
                offset = access.offset();
                held = manager.compact(DEVICE);
                assertThat(deviceOffset(last)).as("held where the open access sees it").isEqualTo(offset);
            }
            assertThat(held.buffersInUse()).isEqualTo(1);
            assertThat(held.buffersMoved()).isZero();
            assertHolds(last, 19);

            CompactionReport released = manager.compact(DEVICE);

            assertThat(released.buffersInUse()).isZero();
            assertThat(released.buffersMoved()).isEqualTo(1);
            assertThat(deviceOffset(last)).isNotEqualTo(offset);
            assertHolds(last, 19);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void smallBuffersAndBuffersNeverWrittenAreSafeToo() {
        try (UnifiedMemoryManager manager = manager()) {
            List<UnifiedBuffer> small = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                UnifiedBuffer buffer = manager.allocate(64 << 10, DEVICE);
                buffer.copyFrom(pattern(64 << 10, i));
                small.add(buffer);
            }
            for (int i = 0; i < small.size(); i += 2) {
                small.get(i).close();
            }
            List<UnifiedBuffer> large = fragmented(manager);
            UnifiedBuffer neverWritten = manager.allocate(DataType.FLOAT32, 2 * MiB, DEVICE);

            CompactionReport report = manager.compact(DEVICE);

            assertThat(report.buffersMoved()).isLessThanOrEqualTo(large.size() + 1);
            for (int i = 1; i < small.size(); i += 2) {
                assertHolds(small.get(i), i);
            }
            for (int i = 0; i < large.size(); i++) {
                assertHolds(large.get(i), 4 * i);
            }
            neverWritten.copyFrom(new float[] {1, 2, 3});
            float[] read = new float[3];
            neverWritten.copyTo(read);
            assertThat(read).containsExactly(1, 2, 3);
        }
    }

    /**
     * Host-addressable memory written first by other means (native code given its address under a READ access) and
     * said so with markHostDirty or markDeviceDirty: it holds data, which a move must take along, though no write of the
     * manager's ever marked it.
     */
    @Test
    void aBufferMarkedWrittenByOtherMeansKeepsItsDataWhenItMoves() {
        try (UnifiedMemoryManager manager = manager()) {
            MemoryLocation location = manager.locations().stream().filter(each -> hostAccessible(manager, each)).findFirst().orElseThrow();
            for (boolean markDevice : new boolean[] {false, true}) {
                List<UnifiedBuffer> all = new ArrayList<>();
                for (int i = 0; i < 19; i++) {
                    all.add(written(manager, location, i));
                }
                UnifiedBuffer last = manager.allocate(DataType.FLOAT32, CompactionTestBuffers.FLOATS, location);
                try (BufferAccess access = last.hostAccess(AccessMode.READ)) {
                    MemorySegment.ofAddress(access.segment().address()).reinterpret(BUFFER_BYTES)
                            .copyFrom(MemorySegment.ofArray(pattern(BUFFER_BYTES, 42)));
                }
                for (int i = 2; i < 19; i++) {
                    all.get(i).close();
                }
                if (markDevice) {
                    last.markDeviceDirty();
                } else {
                    last.markHostDirty();
                }

                assertThat(manager.compact(location).buffersMoved()).as("the last buffer has room before it").isPositive();

                assertHolds(last, 42);
                last.close();
                all.subList(0, 2).forEach(UnifiedBuffer::close);
            }
        }
    }

    private static boolean hostAccessible(UnifiedMemoryManager manager, MemoryLocation location) {
        try (UnifiedBuffer probe = manager.allocate(1, location)) {
            return probe.isHostAccessible();
        }
    }

    @Test
    void aCompactionIntervalCompactsWithoutBeingAsked() throws InterruptedException {
        HeardCompactions listener = new HeardCompactions();
        List<CompactionReport> heard = listener.reports;
        try (UnifiedMemoryManager manager = builder().releaseThreshold(0).compactionInterval(Duration.ofMillis(20))
                .eventListener(listener).build()) {
            assertThat(manager.settings().compactionInterval()).isEqualTo(Duration.ofMillis(20));
            List<UnifiedBuffer> kept = fragmented(manager);
            for (int i = 0; i < 500 && heard.stream().noneMatch(r -> r.location() == DEVICE && r.buffersMoved() > 0); i++) {
                Thread.sleep(20);
            }
            assertThat(heard).as("the maintenance thread compacted DEVICE and moved something")
                    .anyMatch(r -> r.location() == DEVICE && r.buffersMoved() > 0);
            for (int i = 0; i < kept.size(); i++) {
                assertHolds(kept.get(i), 4 * i);
            }
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void withTheApplicationsOwnAdaptorsInTheChainNothingMovesAndTheTrimStillRuns() {
        try (UnifiedMemoryManager manager = builder().releaseThreshold(0)
                .resourceAdaptor((upstream, location) -> new LimitingResource(upstream, location, 1L << 40, "tenant-limit"))
                .build()) {
            List<UnifiedBuffer> kept = firstTwoAndLast(manager);
            long offset = deviceOffset(kept.getLast());

            CompactionReport report = manager.compact(DEVICE);

            assertThat(report.buffersMoved()).as("an adaptor may key blocks by their place").isZero();
            assertThat(report.bytesReleased()).isPositive();
            assertThat(deviceOffset(kept.getLast())).isEqualTo(offset);
            assertHolds(kept.getLast(), 19);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void withPoolingOffThereIsNothingToMove() {
        try (UnifiedMemoryManager manager = builder().poolingEnabled(false).build()) {
            UnifiedBuffer buffer = written(manager, 3);

            CompactionReport report = manager.compact(DEVICE);

            assertThat(report.buffersMoved()).isZero();
            assertThat(report.bytesReleased()).isZero();
            assertThat(report.reservedBytesAfter()).isEqualTo(report.reservedBytesBefore());
            assertHolds(buffer, 3);
            buffer.close();
        }
    }

    /**
     * Under a 60 MiB cap: eighteen 3 MiB buffers of which every third stays (18 MiB live, six holes of 6 MiB), then a
     * request of 40 MiB. Nothing the pool caches makes room for it: the three 20 MiB plain segments each hold two
     * buffers, and in a range the six buffers touch twelve 2 MiB pages (24 MiB), which leaves 36. Packing the six
     * buffers does: into one plain segment, or onto nine pages.
     */
    private static final long OUT_OF_MEMORY_CAP = 60 * MiB;
    private static final long ROOMY_REQUEST = 40 * MiB;

    private static List<UnifiedBuffer> everyThirdOfEighteen(UnifiedMemoryManager manager) {
        return everyNth(manager, 18, 3);
    }

    /** Each buffer {@link #everyThirdOfEighteen} kept holds its data. */
    private static void assertEveryThirdHolds(List<UnifiedBuffer> kept) {
        for (int i = 0; i < kept.size(); i++) {
            assertHolds(kept.get(i), 3 * i);
        }
    }

    @Test
    void anAllocationThatFindsNoRoomCompactsItsLocationAndSucceeds() {
        HeardCompactions listener = new HeardCompactions();
        List<CompactionReport> heard = listener.reports;
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).eventListener(listener).build()) {
            assertThat(manager.settings().compactOnOutOfMemory()).as("on by default").isTrue();
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);

            try (UnifiedBuffer roomy = manager.allocate(ROOMY_REQUEST, DEVICE)) {
                assertThat(roomy.byteSize()).isEqualTo(ROOMY_REQUEST);
                roomy.copyFrom(pattern(1024, 5));
            }

            assertThat(heard).as("one compaction, by the allocation").singleElement()
                    .satisfies(report -> assertThat(report.buffersMoved()).isPositive());
            assertEveryThirdHolds(kept);
            assertThat(manager.statistics(DEVICE).reservedBytes()).isLessThanOrEqualTo(OUT_OF_MEMORY_CAP);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void withCompactionOnOutOfMemoryOffTheSameAllocationFailsAndNothingMoves() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0)
                .compactOnOutOfMemory(false).build()) {
            assertThat(manager.settings().compactOnOutOfMemory()).isFalse();
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            long offset = deviceOffset(kept.getLast());

            assertThatThrownBy(() -> manager.allocate(ROOMY_REQUEST, DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);

            assertThat(deviceOffset(kept.getLast())).isEqualTo(offset);
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /** Buffers held by accesses do not move for the request; then the application's handlers are asked, and the allocation fails. */
    @Test
    void whenHeldBuffersLeaveNothingToMoveTheHandlersAreAskedAndTheAllocationFails() {
        List<Integer> attempts = new CopyOnWriteArrayList<>();
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0)
                .outOfMemoryHandler((location, bytes, attempt, failure) -> attempts.add(attempt) && false).build()) {
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            List<BufferAccess> accesses = kept.stream().map(buffer -> buffer.deviceAccess(AccessMode.READ)).toList();
            long[] offsets = accesses.stream().mapToLong(BufferAccess::offset).toArray();

            assertThatThrownBy(() -> manager.allocate(ROOMY_REQUEST, DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);

            assertThat(attempts).containsExactly(1);
            assertThat(accesses.stream().mapToLong(BufferAccess::offset).toArray()).isEqualTo(offsets);
            accesses.forEach(BufferAccess::close);
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A caller that meets out-of-memory again and again, with nothing a compaction could move, walks the pool once; once
     * a large buffer comes or goes, the next refusal compacts again.
     */
    @Test
    void aCompactionThatMadeNoRoomIsNotRepeatedUntilALargeBufferComesOrGoes() {
        HeardCompactions listener = new HeardCompactions();
        List<CompactionReport> heard = listener.reports;
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).eventListener(listener).build()) {
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            List<BufferAccess> accesses = kept.stream().map(buffer -> buffer.deviceAccess(AccessMode.READ)).toList();
            for (int i = 0; i < 3; i++) {
                assertThat(manager.tryAllocate(ROOMY_REQUEST, DEVICE)).isEmpty();
            }
            assertThat(heard).as("one compaction for three refusals").singleElement()
                    .satisfies(report -> assertThat(report.buffersInUse()).isEqualTo(kept.size()));
            accesses.forEach(BufferAccess::close);

            written(manager, 40).close();
            try (UnifiedBuffer roomy = manager.allocate(ROOMY_REQUEST, DEVICE)) {
                assertThat(roomy.byteSize()).isEqualTo(ROOMY_REQUEST);
            }

            assertThat(heard).hasSize(2);
            assertThat(heard.getLast().buffersMoved()).isPositive();
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A compaction that made no room because accesses held the buffers is not the last word once they let go: the next
     * refusal compacts again and makes room, with no large buffer coming or going in between. Before, the buffers stayed
     * scattered, and every large request failed, until one did.
     */
    @Test
    void aRefusalAfterTheBuffersInUseAreLetGoCompactsAgain() {
        HeardCompactions listener = new HeardCompactions();
        List<CompactionReport> heard = listener.reports;
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).eventListener(listener).build()) {
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            List<BufferAccess> accesses = kept.stream().map(buffer -> buffer.deviceAccess(AccessMode.READ)).toList();
            assertThat(manager.tryAllocate(ROOMY_REQUEST, DEVICE)).isEmpty();
            accesses.forEach(BufferAccess::close);

            Optional<UnifiedBuffer> roomy = manager.tryAllocate(ROOMY_REQUEST, DEVICE);

            assertThat(roomy).isPresent();
            roomy.get().close();
            assertThat(heard).hasSize(2);
            assertThat(heard.getLast().buffersMoved()).isPositive();
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A host mirror that finds no room at its location cannot compact it (it is made under its buffer's monitor): that
     * compaction was never tried, so it must not keep the next allocation there, made by no mirror, from compacting.
     */
    @Test
    void aHostMirrorThatFindsNoRoomDoesNotKeepALaterAllocationFromCompacting() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).pinningEnabled(false).build();
             UnifiedBuffer mirrored = manager.allocate(ROOMY_REQUEST, DEVICE)) {
            assumeFalse(mirrored.isHostAccessible(), "only a buffer the host cannot address takes a host mirror");
            List<UnifiedBuffer> kept = everyNth(manager, MemoryLocation.HOST, 18, 3);

            assertThatThrownBy(mirrored::hostView).isInstanceOf(DeviceOutOfMemoryException.class);

            try (UnifiedBuffer roomy = manager.allocate(ROOMY_REQUEST, MemoryLocation.HOST)) {
                assertThat(roomy.byteSize()).isEqualTo(ROOMY_REQUEST);
            }
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /** The thread that runs out of memory holds a view of one buffer: that one stays, the others move, the request fits. */
    @Test
    void anAllocationWhoseThreadHoldsAViewOfABufferMovesTheOthers() {
        HeardCompactions listener = new HeardCompactions();
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).pinningEnabled(false)
                .eventListener(listener).build()) {
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            MemorySegment view = kept.getFirst().hostView();
            byte first = view.get(ValueLayout.JAVA_BYTE, 1000);
            try (UnifiedBuffer roomy = manager.allocate(ROOMY_REQUEST, DEVICE)) {
                roomy.copyFrom(pattern(1024, 5));
            } catch (DeviceOutOfMemoryException e) {
                // a held buffer may block the room on some layouts: the point is that nothing hangs or moves it
            }
            assertThat(listener.reports).as("the out-of-memory compacted the location").isNotEmpty().first().satisfies(report -> {
                assertThat(report.buffersMoved()).as("the buffers nothing holds moved").isPositive();
                assertThat(report.buffersInUse()).as("the viewed one stayed").isPositive();
            });
            assertThat(view.get(ValueLayout.JAVA_BYTE, 1000)).isEqualTo(first);
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /** Listeners that allocate what does not fit while the compaction on out-of-memory runs, or as it fails: nothing hangs. */
    @Test
    void listenersThatRunOutOfMemoryThemselvesNeitherHangNorRecurse() {
        List<CompactionReport> heard = new CopyOnWriteArrayList<>();
        List<Throwable> inner = new CopyOnWriteArrayList<>();
        UnifiedMemoryManager[] self = new UnifiedMemoryManager[1];
        AtomicInteger calls = new AtomicInteger();
        MemoryEventListener listener = new MemoryEventListener() {
            @Override
            public void compacted(CompactionReport report) {
                heard.add(report);
                if (calls.getAndIncrement() < 5) {
                    inner.add(catching(() -> self[0].allocate(2 * OUT_OF_MEMORY_CAP / 3, DEVICE).close()));
                }
            }

            @Override
            public void allocationFailed(MemoryLocation location, long bytes, OutOfMemoryReason reason) {
                if (calls.getAndIncrement() < 5) {
                    inner.add(catching(() -> self[0].allocate(ROOMY_REQUEST, DEVICE).close()));
                }
            }
        };
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).eventListener(listener).build()) {
            self[0] = manager;
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            List<BufferAccess> accesses = kept.stream().map(buffer -> buffer.deviceAccess(AccessMode.READ)).toList();

            assertThatThrownBy(() -> manager.allocate(ROOMY_REQUEST, DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);
            accesses.forEach(BufferAccess::close);
            written(manager, 40).close();
            try (UnifiedBuffer roomy = manager.allocate(ROOMY_REQUEST, DEVICE)) {
                assertThat(roomy.byteSize()).isEqualTo(ROOMY_REQUEST);
            }
            assertThat(inner).isNotEmpty();
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A listener that compacts again on hearing of a compaction (while fragmentation stays high, say) is told of the one
     * it heard only: the compaction it asks for moves nothing from inside a listener, and telling it of that would call
     * it again, inside itself, until the stack overflows.
     */
    @Test
    void aListenerThatCompactsOnEveryCompactionIsToldOnce() {
        List<CompactionReport> heard = new CopyOnWriteArrayList<>();
        List<CompactionReport> askedFromTheListener = new CopyOnWriteArrayList<>();
        UnifiedMemoryManager[] self = new UnifiedMemoryManager[1];
        MemoryEventListener compactsAgain = new MemoryEventListener() {
            @Override
            public void compacted(CompactionReport report) {
                heard.add(report);
                askedFromTheListener.add(self[0].compact(report.location()));
            }
        };
        try (UnifiedMemoryManager manager = builder().releaseThreshold(0).eventListener(compactsAgain).build()) {
            self[0] = manager;
            List<UnifiedBuffer> kept = fragmented(manager);

            CompactionReport report = manager.compact(DEVICE);

            assertThat(report.buffersMoved()).isPositive();
            assertThat(heard).containsExactly(report);
            assertThat(askedFromTheListener).singleElement().satisfies(inner -> {
                assertThat(inner.buffersMoved()).isZero();
                assertThat(inner.bytesReleased()).isZero();
            });
            for (int i = 0; i < kept.size(); i++) {
                assertHolds(kept.get(i), 4 * i);
            }
            kept.forEach(UnifiedBuffer::close);
        }
    }

    private static @Nullable Throwable catching(Runnable action) {
        try {
            action.run();
            return null;
        } catch (RuntimeException e) {
            return e;
        }
    }

    /** A request above the cap fails as above the limit, and compacts nothing. */
    @Test
    void aRequestAboveTheCapCompactsNothing() {
        HeardCompactions listener = new HeardCompactions();
        List<CompactionReport> heard = listener.reports;
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).eventListener(listener).build()) {
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            assertThatThrownBy(() -> manager.allocate(OUT_OF_MEMORY_CAP + MiB, DEVICE)).isInstanceOf(AllocationAboveLimitException.class);
            assertThat(manager.tryAllocate(OUT_OF_MEMORY_CAP + MiB, DEVICE)).isEmpty();
            assertThat(manager.allocateAsync(OUT_OF_MEMORY_CAP + MiB, DEVICE, Duration.ofSeconds(5)))
                    .failsWithin(Duration.ofSeconds(10));
            assertThat(heard).isEmpty();
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /** Two threads run out of memory at once, each holding an access of a buffer the other's compaction would move. */
    @Test
    void twoThreadsRunningOutOfMemoryWhileHoldingAccessesNeitherHangNorLoseData() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).build()) {
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            CyclicBarrier together = new CyclicBarrier(2);
            List<Throwable> failures = new CopyOnWriteArrayList<>();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                UnifiedBuffer held = kept.get(t == 0 ? 1 : kept.size() - 1);
                threads.add(Thread.ofPlatform().start(() -> {
                    try (BufferAccess access = held.deviceAccess(AccessMode.READ)) {
                        for (int round = 0; round < 20; round++) {
                            together.await(30, TimeUnit.SECONDS);
                            manager.tryAllocate(OUT_OF_MEMORY_CAP / 3, DEVICE).ifPresent(UnifiedBuffer::close);
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            for (Thread thread : threads) {
                assertThat(thread.join(Duration.ofSeconds(60))).as("no thread hangs").isTrue();
            }
            assertThat(failures).isEmpty();
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
            assertThat(manager.statistics(DEVICE).allocatedBytes()).isZero();
            assertThat(manager.statistics(DEVICE).reservedBytes()).isLessThanOrEqualTo(OUT_OF_MEMORY_CAP);
        }
    }

    /**
     * A request that waits for memory, refused while every buffer was held, is served by a compaction once the holds end
     * and a large buffer goes: its retry compacts, though the compaction of its first try found nothing to move.
     */
    @Test
    void aWaitingRequestIsServedByACompactionOnceALargeBufferGoes() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).build()) {
            List<UnifiedBuffer> kept = new ArrayList<>(everyThirdOfEighteen(manager));
            List<BufferAccess> accesses = kept.stream().map(buffer -> buffer.deviceAccess(AccessMode.READ)).toList();
            CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(ROOMY_REQUEST, DEVICE, Duration.ofSeconds(60));
            assertThat(waiting).isNotDone();

            accesses.forEach(BufferAccess::close);
            kept.removeLast().close();

            try (UnifiedBuffer roomy = waiting.get(30, TimeUnit.SECONDS)) {
                assertThat(roomy.byteSize()).isEqualTo(ROOMY_REQUEST);
            }
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /** Ops still queued on the buffers as an allocation runs out of memory: the moves wait for them and keep what they wrote. */
    @Test
    void buffersWithOpsInFlightKeepWhatTheOpsWroteWhenAnAllocationMovesThem() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).build()) {
            List<UnifiedBuffer> kept = everyThirdOfEighteen(manager);
            List<CompletableFuture<Void>> ops = new ArrayList<>();
            for (int i = 0; i < kept.size(); i++) {
                ops.add(manager.ops().fillAsync(kept.get(i), i + 0.5));
            }
            UnifiedBuffer slice = kept.getLast().slice(1000, 10);

            try (UnifiedBuffer roomy = manager.allocate(ROOMY_REQUEST, DEVICE)) {
                assertThat(roomy.byteSize()).isEqualTo(ROOMY_REQUEST);
            }

            for (CompletableFuture<Void> op : ops) {
                op.get(30, TimeUnit.SECONDS);
            }
            for (int i = 0; i < kept.size(); i++) {
                float[] read = new float[CompactionTestBuffers.FLOATS];
                kept.get(i).copyTo(read);
                float expected = i + 0.5f;
                assertThat(read).as("buffer %d", i).containsOnly(expected);
            }
            float[] sliced = new float[10];
            slice.copyTo(sliced);
            assertThat(sliced).containsOnly(kept.size() - 0.5f);
            kept.forEach(UnifiedBuffer::close);
            assertThat(manager.statistics(DEVICE).allocatedBytes()).isZero();
        }
    }

    /**
     * With one retry for the handlers: the compaction finds every buffer held; the handler ends the holds and closes a
     * buffer; its one retry compacts again, and that makes the room. The compaction's tries are not the handler's.
     */
    @Test
    void theHandlersOneRetryCompactsAgainAfterTheyFreedSomething() {
        List<BufferAccess> accesses = new ArrayList<>();
        List<UnifiedBuffer> kept = new ArrayList<>();
        List<Integer> attempts = new CopyOnWriteArrayList<>();
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).outOfMemoryRetries(1)
                .outOfMemoryHandler((location, bytes, attempt, failure) -> {
                    attempts.add(attempt);
                    accesses.forEach(BufferAccess::close);
                    kept.removeLast().close();
                    return true;
                }).build()) {
            kept.addAll(everyThirdOfEighteen(manager));
            kept.forEach(buffer -> accesses.add(buffer.deviceAccess(AccessMode.READ)));

            try (UnifiedBuffer roomy = manager.allocate(ROOMY_REQUEST, DEVICE)) {
                assertThat(roomy.byteSize()).isEqualTo(ROOMY_REQUEST);
            }

            assertThat(attempts).containsExactly(1);
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A host mirror (which compaction never moves) keeps the buffers at its location from packing into one segment, so
     * a compaction there makes no room; once the mirror goes with its buffer, the next refusal there compacts again.
     */
    @Test
    void aHostMirrorGivenBackLetsTheNextRefusalThereCompactAgain() {
        HeardCompactions listener = new HeardCompactions();
        List<CompactionReport> heard = listener.reports;
        try (UnifiedMemoryManager manager = builder().maxPoolSize(OUT_OF_MEMORY_CAP).releaseThreshold(0).pinningEnabled(false)
                .eventListener(listener).build()) {
            UnifiedBuffer mirrored = written(manager, 99);
            assumeFalse(mirrored.isHostAccessible(), "only a buffer the host cannot address takes a host mirror");
            try (BufferAccess access = mirrored.hostAccess(AccessMode.READ)) {
                assertThat(access.segment().byteSize()).isEqualTo(BUFFER_BYTES);
            }
            List<UnifiedBuffer> kept = everyNth(manager, MemoryLocation.HOST, 17, 3);
            for (int i = 0; i < 3 && (heard.isEmpty() || heard.getLast().buffersMoved() > 0); i++) {
                assertThat(manager.tryAllocate(ROOMY_REQUEST, MemoryLocation.HOST)).as("the mirror and six buffers fill two segments").isEmpty();
            }
            assertThat(heard).isNotEmpty().last().satisfies(report -> assertThat(report.buffersMoved()).isZero());

            mirrored.close();

            try (UnifiedBuffer roomy = manager.allocate(ROOMY_REQUEST, MemoryLocation.HOST)) {
                assertThat(roomy.byteSize()).isEqualTo(ROOMY_REQUEST);
            }
            assertEveryThirdHolds(kept);
            kept.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void everyLocationIsCompactedAndAClosedManagerRefuses() {
        UnifiedMemoryManager manager = manager();
        List<CompactionReport> reports = manager.compact();
        assertThat(reports).extracting(CompactionReport::location).containsExactlyElementsOf(manager.locations());
        manager.close();

        assertThatThrownBy(() -> manager.compact(DEVICE)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }
}
