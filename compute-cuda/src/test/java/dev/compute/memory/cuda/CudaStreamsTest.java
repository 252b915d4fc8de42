package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.cuda.FakeDriverScenarios.Stub;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import jcuda.driver.CUstream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The streams the backend's threads work on: one per thread index, made on first use with the context current;
 * ordering after work on the same stream or another; records, launches and waits only while open, and nothing
 * recorded once the close has begun; a bounded wait for every stream; every stream destroyed at the end. Runs on the
 * stand-in driver in a JVM of its own ({@link FakeDriverScenarios}), whose events wait until the test releases them.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CudaStreamsTest {

    @Test
    void eachThreadIndexHasAStreamMadeOnFirstUse() throws Exception {
        FakeDriverScenarios.run(CudaStreamsTest.class, "eachThreadIndexHasAStreamMadeOnFirstUse");
    }

    @Test
    void workIsOrderedAndRecordedOnlyWhileOpen() throws Exception {
        FakeDriverScenarios.run(CudaStreamsTest.class, "workIsOrderedAndRecordedOnlyWhileOpen");
    }

    @Test
    void awaitIdleWaitsForEveryStreamWithinItsBound() throws Exception {
        FakeDriverScenarios.run(CudaStreamsTest.class, "awaitIdleWaitsForEveryStreamWithinItsBound");
    }

    // ---- in the scenario's JVM, on the fake driver -----------------------------------------------------------------------

    public static void main(String[] args) {
        FakeDriverScenarios.exitWith(() -> {
            switch (args[0]) {
                case "eachThreadIndexHasAStreamMadeOnFirstUse" -> Scenarios.eachThreadIndexHasAStreamMadeOnFirstUse();
                case "workIsOrderedAndRecordedOnlyWhileOpen" -> Scenarios.workIsOrderedAndRecordedOnlyWhileOpen();
                case "awaitIdleWaitsForEveryStreamWithinItsBound" -> Scenarios.awaitIdleWaitsForEveryStreamWithinItsBound();
                default -> throw new IllegalArgumentException("no scenario " + args[0]);
            }
        });
    }

    /** What the tests run in their own JVMs, on the fake driver. */
    static final class Scenarios {
        private Scenarios() {}

        /** The value {@code work} gives on a new platform thread whose stream index is (or is not) {@code index}. */
        private static <T> T onThread(CudaStreams streams, int index, boolean sameIndex, Supplier<T> work) throws InterruptedException {
            for (int tries = 0; tries < 100; tries++) {
                AtomicReference<T> result = new AtomicReference<>();
                AtomicReference<Throwable> failure = new AtomicReference<>();
                Thread thread = Thread.ofPlatform().unstarted(() -> {
                    try {
                        result.set(work.get());
                    } catch (Throwable t) {
                        failure.set(t);
                    }
                });
                if ((streams.index(thread) == index) == sameIndex) {
                    thread.start();
                    thread.join();
                    if (failure.get() != null) {
                        throw new AssertionError("the thread failed", failure.get());
                    }
                    return result.get();
                }
            }
            throw new AssertionError("no thread id landed where wanted");
        }

        private static void closeAndCheck(CudaContext context, DeviceCompletions completions, CudaStreams streams) throws Throwable {
            assertThat(completions.close(Duration.ofSeconds(10))).isTrue();
            streams.destroy();
            FakeDriverScenarios.Counters after = Stub.counters();
            assertThat(after.streams()).as("every stream destroyed").isZero();
            assertThat(after.callsWithoutContext()).as("calls made without the context current").isZero();
            assertThat(after.rejected()).as("calls the fake rejected").isZero();
            context.close();
        }

        static void eachThreadIndexHasAStreamMadeOnFirstUse() throws Throwable {
            CudaContext context = Stub.context();
            DeviceCompletions completions = new DeviceCompletions(context);
            CudaStreams streams = new CudaStreams(context, completions, 2);
            assertThat(Stub.counters().streams()).as("none before first use").isZero();

            int mine = streams.index(Thread.currentThread());
            assertThat(mine).isEqualTo((int) Math.floorMod(Thread.currentThread().threadId(), 2L));
            CUstream stream = streams.enter();
            assertThat(streams.enter()).isSameAs(stream);
            assertThat(Stub.counters().streams()).isEqualTo(1);

            // threads with no context current yet: enter makes it current before it makes their stream
            assertThat(onThread(streams, mine, true, streams::enter)).as("a thread of the same index").isSameAs(stream);
            CUstream other = onThread(streams, mine, false, streams::enter);
            assertThat(other).isNotNull().isNotSameAs(stream);
            assertThat(onThread(streams, mine, false, streams::enter)).isSameAs(other);
            assertThat(Stub.counters().streams()).isEqualTo(2);

            closeAndCheck(context, completions, streams);
        }

        static void workIsOrderedAndRecordedOnlyWhileOpen() throws Throwable {
            CudaContext context = Stub.context();
            DeviceCompletions completions = new DeviceCompletions(context);
            CudaStreams streams = new CudaStreams(context, completions, 2);
            CUstream mine = streams.enter();
            int index = streams.index(Thread.currentThread());
            CUstream other = onThread(streams, index, false, streams::enter);

            assertThat(streams.orderAfter(CompletableFuture.completedFuture(null))).isTrue();
            assertThat(streams.orderAfter(new CompletableFuture<>())).as("a future of no stream: waited for on the host").isFalse();

            Stub.hold();
            CompletableFuture<Void> onMine = streams.recordWhileOpen(mine);
            CompletableFuture<Void> onOther = streams.recordWhileOpen(other);
            CompletableFuture<Void> later = streams.recordWhileOpen(mine);
            assertThat(onMine).isNotDone();
            assertThat(streams.orderAfter(onMine)).as("work of this thread's stream").isTrue();
            assertThat(streams.orderAfter(onOther)).as("a device-side wait on the other stream's event").isTrue();
            assertThat(streams.orderStreamWhileOpen(mine, other)).isTrue();
            assertThat(CudaStreams.supersedes(later, onMine)).isTrue();
            assertThat(CudaStreams.supersedes(later, onOther)).isFalse();
            assertThat(CudaStreams.supersedes(new CompletableFuture<>(), onMine)).as("a future this backend did not make").isFalse();
            AtomicReference<CUstream> launchedOn = new AtomicReference<>();
            CompletableFuture<Void> launched = streams.launch(null, launchedOn::set);
            assertThat(launchedOn.get()).as("a launch with no buffer goes on the calling thread's stream").isSameAs(mine);
            streams.launch(other, launchedOn::set);
            assertThat(launchedOn.get()).as("else on its accesses' stream").isSameAs(other);
            assertThat(streams.whileOpen(() -> "ran")).isEqualTo("ran");
            Stub.release();
            CompletableFuture.allOf(onMine, onOther, later, launched).get(10, TimeUnit.SECONDS);

            assertThat(streams.beginClose()).isTrue();
            assertThat(streams.beginClose()).as("the close begins once").isFalse();
            assertThat(streams.recordWhileOpen(mine)).as("nothing is recorded once closing").isNull();
            assertThat(streams.orderStreamWhileOpen(mine, other)).isFalse();
            assertThatThrownBy(() -> streams.whileOpen(() -> "ran")).isInstanceOf(IllegalStateException.class)
                    .hasMessage("this CUDA backend (device 0) is closed");
            assertThatThrownBy(() -> streams.launch(null, stream -> { })).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> streams.awaitIdle(Duration.ofSeconds(1))).isInstanceOf(IllegalStateException.class);
            assertThat(streams.enter()).as("open until the close has waited for the work").isSameAs(mine);

            streams.markClosed();
            assertThatThrownBy(streams::requireOpen).isInstanceOf(IllegalStateException.class)
                    .hasMessage("this CUDA backend (device 0) is closed");
            assertThatThrownBy(streams::enter).isInstanceOf(IllegalStateException.class);
            closeAndCheck(context, completions, streams);
        }

        static void awaitIdleWaitsForEveryStreamWithinItsBound() throws Throwable {
            CudaContext context = Stub.context();
            DeviceCompletions completions = new DeviceCompletions(context);
            CudaStreams streams = new CudaStreams(context, completions, 2);
            long recorded = Stub.counters().eventsRecorded();
            assertThat(streams.awaitIdle(Duration.ZERO)).as("no stream made yet: nothing to wait for").isTrue();
            assertThat(Stub.counters().eventsRecorded()).isEqualTo(recorded);

            streams.enter();
            onThread(streams, streams.index(Thread.currentThread()), false, streams::enter);
            Stub.hold();
            long start = System.nanoTime();
            assertThat(streams.awaitIdle(Duration.ofMillis(300))).as("the device does not finish").isFalse();
            assertThat((System.nanoTime() - start) / 1_000_000).as("bounded").isBetween(250L, 5_000L);
            assertThat(Stub.counters().eventsRecorded() - recorded).as("an event on each stream").isEqualTo(2);

            Thread.currentThread().interrupt();
            assertThat(streams.awaitIdle(Duration.ofSeconds(10))).as("an interrupted wait").isFalse();
            assertThat(Thread.interrupted()).as("the interrupt is kept").isTrue();

            Stub.release();
            assertThat(streams.awaitIdle(Duration.ofSeconds(Long.MAX_VALUE))).as("a bound beyond a long's nanoseconds").isTrue();
            closeAndCheck(context, completions, streams);
        }
    }
}
