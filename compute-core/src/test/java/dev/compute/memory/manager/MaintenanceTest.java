package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.ResolvedSettings;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.lifetime.BufferCopies;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.FaultInjectingBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;
import java.util.function.UnaryOperator;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The maintenance thread of a manager's parts: started only where a setting asks for something, trims, compactions
 * (with pooling on) and timeline samples on their schedules, failures logged while the thread goes on, nothing done
 * once the manager is closed, and the thread gone once stopped. Every wait for a scheduled run is bounded.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MaintenanceTest {

    private static final long MiB = 1L << 20;
    private static final String THREAD = "compute-memory-maintenance";

    private final FaultInjectingBackend backend = new FaultInjectingBackend(new SimulatedDiscreteBackend(), 7);
    private final ManagerParts parts = ManagerParts.on(backend).build();
    private final AtomicInteger trims = new AtomicInteger();
    private Maintenance maintenance;

    @AfterEach
    void close() {
        if (maintenance != null) {
            maintenance.stop();
        }
        parts.close();
    }

    private Maintenance start(UnaryOperator<UnifiedMemoryManagerBuilder> schedule, LongSupplier trim) {
        ManagerSettings settings = ResolvedSettings.of(schedule.apply(UnifiedMemoryManager.builder()
                .trimInterval(Duration.ZERO).timelineInterval(Duration.ZERO)), backend);
        maintenance = new Maintenance(settings, parts.gate, parts.chains, parts.compactor, parts.figures, parts.services, trim);
        return maintenance;
    }

    private LongSupplier countedTrim() {
        return () -> {
            trims.incrementAndGet();
            return 0;
        };
    }

    private static Set<Thread> threads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals(THREAD)).collect(Collectors.toSet());
    }

    /** The maintenance threads alive now that were not in {@code before}: another test's may be ending meanwhile. */
    private static Set<Thread> startedSince(Set<Thread> before) {
        Set<Thread> now = threads();
        now.removeAll(before);
        return now;
    }

    /**
     * Whether a maintenance thread is in {@code method} now: once it is not, a run that passed the closed check before
     * the close has finished, however long a slow machine kept it off its cores, and every later one finds it closed.
     */
    private static boolean running(String method) {
        return Thread.getAllStackTraces().entrySet().stream().filter(thread -> thread.getKey().getName().equals(THREAD))
                .flatMap(thread -> Stream.of(thread.getValue()))
                .anyMatch(frame -> frame.getClassName().equals(Maintenance.class.getName()) && frame.getMethodName().equals(method));
    }

    private static void within10s(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - deadline).as(what + " within 10 s").isNegative();
            Thread.sleep(5);
        }
    }

    @Test
    void withNothingScheduledThereIsNoThread() throws Exception {
        Set<Thread> before = threads();

        start(set -> set.compactionInterval(Duration.ZERO).heldMemoryWarning(Duration.ZERO), countedTrim());
        Thread.sleep(200);

        assertThat(startedSince(before)).isEmpty();
        assertThat(trims).hasValue(0);
        assertThat(parts.figures.timeline(MemoryLocation.DEVICE)).isEmpty();
    }

    @Test
    void trimsRunOnTheirScheduleUntilStopped() throws Exception {
        Set<Thread> before = threads();
        start(set -> set.trimInterval(Duration.ofMillis(20)), countedTrim());
        Set<Thread> started = startedSince(before);
        assertThat(started).hasSize(1);

        within10s(() -> trims.get() >= 3, "three scheduled trims");
        maintenance.stop();
        within10s(() -> !started.iterator().next().isAlive(), "the thread ends");
        int stopped = trims.get();
        Thread.sleep(100);

        assertThat(trims).as("no trim after stop").hasValue(stopped);
    }

    @Test
    void aTrimThatFailsIsLoggedAndTheNextOneStillRuns() throws Exception {
        try (LogCapture log = LogCapture.managerLog()) {
            start(set -> set.trimInterval(Duration.ofMillis(20)), () -> {
                if (trims.incrementAndGet() <= 2) {
                    throw new IllegalStateException("the trim failed");
                }
                return 0;
            });

            within10s(() -> trims.get() >= 4, "trims after the failures");

            assertThat(log.atLeast(Level.WARNING)).filteredOn(r -> r.getMessage().equals("scheduled trim failed")).hasSize(2)
                    .allSatisfy(record -> assertThat(record.getThrown()).hasMessage("the trim failed"));
        }
    }

    @Test
    void aTrimThatThrowsAnErrorIsLoggedAndTheNextOneStillRuns() throws Exception {
        // an Error out of a scheduled task cancels it for good, silently: the trims had stopped for the manager's life
        try (LogCapture log = LogCapture.managerLog()) {
            start(set -> set.trimInterval(Duration.ofMillis(20)), () -> {
                if (trims.incrementAndGet() == 1) {
                    throw new OutOfMemoryError("no heap for the trim");
                }
                return 0;
            });

            within10s(() -> trims.get() >= 3, "trims after the error");

            assertThat(log.atLeast(Level.WARNING)).filteredOn(r -> r.getMessage().equals("scheduled trim failed")).hasSize(1);
        }
    }

    @Test
    void compactionsRunOnTheirScheduleAndAFailedOneIsLogged() throws Exception {
        BufferCore first = parts.buffer(MemoryLocation.DEVICE, 4 * MiB);
        BufferCore second = parts.buffer(MemoryLocation.DEVICE, 4 * MiB);
        BufferCopies.write(second, 0, MemorySegment.ofArray(new byte[64]));
        first.close();
        backend.failCopy(1);

        try (LogCapture log = LogCapture.managerLog()) {
            start(set -> set.compactionInterval(Duration.ofMillis(20)), countedTrim());

            within10s(() -> second.ownBlock().offset() == 0, "a scheduled compaction moves the buffer");
            assertThat(log.atLeast(Level.WARNING)).filteredOn(r -> r.getMessage().equals("scheduled compaction failed")).singleElement()
                    .satisfies(record -> assertThat(record.getThrown()).isInstanceOf(FaultInjectingBackend.InjectedFault.class));
        }
        assertThat(trims).as("no trim scheduled").hasValue(0);
    }

    @Test
    void onceTheManagerIsClosedNoCompactionRuns() throws Exception {
        start(set -> set.compactionInterval(Duration.ofMillis(10)), countedTrim());
        within10s(() -> parts.events.compactions.size() >= 2, "scheduled compactions");

        parts.gate.close();
        within10s(() -> !running("scheduledCompaction"), "one that had passed the check finishes");
        int closed = parts.events.compactions.size();
        Thread.sleep(100);

        assertThat(parts.events.compactions).hasSize(closed);
    }

    @Test
    void withoutPoolingNoCompactionIsScheduled() throws Exception {
        try (ManagerParts unpooled = ManagerParts.on(new SimulatedDiscreteBackend()).settings(set -> set.poolingEnabled(false)).build()) {
            ManagerSettings settings = ResolvedSettings.of(UnifiedMemoryManager.builder().poolingEnabled(false).trimInterval(Duration.ZERO)
                    .timelineInterval(Duration.ZERO).heldMemoryWarning(Duration.ZERO).compactionInterval(Duration.ofMillis(10)), backend);
            Set<Thread> before = threads();
            Maintenance none = new Maintenance(settings, unpooled.gate, unpooled.chains, unpooled.compactor, unpooled.figures, unpooled.services, countedTrim());
            try {
                assertThat(startedSince(before)).isEmpty();
            } finally {
                none.stop();
            }
        }
    }

    @Test
    void theTimelineIsSampledAtStartAndThenOnItsScheduleUntilTheManagerCloses() throws Exception {
        start(set -> set.timelineInterval(Duration.ofMillis(20)), countedTrim());
        assertThat(parts.figures.timeline(MemoryLocation.DEVICE)).as("a sample at start").isNotEmpty();

        within10s(() -> parts.figures.timeline(MemoryLocation.HOST).size() >= 3, "samples on schedule");
        parts.gate.close();
        within10s(() -> !running("scheduledSample"), "one that had passed the check finishes");
        int closed = parts.figures.timeline(MemoryLocation.HOST).size();
        maintenance.sampleTimeline();
        Thread.sleep(100);

        assertThat(parts.figures.timeline(MemoryLocation.HOST)).hasSize(closed);
    }
}
