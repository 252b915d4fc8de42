package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.AddressSpaceBackend;
import dev.compute.memory.testing.ControlledBackend;
import dev.compute.memory.testing.FaultInjectingBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The op set of a manager on the simulated discrete device: arguments checked before anything is held, each buffer
 * held for the span of the queueing with a newer host copy synced first, the kernel's future recorded as device work
 * on the buffers (a close meanwhile keeps the memory out of the pool, a read waits for it), and a kernel that cannot
 * be queued letting go of what it held.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BackendComputeOpsTest {

    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final ControlledBackend backend = new ControlledBackend(new SimulatedDiscreteBackend());
    private final UnifiedMemoryManager manager = manager(backend);
    private final ComputeOps ops = manager.ops();
    private final List<UnifiedBuffer> buffers = new ArrayList<>();

    private static UnifiedMemoryManager manager(dev.compute.memory.spi.ComputeBackend backend) {
        return UnifiedMemoryManager.builder().backend(backend).timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO)
                .leakDetection(LeakDetectionLevel.DISABLED).build();
    }

    @AfterEach
    void close() {
        backend.releaseDeviceWork();
        buffers.forEach(UnifiedBuffer::close);
        manager.close();
    }

    private UnifiedBuffer floats(float... values) {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, values.length, DEVICE);
        buffers.add(buffer);
        buffer.copyFrom(values);
        return buffer;
    }

    private static float[] read(UnifiedBuffer buffer) {
        float[] values = new float[(int) buffer.elementCount()];
        buffer.copyTo(values);
        return values;
    }

    @Test
    void theOpsComputeOnTheDeviceCopyOfFloatsAndDoubles() {
        UnifiedBuffer x = floats(1, 2, 3, 4);
        UnifiedBuffer y = floats(10, 20, 30, 40);

        ops.scale(x, 2);
        ops.axpy(0.5, x, y);
        assertThat(read(y)).containsExactly(11, 22, 33, 44);
        assertThat(ops.sum(y)).isEqualTo(110.0);
        ops.fill(x, -1.5);
        assertThat(read(x)).containsOnly(-1.5f);

        try (UnifiedBuffer d = manager.allocate(DataType.FLOAT64, 3, DEVICE)) {
            d.copyFrom(new double[] {0.25, 0.5, 1e10});
            assertThat(ops.sum(d)).isEqualTo(1e10 + 0.75);
        }
        assertThat(y.state()).as("written on the device").isEqualTo(BufferState.DEVICE_ONLY);
    }

    @Test
    void floatsAreComputedInFloatWithAlphaRoundedToFloatAsOnEveryRealBackend() {
        UnifiedBuffer x = floats(1e30f, 1e-20f);
        UnifiedBuffer y = floats(0, 2);

        ops.scale(x, 1e-50); // (float) 1e-50 is 0
        assertThat(read(x)).containsExactly(0, 0);
        x.copyFrom(new float[] {0, 1e-20f});
        ops.axpy(1e40, x, y); // (float) 1e40 is infinite: inf * 0 is NaN, inf * 1e-20 inf
        assertThat(read(y)).containsExactly(Float.NaN, Float.POSITIVE_INFINITY);
    }

    @Test
    void anOpOnASliceWorksOnItsRangeOnly() {
        UnifiedBuffer x = floats(1, 2, 3, 4, 5, 6);

        ops.fill(x.slice(2, 2), 0);

        assertThat(read(x)).containsExactly(1, 2, 0, 0, 5, 6);
        assertThat(ops.sum(x.slice(3, 3))).isEqualTo(11.0);
    }

    @Test
    void axpyOnOverlappingRangesOfOneBufferIsRefusedAndOnTheSameOrSeparateRangesComputes() {
        UnifiedBuffer x = floats(1, 2, 3, 4, 5);

        // y = x + y over [1, 4) and [0, 3): each kernel's order of reads and writes would give another answer
        assertThatThrownBy(() -> ops.axpyAsync(1, x.slice(0, 3), x.slice(1, 3))).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("axpy needs x and y to be the same range or ranges apart: x is elements [0, 3) and y elements [1, 4) of one buffer");
        assertThatThrownBy(() -> ops.axpyAsync(1, x.slice(2, 3), x.slice(0, 3))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("x is elements [2, 5) and y elements [0, 3) of one buffer");
        assertThat(read(x)).as("untouched").containsExactly(1, 2, 3, 4, 5);

        ops.axpy(1, x.slice(0, 2), x.slice(2, 2));
        assertThat(read(x)).containsExactly(1, 2, 4, 6, 5);
        ops.axpy(1, x.slice(1, 3), x.slice(1, 3));
        assertThat(read(x)).containsExactly(1, 4, 8, 12, 5);
        ops.axpy(2, x, x);
        assertThat(read(x)).containsExactly(3, 12, 24, 36, 15);
    }

    @Test
    void aNewerHostCopyIsSyncedToTheDeviceBeforeTheKernelReadsIt() {
        UnifiedBuffer x = floats(1, 1, 1, 1);
        MemorySegment view = x.hostView();
        view.setAtIndex(ValueLayout.JAVA_FLOAT, 0, 5f);
        assertThat(x.state()).isEqualTo(BufferState.HOST_DIRTY);

        assertThat(ops.sum(x)).isEqualTo(8.0);

        assertThat(x.state()).isEqualTo(BufferState.SYNCHRONIZED);
        ops.scale(x, 2);
        assertThat(x.state()).as("the device copy is newer now").isEqualTo(BufferState.DEVICE_DIRTY);
    }

    @Test
    void argumentsAreCheckedBeforeAnythingIsHeld() {
        UnifiedBuffer x = floats(1, 2, 3, 4);
        UnifiedBuffer longer = floats(1, 2, 3, 4, 5);
        UnifiedBuffer ints = manager.allocate(DataType.INT32, 4, DEVICE);
        try (UnifiedMemoryManager other = manager(new SimulatedDiscreteBackend());
             UnifiedBuffer foreign = other.allocate(DataType.FLOAT32, 4, DEVICE)) {
            assertThatThrownBy(() -> ops.fillAsync(foreign, 1)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("target belongs to another UnifiedMemoryManager");
            assertThatThrownBy(() -> ops.axpyAsync(1, x, foreign)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("y belongs to another UnifiedMemoryManager");
        }
        assertThatThrownBy(() -> ops.axpyAsync(1, x, null)).isInstanceOf(NullPointerException.class).hasMessage("y");
        assertThatThrownBy(() -> ops.fill(null, 1)).isInstanceOf(NullPointerException.class).hasMessage("target");
        assertThatThrownBy(() -> ops.sumAsync(ints)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the op set works on FLOAT32 and FLOAT64 buffers; x is INT32");
        assertThatThrownBy(() -> ops.axpyAsync(1, x, longer)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("axpy needs x and y of one type and length: x is 4 x FLOAT32, y is 5 x FLOAT32");

        x.close();
        longer.close();
        ints.close();
        assertThat(manager.statistics(DEVICE).liveBuffers()).as("nothing was held").isZero();
        assertThatThrownBy(() -> ops.scaleAsync(x, 2)).isInstanceOf(IllegalStateException.class).hasMessageContaining("is closed");
    }

    @Test
    void aKernelStillRunningKeepsAClosedBuffersMemoryOutOfThePoolAndAReadWaitsForIt() throws Exception {
        UnifiedBuffer x = floats(1, 2, 3, 4);
        UnifiedBuffer y = floats(0, 0, 0, 0);
        UnifiedBuffer z = floats(10, 20, 30, 40);
        backend.holdDeviceWork();

        CompletableFuture<Void> filled = ops.fillAsync(y, 7);
        CompletableFuture<Void> added = ops.axpyAsync(1, x, z);
        CompletableFuture<float[]> reader = CompletableFuture.supplyAsync(() -> read(y));
        x.close();
        Thread.sleep(100);

        assertThat(filled).isNotDone();
        assertThat(added).isNotDone();
        assertThat(reader).as("a read waits for the kernel that writes").isNotDone();
        assertThat(manager.snapshot(DEVICE).segments()).flatExtracting(MemorySnapshot.Segment::blocks)
                .extracting(MemorySnapshot.Block::state).as("x's block waits for the kernel that reads it")
                .contains(MemorySnapshot.BlockState.PENDING);

        backend.releaseDeviceWork();
        assertThat(reader).succeedsWithin(Duration.ofSeconds(10)).isEqualTo(new float[] {7, 7, 7, 7});
        assertThat(added).succeedsWithin(Duration.ofSeconds(10));
        assertThat(read(z)).containsExactly(11, 22, 33, 44);
        manager.trim();
        assertThat(manager.snapshot(DEVICE).segments()).flatExtracting(MemorySnapshot.Segment::blocks)
                .extracting(MemorySnapshot.Block::state).doesNotContain(MemorySnapshot.BlockState.PENDING);
    }

    /**
     * The future an op or an async copy hands its caller is the caller's own: cancelling it, completing it, failing it
     * or timing it out (what a caller's error handling does) says nothing about the device, so a buffer closed after it
     * still keeps its memory out of the pool until the work has really run.
     */
    @Test
    void whatACallerDoesToItsFutureNeverLetsTheMemoryGoBackUnderRunningWork() throws Exception {
        UnifiedBuffer filled = floats(0, 0, 0, 0);
        UnifiedBuffer scaled = floats(1, 1, 1, 1);
        UnifiedBuffer written = floats(0, 0, 0, 0);
        UnifiedBuffer timedOut = floats(0, 0, 0, 0);
        backend.holdDeviceWork();

        assertThat(ops.fillAsync(filled, 7).cancel(true)).isTrue();
        assertThat(ops.scaleAsync(scaled, 2).complete(null)).isTrue();
        CompletableFuture<Void> copy = written.copyFromAsync(0, MemorySegment.ofArray(new float[] {1, 2, 3, 4}));
        copy.obtrudeException(new IllegalStateException("the caller's own"));
        CompletableFuture<Void> bounded = ops.fillAsync(timedOut, 3).orTimeout(1, TimeUnit.MILLISECONDS);
        assertThat(bounded).failsWithin(Duration.ofSeconds(10));
        for (UnifiedBuffer each : List.of(filled, scaled, written, timedOut)) {
            each.close();
        }

        assertThat(manager.snapshot(DEVICE).segments()).flatExtracting(MemorySnapshot.Segment::blocks)
                .extracting(MemorySnapshot.Block::state).as("each block waits for the work queued on it")
                .filteredOn(MemorySnapshot.BlockState.PENDING::equals).hasSize(4);
        backend.releaseDeviceWork();
        manager.trim();
        assertThat(manager.snapshot(DEVICE).segments()).flatExtracting(MemorySnapshot.Segment::blocks)
                .extracting(MemorySnapshot.Block::state).doesNotContain(MemorySnapshot.BlockState.PENDING);
    }

    @Test
    void aKernelThatFailsOnTheDeviceFailsItsFutureAndTheBufferGoesOn() {
        FaultInjectingBackend faulty = new FaultInjectingBackend(new SimulatedDiscreteBackend(), 3);
        try (UnifiedMemoryManager failing = manager(faulty)) {
            UnifiedBuffer x = failing.allocate(DataType.FLOAT32, 4, DEVICE);
            CompletableFuture<Void> trigger = new CompletableFuture<>();
            faulty.failNextKernelWhen(trigger);

            CompletableFuture<Void> fill = failing.ops().fillAsync(x, 1);
            trigger.complete(null);

            assertThat(fill).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
                    .withCauseInstanceOf(FaultInjectingBackend.InjectedFault.class);
            failing.ops().fill(x, 2);
            assertThat(failing.ops().sum(x)).isEqualTo(8.0);
            x.close();
        }
    }

    @Test
    void aKernelThatCannotBeQueuedLetsGoOfTheBuffersItHeld() {
        try (UnifiedMemoryManager noKernels = manager(new AddressSpaceBackend(1L << 30))) {
            UnifiedBuffer x = noKernels.allocate(DataType.FLOAT32, 1024, DEVICE);
            UnifiedBuffer y = noKernels.allocate(DataType.FLOAT32, 1024, DEVICE);

            assertThatThrownBy(() -> noKernels.ops().fillAsync(x, 1)).isInstanceOf(UnsupportedOperationException.class);
            assertThatThrownBy(() -> noKernels.ops().axpyAsync(1, x, y)).isInstanceOf(UnsupportedOperationException.class);
            x.close();
            y.close();

            assertThat(noKernels.statistics(DEVICE).liveBuffers()).as("given back on close: no hold was left").isZero();
        }
    }

    @Test
    void noOpRunsOnceTheManagerIsClosed() {
        UnifiedBuffer x = floats(1, 2);
        try (LogCapture closedWithABufferOpen = LogCapture.managerLog()) {
            manager.close();
        }

        assertThatThrownBy(() -> ops.sumAsync(x)).isInstanceOf(IllegalStateException.class)
                .hasMessageEndingWith("because its UnifiedMemoryManager was closed");
    }
}
