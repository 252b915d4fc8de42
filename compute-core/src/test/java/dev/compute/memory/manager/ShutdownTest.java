package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.AccessMode;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.ViewScope;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.BufferViews;
import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ControlledBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Level;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A manager's close, through its parts: the waiting requests fail, calls under way, open views and device work are
 * waited for within the close timeout, and only then is memory freed (the buffers left open reported) and the backend
 * closed; what is still held at the timeout is kept and said, and the backend closed all the same. A second close
 * returns once the first is done, ending the views handed to it meanwhile.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShutdownTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final ControlledBackend backend = new ControlledBackend(device);
    private final ManagerParts parts = ManagerParts.on(backend).settings(set -> set.maxPoolSize(64 * MiB).closeTimeout(Duration.ofMillis(300)))
            .build();
    private final LogCapture log = LogCapture.managerLog();
    private final CountDownLatch letGo = new CountDownLatch(1);

    @TempDir
    Path dir;

    @AfterEach
    void end() {
        letGo.countDown();
        log.close();
        parts.close();
    }

    /** The close's warning, if it wrote one. */
    private String warning() {
        return log.messages(Level.WARNING).stream().filter(m -> m.startsWith("UnifiedMemoryManager 'default' closed")).findFirst().orElse("");
    }

    /** Starts a thread that does {@code first}, then holds on until the test ends. */
    private Thread holding(String name, Runnable first) throws InterruptedException {
        CountDownLatch done = new CountDownLatch(1);
        // in a view scope: a view it takes is its own (confined), which only it can end, as a request's is
        Thread thread = Thread.ofPlatform().name(name).start(() -> {
            try (ViewScope scope = ViewScope.open()) {
                first.run();
                done.countDown();
                letGo.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertThat(done.await(10, TimeUnit.SECONDS)).isTrue();
        return thread;
    }

    @Test
    void anIdleManagerFailsTheWaitersFreesEverythingAndClosesTheBackend() throws Exception {
        parts.block(DEVICE, 4 * MiB); // left open
        Block full = parts.block(DEVICE, 40 * MiB);
        CompletableFuture<Block> waiting = parts.waiters.request(DataType.INT8, DEVICE, 32 * MiB, 64 * MiB, Duration.ofSeconds(30));
        Path file = Files.write(dir.resolve("vocab.bin"), new byte[4096]);
        parts.mappedFiles.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null);
        assertThat(waiting).isNotDone();

        parts.shutdown.close();

        assertThat(parts.gate.isClosed()).isTrue();
        assertThat(waiting).isCompletedExceptionally();
        assertThat(device.liveAllocations()).as("the pools are freed").isZero();
        assertThat(parts.mappedFiles.statistics().openMappings()).isZero();
        assertThat(parts.budgetsClosed).containsExactly(true);
        assertThat(backend.closes()).isEqualTo(1);
        assertThat(parts.figures.statistics(DEVICE).liveBuffers()).as("counted as freed with everything").isZero();
        assertThat(warning()).startsWith("UnifiedMemoryManager 'default' closed with 3 buffer(s) still open; their memory is freed now")
                .contains("\n  DEVICE, " + 4 * MiB + " bytes").contains("\n  DEVICE, " + 40 * MiB + " bytes")
                .contains("\n  HOST, 4096 bytes, mapped from " + file);
        assertThat(full).isNotNull();
    }

    @Test
    void aCallStillUnderWayAtTheTimeoutKeepsTheMemoryAndTheBackendIsClosedAllTheSame() throws Exception {
        parts.block(DEVICE, 4 * MiB);
        holding("caller", () -> parts.gate.enter());

        long start = System.nanoTime();
        parts.shutdown.close();
        long tookMillis = (System.nanoTime() - start) / 1_000_000;

        // the call is waited for until the last quarter of the close timeout, which the device's idle check keeps
        assertThat(tookMillis).as("bounded by the close timeout").isBetween(220L, 10_000L);
        assertThat(parts.budgetsClosed).containsExactly(false);
        assertThat(device.liveAllocations()).as("kept, not freed under the call").isPositive();
        assertThat(backend.closes()).isEqualTo(1);
        assertThat(warning()).isEqualTo("UnifiedMemoryManager 'default' closed, but within its close timeout (300 ms) calls were still under way, so its pools keep their"
                + " memory (reserved " + 20 * MiB + " bytes) and 0 mapped file(s) stay mapped, rather than be freed under their users; it goes"
                + " back to the system with the process. Raise compute.memory.close-timeout, or end views and accesses before closing.");
    }

    @Test
    void aViewAnotherThreadHoldsPastTheTimeoutKeepsTheMemoryAndItsThreadIsNamed() throws Exception {
        BufferCore buffer = parts.buffer(MemoryLocation.HOST, 4096);
        AtomicReference<MemorySegment> view = new AtomicReference<>();
        holding("viewer", () -> view.set(BufferViews.view(buffer, AccessMode.READ)));

        parts.shutdown.close();

        assertThat(parts.budgetsClosed).containsExactly(false);
        assertThat(warning()).contains("views or accesses were still open (held by viewer), ").doesNotContain("calls were still under way");
        assertThat(device.liveAllocations()).isPositive();
    }

    /**
     * The backend's close, on an idle device, waits for what may still run there (an application's action on a device
     * future) what is left of the close timeout: it was given none and waited its own bound (10 s on OpenCL and CUDA),
     * whatever the close timeout.
     */
    @Test
    void onAnIdleDeviceTheBackendsCloseIsGivenWhatIsLeftOfTheCloseTimeout() {
        ControlledBackend idle = new ControlledBackend(new SimulatedDiscreteBackend());
        try (ManagerParts patient = ManagerParts.on(idle).settings(set -> set.closeTimeout(Duration.ofSeconds(60))).build()) {
            patient.block(DEVICE, 4096);

            patient.shutdown.close();

            assertThat(patient.budgetsClosed).containsExactly(true);
            assertThat(idle.closeBounds()).singleElement().satisfies(bound -> assertThat(bound)
                    .as("what the close timeout of 60 s left").isGreaterThan(Duration.ofSeconds(30)).isLessThanOrEqualTo(Duration.ofSeconds(60)));
        }
    }

    /**
     * A close timeout a view spent leaves the backend's close on an idle device its floor, not the few milliseconds left:
     * an action on a device future that is just ending must not cost the backend's context and queues.
     */
    @Test
    void aCloseTimeoutAViewSpentStillLeavesTheBackendsCloseItsFloor() throws Exception {
        BufferCore buffer = parts.buffer(MemoryLocation.HOST, 4096);
        holding("viewer", () -> BufferViews.view(buffer, AccessMode.READ));

        parts.shutdown.close();

        assertThat(warning()).contains("views or accesses were still open").doesNotContain("device work was still running");
        assertThat(backend.closeBounds()).containsExactly(Shutdown.BACKEND_CLOSE_FLOOR);
    }

    /**
     * Thousands of virtual threads each holding a view in a scope of its own (requests parked on something slow) as the
     * manager closes: the warning named every one of them, in one line (10,000 names of unnamed virtual threads are over
     * 200 KB). It names ten now, and how many more.
     */
    @Test
    void viewsManyThreadsHoldPastTheTimeoutNameTenOfThemAndHowManyMore() throws Exception {
        BufferCore buffer = parts.buffer(MemoryLocation.HOST, 4096);
        int threads = 200;
        CountDownLatch viewing = new CountDownLatch(threads);
        for (int i = 0; i < threads; i++) {
            Thread.ofVirtual().name("request-" + i).start(() -> {
                try (ViewScope scope = ViewScope.open()) {
                    BufferViews.view(buffer, AccessMode.READ);
                    viewing.countDown();
                    letGo.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }
        assertThat(viewing.await(10, TimeUnit.SECONDS)).isTrue();

        parts.shutdown.close();

        assertThat(warning()).containsPattern("views or accesses were still open \\(held by 200 threads \\((request-\\d+, ){9}request-\\d+ and 190 more\\)\\), ");
        assertThat(device.liveAllocations()).isPositive();
    }

    @Test
    void deviceWorkStillRunningKeepsTheMemory() {
        parts.returns.release(DEVICE, parts.block(DEVICE, 4096), null, new CompletableFuture<>(), null);

        parts.shutdown.close();

        assertThat(parts.budgetsClosed).containsExactly(false);
        assertThat(warning()).contains("device work was still running, ").doesNotContain("views or accesses");
        assertThat(device.liveAllocations()).isPositive();
    }

    @Test
    void aDeviceThatDoesNotGoIdleKeepsTheMemoryToo() {
        backend.idle(false);

        parts.shutdown.close();

        assertThat(backend.awaitIdleCalls()).isEqualTo(1);
        assertThat(parts.budgetsClosed).containsExactly(false);
        assertThat(warning()).contains("device work was still running, ");
        assertThat(backend.closeBounds()).as("the backend waits no more for work the close timeout did not see end").containsExactly(Duration.ZERO);
    }

    @Test
    void aSecondCloseReturnsOnceTheFirstIsDoneEndingTheViewsHandedToItMeanwhile() throws Exception {
        try (ManagerParts patient = ManagerParts.on(new SimulatedDiscreteBackend()).settings(set -> set.closeTimeout(Duration.ofSeconds(20)))
                .build()) {
            BufferCore buffer = patient.buffer(MemoryLocation.HOST, 4096);
            CountDownLatch viewTaken = new CountDownLatch(1);
            AtomicReference<Object> secondSaw = new AtomicReference<>();
            Thread second = Thread.ofPlatform().name("second-closer").start(() -> {
                MemorySegment view = BufferViews.view(buffer, AccessMode.READ);
                viewTaken.countDown();
                while (!patient.gate.isClosed()) {
                    Thread.onSpinWait();
                }
                patient.shutdown.close(); // the first close waits for this thread's view, which is handed to it
                try {
                    view.get(ValueLayout.JAVA_BYTE, 0);
                    secondSaw.set("the view still works");
                } catch (IllegalStateException ended) {
                    secondSaw.set(!patient.budgetsClosed.isEmpty());
                }
            });
            assertThat(viewTaken.await(10, TimeUnit.SECONDS)).isTrue();

            patient.shutdown.close();
            second.join(10_000);

            assertThat(patient.budgetsClosed).as("the view ended in time: the memory went back").containsExactly(true);
            assertThat(secondSaw.get()).as("the second close returned once the first was done, its view ended").isEqualTo(true);
        }
    }

    @Test
    void aBackendThatFailsToCloseIsLoggedAndTheCloseStillEnds() throws ExecutionException, InterruptedException, java.util.concurrent.TimeoutException {
        backend.failClosing(new IllegalStateException("the driver failed"));

        parts.shutdown.close();

        assertThat(log.atLeast(Level.SEVERE)).singleElement().satisfies(record -> {
            assertThat(record.getMessage()).isEqualTo("closing the compute backend failed");
            assertThat(record.getThrown()).hasMessage("the driver failed");
        });
        CompletableFuture.runAsync(parts.shutdown::close).get(10, TimeUnit.SECONDS); // a second close is not left waiting
        assertThat(backend.closes()).isEqualTo(1);
    }

    /**
     * A backend whose wait for the device throws (CUDA's did on a lost context): the close logs it and still stops the
     * manager's maintenance thread and closes the budgets, keeping the memory. The maintenance thread went on running
     * for the process's life, and the budgets were never closed.
     */
    @Test
    void aBackendWhoseIdleWaitThrowsStillHasTheMaintenanceStoppedAndTheBudgetsClosed() throws InterruptedException {
        Set<Thread> before = maintenanceThreads();
        ControlledBackend failing = new ControlledBackend(new SimulatedDiscreteBackend());
        try (ManagerParts failed = ManagerParts.on(failing).settings(set -> set.trimInterval(Duration.ofMinutes(1))).build()) {
            Set<Thread> started = maintenanceThreads();
            started.removeAll(before);
            assertThat(started).as("the manager's maintenance thread").hasSize(1);
            failing.failAwaitingIdle(new IllegalStateException("thrown by the test on purpose"));

            failed.shutdown.close();

            assertThat(log.atLeast(Level.SEVERE)).singleElement().satisfies(record -> assertThat(record.getThrown()).hasMessage("thrown by the test on purpose"));
            assertThat(failed.budgetsClosed).as("the budgets closed, keeping their memory").containsExactly(false);
            started.iterator().next().join(10_000);
            assertThat(started).as("the maintenance thread 10 s after the close").noneMatch(Thread::isAlive);
        }
    }

    private static Set<Thread> maintenanceThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("compute-memory-maintenance"))
                .collect(Collectors.toSet());
    }
}
