package dev.compute.memory.cuda;

import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.cuda.FakeDriverScenarios.Counters;
import dev.compute.memory.cuda.FakeDriverScenarios.Stub;
import dev.compute.memory.spi.BackendSettings;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import jcuda.driver.CUstream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The staging lanes for copies from and to ordinary Java memory: their settings checked, lanes made on first use up to
 * the most allowed and then reused or waited for, each with its slots (pinned through the driver, or ordinary memory)
 * and an event per slot, and everything freed on close. Runs on the stand-in driver in a JVM of its own
 * ({@link FakeDriverScenarios}), which counts pinned allocations, events and calls made without the context; one test
 * uses a real GPU and skips without one.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class StagingBuffersTest {

    @Test
    void theSettingsAreCheckedBeforeAnythingIsAllocated() {
        assertThatThrownBy(() -> new StagingBuffers(null, 0, 2, 1, true)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a staging buffer needs a positive size: 0");
        assertThatThrownBy(() -> new StagingBuffers(null, 4096, 1, 1, true)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("staging needs at least 2 buffers per copy to overlap host and device work: 1");
        assertThatThrownBy(() -> new StagingBuffers(null, 4096, 2, 0, true)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("at least one staging lane is needed: 0");
        assertThat(new StagingBuffers(null, 4096, StagingBuffers.MIN_SLOTS, 1, false).pinned()).isFalse();
    }

    @Test
    void lanesAreMadeOnFirstUseUpToTheMostAllowedThenReused() throws Exception {
        FakeDriverScenarios.run(StagingBuffersTest.class, "lanesAreMadeOnFirstUseUpToTheMostAllowedThenReused");
    }

    @Test
    void aCopyBeyondTheMostLanesWaitsForOneAndAnInterruptedWaitSaysSo() throws Exception {
        FakeDriverScenarios.run(StagingBuffersTest.class, "aCopyBeyondTheMostLanesWaitsForOneAndAnInterruptedWaitSaysSo");
    }

    @Test
    void withoutPinningTheSlotsAreOrdinaryMemory() throws Exception {
        FakeDriverScenarios.run(StagingBuffersTest.class, "withoutPinningTheSlotsAreOrdinaryMemory");
    }

    @Test
    void onARealDeviceASlotCanBeWrittenAndItsEventRecordedOnAStream() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
        try (CudaContext context = new CudaContext(DriverLibrary.loadedOrNull(), 0);
             StagingBuffers staging = new StagingBuffers(context, CudaTestSupport.ODD_STAGING_BYTES, 2, 1, true)) {
            CUstream stream = new CUstream();
            CudaResults.check(cuStreamCreate(stream, 0), "cuStreamCreate");
            StagingBuffers.Lane lane = acquire(staging);
            lane.slot(1).fill((byte) 9);
            CudaResults.check(cuEventRecord(lane.event(1), stream), "cuEventRecord");
            CudaResults.check(cuEventSynchronize(lane.event(1)), "cuEventSynchronize");
            assertThat(lane.slot(1).get(ValueLayout.JAVA_BYTE, CudaTestSupport.ODD_STAGING_BYTES - 1)).isEqualTo((byte) 9);
            staging.release(lane);
            CudaResults.check(cuStreamDestroy(stream), "cuStreamDestroy");
        }
    }

    // ---- in the scenario's JVM, on the fake driver -----------------------------------------------------------------------

    public static void main(String[] args) {
        FakeDriverScenarios.exitWith(() -> {
            switch (args[0]) {
                case "lanesAreMadeOnFirstUseUpToTheMostAllowedThenReused" -> Scenarios.lanesAreMadeOnFirstUseUpToTheMostAllowedThenReused();
                case "aCopyBeyondTheMostLanesWaitsForOneAndAnInterruptedWaitSaysSo" -> Scenarios.aCopyBeyondTheMostLanesWaitsForOneAndAnInterruptedWaitSaysSo();
                case "withoutPinningTheSlotsAreOrdinaryMemory" -> Scenarios.withoutPinningTheSlotsAreOrdinaryMemory();
                default -> throw new IllegalArgumentException("no scenario " + args[0]);
            }
        });
    }

    /** What the tests run in their own JVMs, on the fake driver. */
    static final class Scenarios {
        private Scenarios() {}

        static void lanesAreMadeOnFirstUseUpToTheMostAllowedThenReused() throws Throwable {
            CudaContext context = Stub.context();
            StagingBuffers staging = new StagingBuffers(context, 4096, 3, 2, true);
            assertThat(Stub.counters().pinned()).as("nothing before the first copy").isZero();

            // the first lane is made on a thread that has never had the context current
            CompletableFuture<StagingBuffers.Lane> made = new CompletableFuture<>();
            Thread.ofPlatform().start(() -> {
                try {
                    made.complete(acquire(staging));
                } catch (Throwable t) {
                    made.completeExceptionally(t);
                }
            }).join(10_000);
            StagingBuffers.Lane first = made.get(10, TimeUnit.SECONDS);

            assertThat(first.slots()).isEqualTo(3);
            assertThat(first.slotBytes()).isEqualTo(4096);
            Counters afterOne = Stub.counters();
            assertThat(afterOne.pinned()).as("a pinned slot each").isEqualTo(3);
            assertThat(afterOne.events()).as("an event each").isEqualTo(3);
            Set<Long> addresses = new HashSet<>();
            for (int i = 0; i < first.slots(); i++) {
                assertThat(first.slot(i).byteSize()).isEqualTo(4096);
                assertThat(first.pointer(i).address()).isEqualTo(first.slot(i).address());
                assertThat(first.event(i)).isNotNull();
                first.slot(i).fill((byte) i);
                addresses.add(first.slot(i).address());
            }
            assertThat(addresses).as("slots of their own").hasSize(3);

            staging.release(first);
            assertThat(acquire(staging)).as("an idle lane is reused").isSameAs(first);
            StagingBuffers.Lane second = acquire(staging);
            assertThat(second).isNotSameAs(first);
            assertThat(Stub.counters().pinned()).isEqualTo(6);

            staging.release(first);
            staging.release(second);
            staging.close();
            Counters closed = Stub.counters();
            assertThat(closed.pinned()).as("every slot freed").isZero();
            assertThat(closed.events()).as("every event destroyed").isZero();
            assertThat(closed.callsWithoutContext()).isZero();
            assertThat(closed.rejected()).isZero();
            context.close();
        }

        static void aCopyBeyondTheMostLanesWaitsForOneAndAnInterruptedWaitSaysSo() throws Throwable {
            CudaContext context = Stub.context();
            StagingBuffers staging = new StagingBuffers(context, 4096, 2, 1, true);
            StagingBuffers.Lane only = acquire(staging);

            CompletableFuture<StagingBuffers.Lane> waiting = CompletableFuture.supplyAsync(() -> acquire(staging));
            Thread.sleep(200);
            assertThat(waiting).as("the one lane is in use").isNotDone();
            staging.release(only);
            assertThat(waiting).succeedsWithin(Duration.ofSeconds(10)).isSameAs(only);
            assertThat(Stub.counters().pinned()).as("no second lane was made").isEqualTo(2);

            Thread.currentThread().interrupt();
            assertThatThrownBy(() -> acquire(staging)).isInstanceOf(IllegalStateException.class)
                    .hasMessage("interrupted while waiting for a staging buffer").hasCauseInstanceOf(InterruptedException.class);
            assertThat(Thread.interrupted()).as("the interrupt is kept").isTrue();

            staging.close();
            assertThat(Stub.counters().pinned()).isZero();
            context.close();
        }

        static void withoutPinningTheSlotsAreOrdinaryMemory() throws Throwable {
            CudaContext context = Stub.context();
            StagingBuffers staging = new StagingBuffers(context, 8192, 2, 1, false);

            StagingBuffers.Lane lane = acquire(staging);

            assertThat(staging.pinned()).isFalse();
            assertThat(Stub.counters().pinned()).isZero();
            assertThat(Stub.counters().events()).isEqualTo(2);
            lane.slot(1).fill((byte) 5);
            assertThat(lane.slot(1).get(ValueLayout.JAVA_BYTE, 8191)).isEqualTo((byte) 5);
            assertThat(lane.slot(0).address() % 64).as("aligned for copies").isZero();
            staging.release(lane);
            staging.close();
            assertThat(Stub.counters().events()).isZero();
            assertThat(Stub.counters().rejected()).isZero();
            context.close();
        }
    }

    /** A lane, waiting as long as a test may. */
    private static StagingBuffers.Lane acquire(StagingBuffers staging) {
        return staging.acquire(System.nanoTime() + TimeUnit.MINUTES.toNanos(1));
    }
}
