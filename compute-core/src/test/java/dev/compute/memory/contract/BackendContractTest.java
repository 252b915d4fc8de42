package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import dev.compute.memory.recording.TraceEvent;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What every backend must do, seen through the manager a user holds. A backend module subclasses this and
 * says how to build a manager on it; a subclass for hardware that is absent skips in {@link #newManager()}
 * with JUnit's {@code Assumptions} and the provider's reason.
 */
public abstract class BackendContractTest {

    protected UnifiedMemoryManager manager;
    private final Random random = new Random(42);

    /** A fresh manager on the backend under test, with leak detection paranoid. */
    protected abstract UnifiedMemoryManager newManager();

    @BeforeEach
    void openManager() {
        manager = newManager();
    }

    @AfterEach
    void closeManager() {
        if (manager != null) {
            manager.close();
        }
    }

    /** Locations whose memory may be allocated and copied; every backend offers at least HOST and DEVICE. */
    protected List<MemoryLocation> locations() {
        return manager.locations();
    }

    @Test
    void offersHostAndDeviceAndItsDefault() {
        assertThat(manager.locations()).contains(MemoryLocation.HOST, MemoryLocation.DEVICE);
        assertThat(manager.locations()).contains(manager.defaultLocation());
        assertThat(manager.backendInfo().backend()).isNotBlank();
    }

    @Test
    void bytesSurviveRoundTripsAtOddSizesAndOffsetsEverywhere() {
        for (MemoryLocation location : locations()) {
            for (int size : new int[] {1, 3, 4095, 65_537, (1 << 20) + 3}) {
                try (UnifiedBuffer buffer = manager.allocate(size, location)) {
                    byte[] data = randomBytes(size);
                    buffer.copyFrom(data);
                    assertThat(readAll(buffer)).as("%s, %d bytes", location, size).isEqualTo(data);
                    if (size > 2) {
                        byte[] middle = randomBytes(size - 2);
                        buffer.copyFrom(1, middle, 0, middle.length);
                        byte[] back = new byte[size - 2];
                        buffer.copyTo(1, back, 0, back.length);
                        assertThat(back).as("%s, %d bytes at offset 1", location, size).isEqualTo(middle);
                        assertThat(readAll(buffer)[0]).isEqualTo(data[0]);
                    }
                }
            }
        }
    }

    @Test
    void everyPrimitiveArrayTypeRoundTrips() {
        MemoryLocation location = manager.defaultLocation();
        try (UnifiedBuffer buffer = manager.allocate(1024, location)) {
            float[] floats = {1.5f, -2.25f, Float.MAX_VALUE, Float.MIN_VALUE};
            buffer.copyFrom(8, floats, 0, floats.length);
            float[] floatsBack = new float[4];
            buffer.copyTo(8, floatsBack, 0, 4);
            assertThat(floatsBack).containsExactly(floats);

            double[] doubles = {Math.PI, -Math.E, Double.MIN_VALUE};
            buffer.copyFrom(doubles);
            double[] doublesBack = new double[3];
            buffer.copyTo(doublesBack);
            assertThat(doublesBack).containsExactly(doubles);

            int[] ints = {Integer.MIN_VALUE, 0, 7, Integer.MAX_VALUE};
            buffer.copyFrom(3, ints, 1, 3);
            int[] intsBack = new int[4];
            buffer.copyTo(3, intsBack, 1, 3);
            assertThat(intsBack).containsExactly(0, 0, 7, Integer.MAX_VALUE);

            long[] longs = {Long.MIN_VALUE, 42L, Long.MAX_VALUE};
            buffer.copyFrom(100, longs, 0, 3);
            long[] longsBack = new long[3];
            buffer.copyTo(100, longsBack, 0, 3);
            assertThat(longsBack).containsExactly(longs);

            short[] shorts = {Short.MIN_VALUE, -1, Short.MAX_VALUE};
            char[] chars = {'a', '\u20ac', Character.MAX_VALUE};
            buffer.copyFrom(200, shorts, 0, 3);
            buffer.copyFrom(300, chars, 0, 3);
            short[] shortsBack = new short[3];
            char[] charsBack = new char[3];
            buffer.copyTo(200, shortsBack, 0, 3);
            buffer.copyTo(300, charsBack, 0, 3);
            assertThat(shortsBack).containsExactly(shorts);
            assertThat(charsBack).containsExactly(chars);
        }
    }

    @Test
    void nativeSegmentsCopyBothWaysAndAsync() throws Exception {
        try (Arena arena = Arena.ofConfined(); UnifiedBuffer buffer = manager.allocate(DataType.INT64, 1000)) {
            MemorySegment source = arena.allocate(8000);
            for (int i = 0; i < 1000; i++) {
                source.setAtIndex(ValueLayout.JAVA_LONG, i, i * 31L);
            }
            buffer.copyFromAsync(0, source).get();
            MemorySegment target = arena.allocate(8000);
            buffer.copyToAsync(0, target).get();
            assertThat(target.mismatch(source)).isEqualTo(-1);
            MemorySegment part = arena.allocate(16);
            buffer.copyTo(8 * 500, part);
            assertThat(part.getAtIndex(ValueLayout.JAVA_LONG, 1)).isEqualTo(501 * 31L);
        }
    }

    @Test
    void segmentsOfEveryKindOfArenaCopyBothWaysAndThoseNoLongerValidAreRefusedAsJavaRefusesThem() throws Exception {
        try (UnifiedBuffer buffer = manager.allocate(DataType.INT64, 1000)) {
            for (Arena arena : new Arena[] {Arena.ofShared(), Arena.ofAuto(), Arena.global(), Arena.ofConfined()}) {
                MemorySegment source = arena.allocate(8000);
                for (int i = 0; i < 1000; i++) {
                    source.setAtIndex(ValueLayout.JAVA_LONG, i, i * 7L + 1);
                }
                buffer.copyFromAsync(0, source).get();
                MemorySegment target = arena.allocate(8000);
                buffer.copyToAsync(0, target).get();
                assertThat(target.mismatch(source)).as("async, %s", arena).isEqualTo(-1);
                buffer.copyFrom(0, source);
                MemorySegment again = arena.allocate(8000);
                buffer.copyTo(0, again);
                assertThat(again.mismatch(source)).as("blocking, %s", arena).isEqualTo(-1);
            }

            Arena confined = Arena.ofConfined();
            MemorySegment mine = confined.allocate(8000);
            assertThat(buffer.copyToAsync(0, mine)).as("only this thread may write it: read before the call returns").isDone();
            confined.close();
            assertThatThrownBy(() -> buffer.copyFrom(0, mine)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> buffer.copyTo(0, mine)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> buffer.copyFromAsync(0, mine)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> buffer.copyToAsync(0, mine)).isInstanceOf(IllegalStateException.class);

            MemorySegment[] othersOwn = new MemorySegment[1];
            Thread.ofPlatform().start(() -> othersOwn[0] = Arena.ofConfined().allocate(8000)).join();
            assertThatThrownBy(() -> buffer.copyFrom(0, othersOwn[0])).isInstanceOf(WrongThreadException.class);
            assertThatThrownBy(() -> buffer.copyToAsync(0, othersOwn[0])).isInstanceOf(WrongThreadException.class);
        }
    }

    @Test
    void aReadOnlySegmentOfAnyKindIsRefusedAsADestinationBeforeAnythingIsRead() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.INT64, 1000)) {
            buffer.copyFrom(0, new long[1000], 0, 1000);
            for (MemorySegment readOnly : new MemorySegment[] {Arena.ofShared().allocate(8000).asReadOnly(), Arena.ofAuto().allocate(8000).asReadOnly(),
                    Arena.global().allocate(8000).asReadOnly(), Arena.ofConfined().allocate(8000).asReadOnly(),
                    MemorySegment.ofArray(new long[1000]).asReadOnly()}) {
                long readBefore = manager.statistics().get(buffer.location()).bytesDeviceToHost();
                assertThatThrownBy(() -> buffer.copyTo(0, readOnly)).as("%s", readOnly).isInstanceOf(IllegalArgumentException.class);
                assertThatThrownBy(() -> buffer.copyToAsync(0, readOnly)).as("refused at the call, not by the future: %s", readOnly)
                        .isInstanceOf(IllegalArgumentException.class);
                assertThat(manager.statistics().get(buffer.location()).bytesDeviceToHost()).as("nothing read for %s", readOnly).isEqualTo(readBefore);
            }
        }
    }

    @Test
    void opsMatchAJavaReferenceOnRandomData() {
        for (DataType type : new DataType[] {DataType.FLOAT32, DataType.FLOAT64}) {
            int n = 10_007;
            double[] x = randomDoubles(n);
            double[] y = randomDoubles(n);
            try (UnifiedBuffer bx = manager.allocate(type, n); UnifiedBuffer by = manager.allocate(type, n)) {
                write(bx, x);
                write(by, y);
                manager.ops().axpy(2.5, bx, by);
                manager.ops().scale(bx, -0.5);
                double[] expectedY = new double[n];
                double expectedSum = 0;
                for (int i = 0; i < n; i++) {
                    expectedY[i] = 2.5 * stored(type, x[i]) + stored(type, y[i]);
                    expectedSum += stored(type, -0.5 * stored(type, x[i]));
                }
                double tolerance = type == DataType.FLOAT32 ? 1e-4 : 1e-12;
                double[] actualY = read(by);
                for (int i = 0; i < n; i++) {
                    assertThat(actualY[i]).as("%s y[%d]", type, i).isCloseTo(expectedY[i], within(tolerance * (1 + Math.abs(expectedY[i]))));
                }
                assertThat(manager.ops().sum(bx)).isCloseTo(expectedSum, within(tolerance * n));
                manager.ops().fill(bx, 3.0);
                assertThat(manager.ops().sum(bx)).isCloseTo(3.0 * n, within(tolerance * n));
                assertThat(read(bx)[n - 1]).isEqualTo(3.0);
            }
        }
    }

    @Test
    void hostViewsAndOpsSeeEachOther() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 256)) {
            MemorySegment view = buffer.hostView();
            for (int i = 0; i < 256; i++) {
                view.setAtIndex(ValueLayout.JAVA_FLOAT, i, i);
            }
            assertThat(manager.ops().sum(buffer)).isEqualTo(255 * 256 / 2.0);
            manager.ops().scale(buffer, 2);
            MemorySegment readOnly = buffer.readOnlyHostView();
            assertThat(readOnly.isReadOnly()).isTrue();
            assertThat(readOnly.getAtIndex(ValueLayout.JAVA_FLOAT, 255)).isEqualTo(510f);
        }
    }

    @Test
    void buffersCopyToEachOtherAcrossLocations() {
        byte[] data = randomBytes(10_000);
        for (MemoryLocation from : locations()) {
            for (MemoryLocation to : locations()) {
                try (UnifiedBuffer source = manager.allocate(10_000, from); UnifiedBuffer target = manager.allocate(10_000, to)) {
                    source.copyFrom(data);
                    target.copyFrom(source, 10, 20, 5_000);
                    byte[] back = new byte[5_000];
                    target.copyTo(20, back, 0, 5_000);
                    assertThat(back).as("%s to %s", from, to).isEqualTo(Arrays.copyOfRange(data, 10, 5_010));
                }
            }
        }
    }

    @Test
    void statisticsFollowLiveBuffersAndCacheGoesBackOnRelease() {
        MemoryLocation location = manager.defaultLocation();
        List<UnifiedBuffer> buffers = new ArrayList<>();
        long requested = 0;
        for (int i = 0; i < 20; i++) {
            long size = 1 + random.nextInt(3 << 20);
            requested += size;
            buffers.add(manager.allocate(size, location));
        }
        MemoryStatistics live = manager.statistics(location);
        assertThat(live.requestedBytes()).isEqualTo(requested);
        assertThat(live.allocatedBytes()).isGreaterThanOrEqualTo(requested);
        assertThat(live.reservedBytes()).isGreaterThanOrEqualTo(live.allocatedBytes());
        assertThat(live.liveBuffers()).isEqualTo(20);
        MemorySnapshot snapshot = manager.snapshot(location);
        long liveInSnapshot = snapshot.segments().stream().flatMap(s -> s.blocks().stream())
                .filter(b -> b.state() == MemorySnapshot.BlockState.LIVE).count();
        assertThat(liveInSnapshot).isEqualTo(20);
        buffers.forEach(UnifiedBuffer::close);
        MemoryStatistics after = manager.statistics(location);
        assertThat(after.allocatedBytes()).isZero();
        assertThat(after.requestedBytes()).isZero();
        assertThat(after.allocatedBytesPeak()).isGreaterThanOrEqualTo(requested);
        manager.releaseCachedMemory();
        assertThat(manager.statistics(location).reservedBytes()).isZero();
    }

    @Test
    void readingFiguresSnapshotsAndLiveBuffersChangesNothingInThePool() {
        MemoryLocation location = manager.defaultLocation();
        UnifiedBuffer small = manager.allocate(512, location);
        MemorySnapshot.Segment home = manager.snapshot(location).segments().stream()
                .filter(s -> s.blocks().stream().anyMatch(b -> b.state() == MemorySnapshot.BlockState.LIVE)).findFirst().orElseThrow();
        long offset = home.blocks().stream().filter(b -> b.state() == MemorySnapshot.BlockState.LIVE).findFirst().orElseThrow().offset();
        small.close();
        MemorySnapshot snapshotBefore = manager.snapshot(location);
        MemoryStatistics before = manager.statistics(location);
        assertThat(blockAt(snapshotBefore, home.address(), offset)).as("the block cached for reuse shows free, not coalesced")
                .satisfies(b -> assertThat(b.state()).isEqualTo(MemorySnapshot.BlockState.FREE))
                .satisfies(b -> assertThat(b.sizeBytes()).isEqualTo(512));

        for (int scrape = 0; scrape < 10; scrape++) {
            for (int meter = 0; meter < 22; meter++) {
                manager.statistics(location);
            }
            manager.statistics();
            manager.snapshot(location);
            manager.liveBuffers();
        }

        assertThat(manager.snapshot(location)).isEqualTo(snapshotBefore);
        assertThat(manager.statistics(location)).isEqualTo(before);
        try (UnifiedBuffer again = manager.allocate(512, location)) {
            MemoryStatistics after = manager.statistics(location);
            assertThat(after.poolHits()).as("a hit of the block cached").isEqualTo(before.poolHits() + 1);
            assertThat(after.backendAllocations()).isEqualTo(before.backendAllocations());
            assertThat(blockAt(manager.snapshot(location), home.address(), offset).state()).isEqualTo(MemorySnapshot.BlockState.LIVE);
        }
    }

    private static MemorySnapshot.Block blockAt(MemorySnapshot snapshot, long segment, long offset) {
        return snapshot.segments().stream().filter(s -> s.address() == segment).flatMap(s -> s.blocks().stream())
                .filter(b -> b.offset() == offset).findFirst().orElseThrow();
    }

    @Test
    void badSizesAreRefusedAndLeaveThePoolWhole() {
        MemoryStatistics before = manager.statistics(manager.defaultLocation());
        assertThatThrownBy(() -> manager.allocate(0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("allocation size must be positive: 0 bytes");
        assertThatThrownBy(() -> manager.allocate(-1)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("positive");
        assertThatThrownBy(() -> manager.allocate(DataType.FLOAT64, Long.MAX_VALUE / 4)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("overflow");
        assertThatThrownBy(() -> manager.allocate(DataType.FLOAT32, -3)).isInstanceOf(IllegalArgumentException.class);
        MemoryStatistics after = manager.statistics(manager.defaultLocation());
        assertThat(after.allocatedBytes()).isEqualTo(before.allocatedBytes());
        assertThat(after.liveBuffers()).isEqualTo(before.liveBuffers());
    }

    @Test
    void copiesOutsideTheBufferFailClearlyAndChangeNothing() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16)) {
            float[] ones = new float[16];
            Arrays.fill(ones, 1f);
            buffer.copyFrom(ones);
            assertThatThrownBy(() -> buffer.copyFrom(new float[17])).isInstanceOf(IndexOutOfBoundsException.class)
                    .hasMessageContaining("outside this buffer of 64 bytes");
            assertThatThrownBy(() -> buffer.copyFrom(-1, new float[1], 0, 1)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.copyTo(60, new float[2], 0, 2)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.copyFrom(0, new float[4], 2, 3)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.copyTo(Long.MAX_VALUE, new byte[2], 0, 2)).isInstanceOf(IndexOutOfBoundsException.class);
            float[] back = new float[16];
            buffer.copyTo(back);
            assertThat(back).containsOnly(1f);
        }
    }

    /**
     * Offsets and counts whose sum passes {@code Long.MAX_VALUE} wrap to a negative end, which a check written as
     * {@code offset + count > size} lets through: slices, slices of slices, buffer-to-buffer copies and the
     * asynchronous copies refuse them all, and the buffer keeps its bytes.
     */
    @Test
    void offsetsAndCountsWhoseSumPassesLongMaxValueAreRefused() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16);
             UnifiedBuffer other = manager.allocate(DataType.FLOAT32, 16);
             Arena arena = Arena.ofConfined()) {
            float[] ones = new float[16];
            Arrays.fill(ones, 1f);
            buffer.copyFrom(ones);
            UnifiedBuffer slice = buffer.slice(2, 8);
            MemorySegment eightBytes = arena.allocate(8);
            assertThatThrownBy(() -> buffer.slice(8, Long.MAX_VALUE - 7)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.slice(4, Long.MAX_VALUE - 3)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.slice(Long.MAX_VALUE, 1)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> other.copyFrom(buffer, Long.MAX_VALUE - 10, 0, 20)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.copyFrom(other, 0, Long.MAX_VALUE - 10, 20)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.copyFrom(other, 0, 8, Long.MIN_VALUE)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.copyFromAsync(Long.MAX_VALUE - 3, eightBytes)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.copyFromAsync(Long.MAX_VALUE - 3, eightBytes)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.copyToAsync(Long.MAX_VALUE - 3, eightBytes)).isInstanceOf(IndexOutOfBoundsException.class);
            float[] back = new float[16];
            buffer.copyTo(back);
            assertThat(back).containsOnly(1f);
        }
    }

    @Test
    void useAfterCloseFailsAndDoubleCloseIsHarmless() {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16);
        buffer.close();
        buffer.close();
        assertThat(buffer.isClosed()).isTrue();
        assertThatThrownBy(() -> buffer.copyFrom(new float[1])).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        assertThatThrownBy(buffer::hostView).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> manager.ops().sum(buffer)).isInstanceOf(IllegalStateException.class);
        assertThat(manager.statistics(manager.defaultLocation()).liveBuffers()).isZero();
    }

    @Test
    void aBufferFromAnotherManagerIsRefused() {
        try (UnifiedMemoryManager other = newManager();
             UnifiedBuffer foreign = other.allocate(DataType.FLOAT32, 8);
             UnifiedBuffer own = manager.allocate(DataType.FLOAT32, 8)) {
            assertThatThrownBy(() -> manager.ops().sum(foreign)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("another UnifiedMemoryManager");
            assertThatThrownBy(() -> own.copyFrom(foreign, 0, 0, 8)).isInstanceOf(IllegalArgumentException.class);
        }
    }

    @Test
    void closingTheManagerWithLiveBuffersFreesEverythingAndDisablesThem() {
        UnifiedMemoryManager own = newManager();
        UnifiedBuffer open = own.allocate(DataType.FLOAT64, 1000);
        own.allocate(4096, MemoryLocation.HOST);
        assertThat(own.liveBuffers()).hasSize(2);
        own.close();
        own.close();
        assertThat(own.isClosed()).isTrue();
        assertThatThrownBy(() -> open.copyFrom(new double[1])).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
        assertThatThrownBy(() -> own.allocate(16)).isInstanceOf(IllegalStateException.class);
        open.close();
    }

    @Test
    void afterTheManagerFreedEverythingItsFiguresSaySo() {
        UnifiedMemoryManager own = newManager();
        List<UnifiedBuffer> open = new ArrayList<>();
        for (MemoryLocation location : own.locations()) {
            open.add(own.allocate(4 << 20, location));
            open.add(own.allocate(700, location));
            own.allocate(700, location).close();
        }

        own.close();

        assertThat(open).allMatch(UnifiedBuffer::isClosed);
        assertThat(own.liveBuffers()).isEmpty();
        for (MemoryLocation location : own.locations()) {
            MemoryStatistics s = own.statistics(location);
            assertThat(List.of(s.allocatedBytes(), s.requestedBytes(), s.reservedBytes(), s.cachedBytes(), s.largestFreeBlockBytes(),
                    s.liveBuffers(), s.segments())).as("%s allocated, requested, reserved, cached, largest free block, live, segments",
                    location).containsOnly(0L);
            assertThat(s.frees()).as("%s frees", location).isEqualTo(s.allocations());
            assertThat(s.allocatedBytesPeak()).as("%s peaks stay", location).isGreaterThanOrEqualTo((4 << 20) + 700);
            assertThat(own.snapshot(location).segments()).as("%s segments", location).isEmpty();
            assertThat(own.timeline(location)).as("%s: the history stays readable", location).isNotNull();
        }
        var figures = own.statistics();
        open.forEach(UnifiedBuffer::close);
        assertThat(own.statistics()).as("closing a buffer the manager closed changes nothing").isEqualTo(figures);
    }

    @Test
    void manyThreadsAllocateAndFreeConcurrently() throws Exception {
        int threads = 4;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Long>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                results.add(pool.submit(() -> {
                    ThreadLocalRandom r = ThreadLocalRandom.current();
                    List<UnifiedBuffer> mine = new ArrayList<>();
                    long checks = 0;
                    long deadline = System.nanoTime() + 500_000_000L;
                    while (System.nanoTime() < deadline) {
                        if (mine.size() < 16 && r.nextBoolean()) {
                            UnifiedBuffer b = manager.allocate(1 + r.nextInt(200_000), locations().get(r.nextInt(locations().size())));
                            b.copyFrom(0, new byte[] {(byte) b.byteSize()}, 0, 1);
                            mine.add(b);
                        } else if (!mine.isEmpty()) {
                            UnifiedBuffer b = mine.remove(r.nextInt(mine.size()));
                            byte[] first = new byte[1];
                            b.copyTo(0, first, 0, 1);
                            assertThat(first[0]).isEqualTo((byte) b.byteSize());
                            b.close();
                            checks++;
                        }
                    }
                    mine.forEach(UnifiedBuffer::close);
                    return checks;
                }));
            }
            long checks = 0;
            for (Future<Long> f : results) {
                checks += f.get();
            }
            assertThat(checks).isPositive();
        } finally {
            pool.shutdownNow();
        }
        for (MemoryLocation location : locations()) {
            MemoryStatistics s = manager.statistics(location);
            assertThat(s.allocatedBytes()).as("%s allocated", location).isZero();
            assertThat(s.liveBuffers()).as("%s live", location).isZero();
            assertThat(s.allocations()).isEqualTo(s.frees());
        }
    }

    @Test
    void aRecordingKeepsEveryAllocationAndFreeAtEveryLocation() {
        manager.startRecording(RecordingOptions.defaults());
        for (MemoryLocation location : locations()) {
            try (UnifiedBuffer small = manager.allocate(100, location); UnifiedBuffer large = manager.allocate(3 << 20, location)) {
                small.copyFrom(new byte[] {1});
                large.copyFrom(new byte[] {2});
            }
        }
        AllocationTrace trace = manager.stopRecording();

        for (MemoryLocation location : locations()) {
            assertThat(trace.events()).as("%s", location).filteredOn(e -> e.location() == location && e.kind() == TraceEvent.Kind.ALLOCATION)
                    .extracting(TraceEvent::bytes).contains(100L, 3L << 20);
        }
        assertThat(trace.frees()).isEqualTo(trace.allocations());
        assertThat(trace.earlierBlockFrees()).isZero();
        assertThat(trace.lines()).filteredOn(line -> line.startsWith("a,") || line.startsWith("f,")).hasSize(trace.events().size());
    }

    @Test
    void jdkFlightRecorderSeesTheBackendCallsAtEveryLocation() throws Exception {
        Path file = Files.createTempFile("backend-contract", ".jfr");
        try (Recording recording = new Recording()) {
            recording.enable("dev.compute.memory.BackendAllocation");
            recording.enable("dev.compute.memory.BackendFree");
            recording.start();
            for (MemoryLocation location : locations()) {
                manager.allocate(3 << 20, location).close();
            }
            manager.releaseCachedMemory();
            recording.stop();
            recording.dump(file);
            List<RecordedEvent> events = RecordingFile.readAllEvents(file);
            for (MemoryLocation location : locations()) {
                for (String name : List.of("dev.compute.memory.BackendAllocation", "dev.compute.memory.BackendFree")) {
                    assertThat(events).as("%s at %s", name, location).anySatisfy(event -> {
                        assertThat(event.getEventType().getName()).isEqualTo(name);
                        assertThat(event.getString("location")).isEqualTo(location.name());
                        assertThat(event.getLong("bytes")).isPositive();
                    });
                }
            }
        } finally {
            Files.deleteIfExists(file);
        }
    }

    @Test
    void asyncCopiesCompleteWithTheData() {
        try (Arena arena = Arena.ofShared(); UnifiedBuffer buffer = manager.allocate(1 << 20)) {
            MemorySegment source = arena.allocate(1 << 20);
            source.fill((byte) 7);
            CompletableFuture<Void> in = buffer.copyFromAsync(0, source);
            in.join();
            MemorySegment target = arena.allocate(1 << 20);
            buffer.copyToAsync(0, target).join();
            assertThat(target.mismatch(source)).isEqualTo(-1);
        }
    }

    // ---- helpers ------------------------------------------------------------------------------------------------

    protected byte[] randomBytes(int n) {
        byte[] b = new byte[n];
        random.nextBytes(b);
        return b;
    }

    protected double[] randomDoubles(int n) {
        double[] d = new double[n];
        for (int i = 0; i < n; i++) {
            d[i] = random.nextDouble() * 2 - 1;
        }
        return d;
    }

    protected static byte[] readAll(UnifiedBuffer buffer) {
        byte[] back = new byte[(int) buffer.byteSize()];
        buffer.copyTo(back);
        return back;
    }

    /** What a value becomes when stored at {@code type}'s precision. */
    protected static double stored(DataType type, double v) {
        return type == DataType.FLOAT32 ? (float) v : v;
    }

    protected static void write(UnifiedBuffer buffer, double[] values) {
        if (buffer.dataType() == DataType.FLOAT32) {
            float[] f = new float[values.length];
            for (int i = 0; i < f.length; i++) {
                f[i] = (float) values[i];
            }
            buffer.copyFrom(f);
        } else {
            buffer.copyFrom(values);
        }
    }

    protected static double[] read(UnifiedBuffer buffer) {
        int n = (int) buffer.elementCount();
        double[] out = new double[n];
        if (buffer.dataType() == DataType.FLOAT32) {
            float[] f = new float[n];
            buffer.copyTo(f);
            for (int i = 0; i < n; i++) {
                out[i] = f[i];
            }
        } else {
            buffer.copyTo(out);
        }
        return out;
    }
}
