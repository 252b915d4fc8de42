package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.testing.LogCapture;
import dev.compute.memory.testing.ManagerInvariants;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Level;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The CPU backend as a user meets it: through the manager's builder, by name. */
class CpuMemoryManagerTest {

    @Test
    void aReleaseThresholdUnderThePageSizeIsExplainedAtStart() {
        try (LogCapture log = LogCapture.managerLog();
             UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").releaseThreshold(1 << 20).build()) {
            assertThat(manager.settings().expandableSegments()).isTrue();
            assertThat(log.messages(Level.INFO)).anySatisfy(message -> assertThat(message)
                    .contains("compute.memory.pooling.release-threshold (1048576 bytes) is under the page size at HOST")
                    .contains("a page that holds any open buffer stays mapped"));
        }
        try (LogCapture log = LogCapture.managerLog();
             UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").releaseThreshold(0).build()) {
            assertThat(log.messages(Level.INFO)).noneSatisfy(message -> assertThat(message).contains("under the page size"));
        }
    }

    @Test
    void allocateWriteComputeReadClose() {
        UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
        try (manager) {
            assertThat(manager.backendInfo().backend()).isEqualTo("cpu");
            assertThat(manager.defaultLocation()).isEqualTo(MemoryLocation.HOST);
            assertThat(manager.locations()).containsExactly(MemoryLocation.values());
            assertThat(manager.deviceMemory().totalBytes()).isPositive();

            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1001, MemoryLocation.DEVICE);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 1001, MemoryLocation.PINNED)) {
                float[] values = new float[1001];
                for (int i = 0; i < values.length; i++) {
                    values[i] = i;
                }
                x.copyFrom(values);
                manager.ops().fill(y, 1.0);
                manager.ops().axpy(2.0, x, y);
                manager.ops().scale(y, 0.5);
                assertThat(manager.ops().sum(y)).isEqualTo((1001 * 1000 + 1001) / 2.0);

                float[] back = new float[1001];
                y.copyTo(back);
                assertThat(back[1000]).isEqualTo(1000.5f);
                assertThat(y.isHostAccessible()).isTrue();
                assertThat(y.state()).isEqualTo(BufferState.SYNCHRONIZED);
                MemorySegment view = y.readOnlyHostView();
                assertThat(view.getAtIndex(ValueLayout.JAVA_FLOAT, 3)).isEqualTo(3.5f);
            }
            for (MemoryLocation location : manager.locations()) {
                MemoryStatistics s = manager.statistics(location);
                assertThat(s.allocatedBytes()).as("%s", location).isZero();
                assertThat(s.liveBuffers()).as("%s", location).isZero();
            }
        }
        assertThat(manager.isClosed()).isTrue();
    }

    @Test
    void anAllocationLargerThanTheMachineFailsWithExpandableSegmentsAsWithout() {
        long huge = CpuVirtualMemoryTest.MORE_THAN_THE_MACHINE;
        assumeTrue(huge > HostMemoryLedger.PROCESS.limitBytes(), "this machine has more than " + huge + " bytes of memory and swap");
        String expected = "out of HOST memory: requested " + huge + " bytes .* the backend said: no host memory for \\d+ bytes of HOST: "
                + "this process's CPU backends hold \\d+ bytes, and \\d+ more would pass the \\d+ bytes of the machine's memory and swap"
                + ".* bytes available\\); device free \\d+ of \\d+ bytes";
        for (boolean expandable : new boolean[] {true, false}) {
            // the cap above the request, so that the backend is asked
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(1L << 40)
                    .expandableSegments(expandable).timelineInterval(Duration.ZERO).build()) {
                DeviceOutOfMemoryException refusal = catchThrowableOfType(DeviceOutOfMemoryException.class, () -> manager.allocate(huge));

                assertThat(refusal).as("expandable=%s", expandable).isNotNull();
                assertThat(refusal.getMessage()).as("expandable=%s", expandable).matches("(?s)" + expected);
                assertThat(refusal.requestedBytes()).isEqualTo(huge);
                try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT64, 8 << 20)) {
                    manager.ops().fill(buffer, 2.0);
                    assertThat(manager.ops().sum(buffer)).isEqualTo(2.0 * (8 << 20));
                    ManagerInvariants.checkQuiescent(manager);
                }
                MemoryStatistics s = manager.statistics(MemoryLocation.HOST);
                assertThat(s.allocatedBytes()).isZero();
                assertThat(s.liveBuffers()).isZero();
                assertThat(s.allocations()).as("the refused request is no allocation").isEqualTo(1);
                assertThat(s.reservedBytes()).as("nothing of the refused request is held").isLessThan(1L << 30);
                ManagerInvariants.checkQuiescent(manager);
            }
        }
    }

    @Test
    void aCapBeyondTheAddressSpaceStillAllocates() {
        // ranges sized by the cap would ask for twice 100 TiB, more than the 128 TiB a process has
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(100L << 40)
                .timelineInterval(Duration.ZERO).build()) {
            for (MemoryLocation location : new MemoryLocation[] {MemoryLocation.HOST, MemoryLocation.DEVICE, MemoryLocation.UNIFIED}) {
                try (UnifiedBuffer small = manager.allocate(DataType.FLOAT32, 256, location);
                     UnifiedBuffer large = manager.allocate(DataType.FLOAT64, 8 << 20, location)) {
                    manager.ops().fill(small, 1.0);
                    manager.ops().fill(large, 1.0);
                    assertThat(manager.ops().sum(small) + manager.ops().sum(large)).as("%s", location).isEqualTo(256.0 + (8 << 20));
                }
            }
            assertThat(manager.snapshot(MemoryLocation.HOST).segments()).allSatisfy(segment -> assertThat(segment.expandable()).isTrue());
            ManagerInvariants.checkQuiescent(manager);
        }
    }

    /**
     * Linux grants each of these (under the default heuristic each is below RAM and swap) and would end the process when
     * they are touched; the backend's ledger refuses the one that passes the machine. Nothing here is touched.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"expandable segments", "plain segments", "pooling off"})
    void allocationsThatTogetherPassTheMachinesMemoryAndSwapFailWithTheOutOfMemoryException(String pool) {
        long machine = HostMemoryLedger.PROCESS.limitBytes();
        assumeTrue(machine < 1L << 42, "this machine's memory and swap cannot be read, or are larger than this test asks for");
        long chunk = machine / 8;
        long heldBefore = HostMemoryLedger.PROCESS.heldBytes();
        List<UnifiedBuffer> held = new ArrayList<>();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(4 * machine)
                .poolingEnabled(!pool.equals("pooling off")).expandableSegments(pool.equals("expandable segments"))
                .timelineInterval(Duration.ZERO).build()) {
            DeviceOutOfMemoryException refusal = null;
            for (int i = 0; i < 16 && refusal == null; i++) {
                MemoryLocation location = i % 2 == 0 ? MemoryLocation.DEVICE : MemoryLocation.HOST; // one machine under both
                try {
                    held.add(manager.allocate(chunk, location));
                } catch (DeviceOutOfMemoryException e) {
                    refusal = e;
                }
            }

            assertThat(refusal).as("a refusal before 16 allocations of an eighth of the machine each").isNotNull();
            assertThat(refusal.getMessage()).contains("of the machine's memory and swap");
            assertThat(held.size() * chunk).isLessThanOrEqualTo(machine);
            held.forEach(UnifiedBuffer::close);
            held.clear();
            try (UnifiedBuffer after = manager.allocate(chunk, MemoryLocation.DEVICE)) {
                assertThat(after.byteSize()).as("freed memory is counted back").isEqualTo(chunk);
            }
        } finally {
            held.forEach(UnifiedBuffer::close);
        }
        assertThat(HostMemoryLedger.PROCESS.heldBytes()).as("the closed manager's memory is counted back").isLessThanOrEqualTo(heldBefore);
    }

    @Test
    void eachCallerGetsAFutureOfItsOwnSoThatWhatOneDoesToItsFutureFailsNoOtherCall() {
        try (UnifiedMemoryManager one = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
             UnifiedMemoryManager another = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
             UnifiedBuffer x = one.allocate(DataType.FLOAT32, 4);
             UnifiedBuffer y = another.allocate(DataType.FLOAT32, 4)) {
            MemorySegment zeros = MemorySegment.ofArray(new float[4]);
            one.ops().fillAsync(x, 1).obtrudeException(new IllegalStateException("the caller's own recovery"));
            one.ops().scaleAsync(x, 2).obtrudeException(new IllegalStateException("the caller's own recovery"));
            x.copyFromAsync(0, zeros).obtrudeException(new IllegalStateException("the caller's own recovery"));
            x.copyToAsync(0, MemorySegment.ofArray(new float[4])).obtrudeException(new IllegalStateException("the caller's own recovery"));

            another.ops().fill(y, 2);
            another.ops().scale(y, 2);
            another.ops().axpy(1, y, y);
            assertThat(another.ops().sum(y)).isEqualTo(32.0);
            y.copyFromAsync(0, zeros).join();
            y.copyToAsync(0, MemorySegment.ofArray(new float[4])).join();
            assertThat(one.ops().fillAsync(x, 1)).isCompleted().isNotCompletedExceptionally();
        }
    }
}
