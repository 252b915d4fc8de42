package dev.compute.memory.cuda;

import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.cuda.FakeDriverScenarios.Stub;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import jcuda.driver.CUstream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Futures for device work: one completes only once the event recorded behind the work has completed, with its value
 * or the failure the device reported, on a callback thread (so that what runs on completion never holds up the next
 * event); the calling thread's own waits; events reused; a bounded close. Runs on the stand-in driver in a JVM of its
 * own ({@link FakeDriverScenarios}), whose events wait until the test releases them or fail on streams made to fail;
 * one test uses a real GPU and skips without one.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class DeviceCompletionsTest {

    @Test
    void aFutureCompletesOnlyOnceTheDeviceHasDoneTheWorkBeforeIt() throws Exception {
        FakeDriverScenarios.run(DeviceCompletionsTest.class, "aFutureCompletesOnlyOnceTheDeviceHasDoneTheWorkBeforeIt");
    }

    @Test
    void aFailureOnTheDeviceFailsTheFutureAndTheWaitButNotTheQuietWait() throws Exception {
        FakeDriverScenarios.run(DeviceCompletionsTest.class, "aFailureOnTheDeviceFailsTheFutureAndTheWaitButNotTheQuietWait");
    }

    @Test
    void whatRunsOnCompletionRunsElsewhereAndHoldsUpNoOtherEvent() throws Exception {
        FakeDriverScenarios.run(DeviceCompletionsTest.class, "whatRunsOnCompletionRunsElsewhereAndHoldsUpNoOtherEvent");
    }

    @Test
    void workThatNeverEndsOnOneStreamHoldsUpNoOtherStreamsFutures() throws Exception {
        FakeDriverScenarios.run(DeviceCompletionsTest.class, "workThatNeverEndsOnOneStreamHoldsUpNoOtherStreamsFutures");
    }

    @Test
    void closeIsBoundedAndFreesTheEventsOnceTheDeviceIsDone() throws Exception {
        FakeDriverScenarios.run(DeviceCompletionsTest.class, "closeIsBoundedAndFreesTheEventsOnceTheDeviceIsDone");
    }

    @Test
    void onARealDeviceAFutureCompletesWithTheWorkOfAStream() throws Exception {
        try (CudaBackend backend = CudaTestSupport.openBackend()) {
            CUstream stream = backend.enter();
            CompletableFuture<String> done = backend.completions().record(stream, () -> "done");
            assertThat(done).succeedsWithin(Duration.ofSeconds(30)).isEqualTo("done");
            backend.completions().await(stream);
        }
    }

    // ---- in the scenario's JVM, on the fake driver -----------------------------------------------------------------------

    public static void main(String[] args) {
        FakeDriverScenarios.exitWith(() -> {
            switch (args[0]) {
                case "aFutureCompletesOnlyOnceTheDeviceHasDoneTheWorkBeforeIt" -> Scenarios.aFutureCompletesOnlyOnceTheDeviceHasDoneTheWorkBeforeIt();
                case "aFailureOnTheDeviceFailsTheFutureAndTheWaitButNotTheQuietWait" -> Scenarios.aFailureOnTheDeviceFailsTheFutureAndTheWaitButNotTheQuietWait();
                case "whatRunsOnCompletionRunsElsewhereAndHoldsUpNoOtherEvent" -> Scenarios.whatRunsOnCompletionRunsElsewhereAndHoldsUpNoOtherEvent();
                case "closeIsBoundedAndFreesTheEventsOnceTheDeviceIsDone" -> Scenarios.closeIsBoundedAndFreesTheEventsOnceTheDeviceIsDone();
                case "workThatNeverEndsOnOneStreamHoldsUpNoOtherStreamsFutures" -> Scenarios.workThatNeverEndsOnOneStreamHoldsUpNoOtherStreamsFutures();
                default -> throw new IllegalArgumentException("no scenario " + args[0]);
            }
        });
    }

    /** What the tests run in their own JVMs, on the fake driver. */
    static final class Scenarios {
        private Scenarios() {}

        private static CUstream stream() {
            CUstream stream = new CUstream();
            CudaResults.check(cuStreamCreate(stream, 0), "cuStreamCreate");
            return stream;
        }

        static void aFutureCompletesOnlyOnceTheDeviceHasDoneTheWorkBeforeIt() throws Throwable {
            CudaContext context = Stub.context();
            DeviceCompletions completions = new DeviceCompletions(context);
            CUstream stream = stream();
            long recorded = Stub.counters().eventsRecorded();

            Stub.hold();
            CompletableFuture<Integer> held = completions.record(stream, () -> 42);
            assertThatThrownBy(() -> held.get(200, TimeUnit.MILLISECONDS)).isInstanceOf(TimeoutException.class);
            CompletableFuture<Void> waited = CompletableFuture.runAsync(() -> {
                context.makeCurrent(); // as every entry point of the backend does first
                completions.await(stream);
            });
            Thread.sleep(100);
            assertThat(waited).as("the calling thread's wait too").isNotDone();
            Stub.release();

            assertThat(held).succeedsWithin(Duration.ofSeconds(10)).isEqualTo(42);
            assertThat(waited).succeedsWithin(Duration.ofSeconds(10));
            assertThat(completions.record(stream)).succeedsWithin(Duration.ofSeconds(10));
            assertThat(Stub.counters().eventsRecorded() - recorded).isEqualTo(3);
            completions.await(stream);
            assertThat(Stub.counters().eventsRecorded() - recorded).as("a wait on an idle stream records no event").isEqualTo(3);

            for (int i = 0; i < 100; i++) {
                completions.record(stream).get(10, TimeUnit.SECONDS);
            }
            assertThat(Stub.counters().events()).as("events are reused, not made per future").isLessThanOrEqualTo(4);

            CompletableFuture<Object> failingValue = completions.record(stream, () -> {
                throw new IllegalStateException("the value could not be read");
            });
            assertThat(failingValue).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
                    .withCauseInstanceOf(IllegalStateException.class).withMessageContaining("the value could not be read");

            // positions: no event of their own; a marker the waiter records behind them completes them, each with its value
            Stub.hold();
            CompletableFuture<Object> failingPosition = completions.position(stream, () -> {
                throw new IllegalStateException("the position's value could not be read");
            });
            CompletableFuture<Integer> position = completions.position(stream, () -> 7);
            assertThatThrownBy(() -> position.get(200, TimeUnit.MILLISECONDS)).isInstanceOf(TimeoutException.class);
            assertThat(failingPosition).isNotDone();
            Stub.release();
            assertThat(failingPosition).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
                    .withCauseInstanceOf(IllegalStateException.class).withMessageContaining("the position's value could not be read");
            assertThat(position).as("a failed value leaves the rest of the marker's positions to complete").succeedsWithin(Duration.ofSeconds(10)).isEqualTo(7);

            assertThat(completions.close(Duration.ofSeconds(10))).isTrue();
            CudaResults.check(cuStreamDestroy(stream), "cuStreamDestroy");
            assertThat(Stub.counters().events()).isZero();
            assertThat(Stub.counters().callsWithoutContext()).as("the waiter made the context current").isZero();
            context.close();
        }

        static void aFailureOnTheDeviceFailsTheFutureAndTheWaitButNotTheQuietWait() throws Throwable {
            CudaContext context = Stub.context();
            DeviceCompletions completions = new DeviceCompletions(context);
            Stub.failingStreams(true);
            CUstream failing = stream();
            Stub.failingStreams(false);
            CUstream healthy = stream();

            CompletableFuture<Void> failed = completions.record(failing);
            CompletableFuture<Void> failedPosition = completions.position(failing);
            CompletableFuture<Void> next = completions.record(healthy);

            assertThat(failed).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
                    .havingCause().isInstanceOf(CudaException.class).withMessageContaining("CUDA_ERROR_ILLEGAL_ADDRESS");
            assertThat(failedPosition).as("a position, through its marker").failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
                    .havingCause().isInstanceOf(CudaException.class).withMessageContaining("CUDA_ERROR_ILLEGAL_ADDRESS");
            assertThat(next).as("the waiter goes on after a failure").succeedsWithin(Duration.ofSeconds(10));
            assertThatThrownBy(() -> completions.await(failing)).isInstanceOf(CudaException.class)
                    .hasMessageContaining("cuEventQuery").hasMessageContaining("CUDA_ERROR_ILLEGAL_ADDRESS");
            completions.awaitQuietly(failing);

            assertThat(completions.close(Duration.ofSeconds(10))).isTrue();
            assertThat(Stub.counters().events()).as("the failed events went back and were destroyed too").isZero();
            CudaResults.check(cuStreamDestroy(failing), "cuStreamDestroy");
            CudaResults.check(cuStreamDestroy(healthy), "cuStreamDestroy");
            context.close();
        }

        static void whatRunsOnCompletionRunsElsewhereAndHoldsUpNoOtherEvent() throws Throwable {
            CudaContext context = Stub.context();
            DeviceCompletions completions = new DeviceCompletions(context);
            CUstream stream = stream();
            AtomicReference<String> completedOn = new AtomicReference<>();

            Stub.hold();
            CompletableFuture<Void> first = completions.record(stream);
            CompletableFuture<Void> second = completions.record(stream);
            CompletableFuture<Void> blocking = first.thenRun(() -> {
                completedOn.set(Thread.currentThread().getName());
                second.orTimeout(10, TimeUnit.SECONDS).join(); // waits for the next event: the waiter must not be the one running this
            });
            Stub.release();

            assertThat(second).succeedsWithin(Duration.ofSeconds(10));
            assertThat(blocking).succeedsWithin(Duration.ofSeconds(10));
            assertThat(completedOn.get()).startsWith("compute-cuda-0-callbacks-");

            assertThat(completions.close(Duration.ofSeconds(10))).isTrue();
            CudaResults.check(cuStreamDestroy(stream), "cuStreamDestroy");
            context.close();
        }

        /**
         * A kernel that never ends on one stream (a user's stream, or one thread's) leaves the futures of every other
         * stream to complete as their own work does, and a close bounded by the stuck one still says so.
         */
        static void workThatNeverEndsOnOneStreamHoldsUpNoOtherStreamsFutures() throws Throwable {
            CudaContext context = Stub.context();
            DeviceCompletions completions = new DeviceCompletions(context);
            CUstream stuckStream = stream();
            CUstream other = stream();

            Stub.hold();
            CompletableFuture<Void> stuck = completions.record(stuckStream);
            CompletableFuture<Void> behindStuck = completions.record(stuckStream);
            Stub.stopHolding();
            for (int i = 0; i < 20; i++) {
                assertThat(completions.record(other, () -> "done")).as("work on another stream, round " + i)
                        .succeedsWithin(Duration.ofSeconds(10)).isEqualTo("done");
            }
            assertThat(stuck).isNotDone();
            assertThat(behindStuck).as("a stream's futures complete in its order").isNotDone();

            assertThat(completions.close(Duration.ofMillis(300))).as("the stuck stream's work is not done").isFalse();
            Stub.release();
            assertThat(stuck).succeedsWithin(Duration.ofSeconds(10));
            assertThat(behindStuck).succeedsWithin(Duration.ofSeconds(10));
            CudaResults.check(cuStreamDestroy(stuckStream), "cuStreamDestroy");
            CudaResults.check(cuStreamDestroy(other), "cuStreamDestroy");
        }

        static void closeIsBoundedAndFreesTheEventsOnceTheDeviceIsDone() throws Throwable {
            CudaContext context = Stub.context();
            DeviceCompletions completions = new DeviceCompletions(context);
            CUstream stream = stream();
            Stub.hold();
            CompletableFuture<Void> stuck = completions.record(stream);

            long start = System.nanoTime();
            boolean finished = completions.close(Duration.ofMillis(300));
            long tookMillis = (System.nanoTime() - start) / 1_000_000;

            assertThat(finished).as("the device did not finish").isFalse();
            assertThat(tookMillis).as("bounded").isBetween(250L, 5_000L);
            assertThat(stuck).isNotDone();
            assertThat(Stub.counters().events()).as("kept: the waiter is still in its wait").isEqualTo(1);
            assertThatThrownBy(() -> completions.record(stream)).isInstanceOf(IllegalStateException.class)
                    .hasMessage("this CUDA backend is closed");

            Stub.release();
            assertThat(stuck).as("still reported once the device is done").succeedsWithin(Duration.ofSeconds(10));

            DeviceCompletions idle = new DeviceCompletions(context);
            idle.record(stream).get(10, TimeUnit.SECONDS);
            long before = Stub.counters().events();
            assertThat(idle.close(Duration.ofSeconds(10))).isTrue();
            assertThat(Stub.counters().events()).as("its idle event destroyed").isEqualTo(before - 1);
            assertThat(idle.close(Duration.ZERO)).as("closing twice is harmless").isTrue();
            CudaResults.check(cuStreamDestroy(stream), "cuStreamDestroy");
        }
    }
}
