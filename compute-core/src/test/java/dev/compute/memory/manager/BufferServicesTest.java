package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.ViewScope;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.BufferHost.Transfer;
import dev.compute.memory.lifetime.BufferViews;
import dev.compute.memory.lifetime.Holds;
import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ControlledBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What a manager's buffers get of it: its gate as their door, its backend and chains, its figures for what they copy,
 * a bounded wait for the device, host mirrors from the mirror location (a compaction they set off moves nothing), and
 * block returns.
 */
class BufferServicesTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final ControlledBackend backend = new ControlledBackend(new SimulatedDiscreteBackend());
    private final ManagerParts parts = ManagerParts.on(backend)
            .settings(set -> set.maxPinnedSize(8 * MiB).deviceWaitTimeout(Duration.ofSeconds(7)).closeTimeout(Duration.ofMillis(300)))
            .build();
    private final BufferServices services = parts.services;

    @AfterEach
    void close() {
        parts.close();
    }

    @Test
    void theGateIsTheBuffersDoorAndTheEndOfAnAccessPassesItEvenOnceClosed() {
        BufferCore buffer = parts.buffer(DEVICE, 4096);

        int call = services.enter(buffer);
        assertThat(parts.gate.awaitCalls(System.nanoTime())).as("counted in").isFalse();
        services.exit(call);
        assertThat(parts.gate.awaitCalls(System.nanoTime())).isTrue();
        assertThat(services.isClosed()).isFalse();

        parts.gate.close();

        assertThat(services.isClosed()).isTrue();
        assertThatThrownBy(() -> services.enter(buffer)).isInstanceOf(IllegalStateException.class).hasMessageEndingWith(
                "because its UnifiedMemoryManager was closed");
        int end = services.enterToEnd();
        assertThat(parts.gate.awaitCalls(System.nanoTime())).isFalse();
        services.exit(end);
        assertThat(parts.gate.awaitCalls(System.nanoTime())).isTrue();
    }

    @Test
    void itLendsTheManagersBackendScopesAndSettings() {
        assertThat(services.backend()).isSameAs(backend);
        assertThat(services.scopes()).isSameAs(parts.gate.scopes());
        assertThat(services.deviceWaitTimeout()).isEqualTo(Duration.ofSeconds(7));
        assertThat(services.hostAccessible(MemoryLocation.HOST)).isTrue();
        assertThat(services.hostAccessible(DEVICE)).isFalse();
    }

    @Test
    void eachTransferIsCountedInItsOwnFigureAtItsLocation() {
        services.count(Transfer.HOST_TO_DEVICE, DEVICE, 1);
        services.count(Transfer.DEVICE_TO_HOST, DEVICE, 20);
        services.count(Transfer.DEVICE_TO_DEVICE, DEVICE, 300);
        services.count(Transfer.DEVICE_TO_HOST, MemoryLocation.UNIFIED, 4000);

        MemoryStatistics device = parts.figures.statistics(DEVICE);
        assertThat(device.bytesHostToDevice()).isEqualTo(1);
        assertThat(device.bytesDeviceToHost()).isEqualTo(20);
        assertThat(device.bytesDeviceToDevice()).isEqualTo(300);
        assertThat(parts.figures.statistics(MemoryLocation.UNIFIED).bytesDeviceToHost()).isEqualTo(4000);
    }

    @Test
    void aWaitForTheDeviceIsBoundedByTheCloseTimeoutAndSaysWhenTheDeviceWasStillBusy() {
        try (LogCapture log = LogCapture.managerLog()) {
            services.awaitDeviceIdle();
            assertThat(log.atLeast(Level.WARNING)).isEmpty();

            backend.idle(false);
            services.awaitDeviceIdle();

            assertThat(backend.awaitIdleCalls()).isEqualTo(2);
            assertThat(log.messages(Level.WARNING)).containsExactly("device work was still running after 300 ms while a device access"
                    + " that could not record its work ended");
        }
    }

    /**
     * The wait stands between work a device access could not record and the reuse of its memory: an interrupted thread
     * still waits, within the bound, and gets its interrupt back. Before, it gave up at once, warned that the device was
     * still busy after the whole bound, and the memory could go back under the work.
     */
    @Test
    void aWaitForTheDeviceOnAnInterruptedThreadStillWaitsWithinTheBound() throws Exception {
        CompletableFuture<Void> work = new CompletableFuture<>();
        backend.idleOnceDone(work);
        ScheduledExecutorService device = Executors.newSingleThreadScheduledExecutor();
        try (LogCapture log = LogCapture.managerLog()) {
            device.schedule(() -> work.complete(null), 100, TimeUnit.MILLISECONDS);
            Thread.currentThread().interrupt();
            try {
                services.awaitDeviceIdle();
                assertThat(Thread.currentThread().isInterrupted()).as("the interrupt is put back").isTrue();
            } finally {
                Thread.interrupted();
            }
            assertThat(work).as("waited for").isDone();
            assertThat(log.atLeast(Level.WARNING)).isEmpty();
        } finally {
            device.shutdownNow();
        }
    }

    @Test
    void aMirrorComesFromThePinnedPoolWhereThereIsOne() {
        Block mirror = services.allocateMirror(4096);

        assertThat(mirror.segment().location()).isEqualTo(MemoryLocation.PINNED);
        assertThat(parts.figures.statistics(MemoryLocation.PINNED).allocatedBytes()).isEqualTo(4096);
        assertThat(parts.figures.statistics(MemoryLocation.PINNED).liveBuffers()).as("a mirror is no buffer").isZero();
        assertThat(parts.gate.awaitCalls(System.nanoTime())).as("counted out").isTrue();

        try (ManagerParts noPinning = ManagerParts.on(new SimulatedDiscreteBackend()).settings(set -> set.pinningEnabled(false)).build()) {
            assertThat(noPinning.services.allocateMirror(4096).segment().location()).isEqualTo(MemoryLocation.HOST);
        }
    }

    @Test
    void aMirrorThatFindsNoMemoryIsToldAndTheCompactionItSetsOffMovesNothing() {
        parts.block(MemoryLocation.PINNED, 6 * MiB);

        assertThatThrownBy(() -> services.allocateMirror(4 * MiB)).isInstanceOf(DeviceOutOfMemoryException.class);

        assertThat(parts.events.failures).containsExactly(new ManagerParts.Events.Failure(MemoryLocation.PINNED, 4 * MiB, OutOfMemoryReason.POOL_LIMIT));
        assertThat(parts.events.compactions).as("no compaction while a mirror is allocated").isEmpty();
        assertThat(parts.gate.awaitCalls(System.nanoTime())).isTrue();
    }

    @Test
    void noMirrorOnceTheManagerIsClosed() {
        parts.gate.close();

        assertThatThrownBy(() -> services.allocateMirror(4096)).isInstanceOf(IllegalStateException.class)
                .hasMessage("this UnifiedMemoryManager is closed");
        assertThat(parts.gate.awaitCalls(System.nanoTime())).as("counted out after the failure").isTrue();
    }

    @Test
    void aClosedBuffersBlocksGoBackThroughTheBlockReturns() {
        Block block = parts.block(DEVICE, 4096);
        Block mirror = services.allocateMirror(4096);

        services.release(DEVICE, block, mirror, CompletableFuture.completedFuture(null), "its budget's count");

        assertThat(parts.figures.statistics(DEVICE).liveBuffers()).isZero();
        assertThat(parts.figures.statistics(MemoryLocation.PINNED).allocatedBytes()).isZero();
        assertThat(parts.budgetReleases).containsExactly("its budget's count");
    }

    /**
     * A thread that viewed many buffers outside any view scope and went idle holds them all once others close them:
     * one warning says so, naming the thread, rather than one per buffer.
     */
    @Test
    void buffersHeldByOneIdleThreadAreWarnedOfInOneLine() throws Exception {
        BufferCore[] buffers = new BufferCore[500];
        CountDownLatch viewed = new CountDownLatch(1);
        CountDownLatch idle = new CountDownLatch(1);
        Thread.ofPlatform().name("idle-viewer").start(() -> {
            for (int i = 0; i < buffers.length; i++) {
                buffers[i] = parts.buffer(MemoryLocation.HOST, 256);
                BufferViews.view(buffers[i], AccessMode.READ); // confined to this thread, which allocated it
            }
            viewed.countDown();
            awaitQuietly(idle); // idle, its views open, never calling in
        });
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(viewed.await(30, TimeUnit.SECONDS)).isTrue();
            for (BufferCore buffer : buffers) {
                buffer.close();
            }
            MemoryStatistics held = parts.figures.statistics(MemoryLocation.HOST);
            assertThat(held.heldBuffers()).isEqualTo(500);

            services.warnAboutHeld(Duration.ZERO);
            services.warnAboutHeld(Duration.ZERO);

            assertThat(log.messages(Level.WARNING)).singleElement().asString().startsWith("500 closed buffers (UnifiedBuffer[HOST, 256 bytes, INT8, closed] among them) have waited at least ")
                    .contains("held by 'idle-viewer'").contains(held.heldBytes() + " bytes go back to the pool only then");
        } finally {
            idle.countDown();
        }
    }

    /**
     * A service whose virtual threads each allocate and view a buffer outside any scope, the buffers closed elsewhere:
     * each was held by a thread of its own, so each check warned once per buffer (10,000 WARNING lines, 8.8 MB of log
     * at once from a test of 10,000 threads). A check now says at most ten lines, the rest together in the last,
     * naming some of their threads and how many more.
     */
    @Test
    void buffersHeldByManyIdleThreadsAreWarnedOfInAFewLines() throws Exception {
        int threads = 200;
        BufferCore[] buffers = new BufferCore[threads];
        CountDownLatch viewed = new CountDownLatch(threads);
        CountDownLatch idle = new CountDownLatch(1);
        for (int i = 0; i < threads; i++) {
            int index = i;
            Thread.ofVirtual().name("viewer-" + i).start(() -> {
                buffers[index] = parts.buffer(MemoryLocation.HOST, 256);
                BufferViews.view(buffers[index], AccessMode.READ); // confined to this thread, which allocated it
                viewed.countDown();
                awaitQuietly(idle); // idle, its view open, never calling in
            });
        }
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(viewed.await(30, TimeUnit.SECONDS)).isTrue();
            for (BufferCore buffer : buffers) {
                buffer.close();
            }
            services.warnAboutHeld(Duration.ZERO);
            services.warnAboutHeld(Duration.ZERO);

            List<String> warnings = log.messages(Level.WARNING);
            assertThat(warnings).as("each buffer told of once, in ten lines").hasSize(10);
            assertThat(warnings.subList(0, 9)).allSatisfy(line -> assertThat(line).startsWith("a closed UnifiedBuffer[HOST, 256 bytes"));
            assertThat(warnings.getLast()).startsWith("191 more closed buffers (").contains("held by 191 threads ('viewer-")
                    .contains(" bytes go back to the pool only then");
        } finally {
            idle.countDown();
        }
    }

    /**
     * One buffer viewed by thousands of threads, each in a scope still open (requests parked on something slow), closed
     * elsewhere (a model swapped): its warning named every thread, in one line. It names five, and how many more.
     */
    @Test
    void aBufferHeldByManyThreadsNamesFiveOfThemAndHowManyMore() throws Exception {
        BufferCore buffer = parts.buffer(MemoryLocation.HOST, 4096);
        int threads = 200;
        CountDownLatch viewed = new CountDownLatch(threads);
        CountDownLatch idle = new CountDownLatch(1);
        for (int i = 0; i < threads; i++) {
            Thread.ofVirtual().name("request-" + i).start(() -> {
                try (ViewScope scope = ViewScope.open()) {
                    BufferViews.view(buffer, AccessMode.READ);
                    viewed.countDown();
                    awaitQuietly(idle);
                }
            });
        }
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(viewed.await(30, TimeUnit.SECONDS)).isTrue();
            buffer.close();

            services.warnAboutHeld(Duration.ZERO);

            assertThat(log.messages(Level.WARNING)).singleElement().asString()
                    .containsPattern("for views or accesses held by 200 threads \\(('request-\\d+', ){4}'request-\\d+' and 195 more\\) to end");
        } finally {
            idle.countDown();
        }
    }

    /**
     * A virtual thread has no name unless given one: the warning of the memory its views hold names it by its id
     * (as a thread dump does), not as '' that says nothing.
     */
    @Test
    void anUnnamedVirtualThreadHoldingMemoryIsNamedByItsId() throws Exception {
        BufferCore[] buffer = new BufferCore[1];
        CountDownLatch viewed = new CountDownLatch(1);
        CountDownLatch idle = new CountDownLatch(1);
        Thread viewer = Thread.ofVirtual().start(() -> {
            buffer[0] = parts.buffer(MemoryLocation.HOST, 256);
            BufferViews.view(buffer[0], AccessMode.READ); // confined to this thread, which allocated it
            viewed.countDown();
            awaitQuietly(idle);
        });
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(viewed.await(30, TimeUnit.SECONDS)).isTrue();
            buffer[0].close();

            services.warnAboutHeld(Duration.ZERO);

            assertThat(log.messages(Level.WARNING)).singleElement().asString()
                    .contains("held by 'virtual thread #" + viewer.threadId() + "'");
        } finally {
            idle.countDown();
        }
    }

    /**
     * A closed buffer whose memory only a copy or op under way holds (a copy from it that takes long): the warning says
     * so. It said "held by  to end", naming no one, and advised view scopes, which change nothing there.
     */
    @Test
    void memoryACopyOrOpUnderWayHoldsIsWarnedOfAsSuch() {
        BufferCore buffer = parts.buffer(DEVICE, 4096);
        Holds.deviceRegion(buffer, AccessMode.READ); // an op under way on it, as a kernel's launch or a copy holds it
        try (LogCapture log = LogCapture.managerLog()) {
            buffer.close();
            assertThat(parts.figures.statistics(DEVICE).heldBuffers()).isOne();

            services.warnAboutHeld(Duration.ZERO);

            assertThat(log.messages(Level.WARNING)).singleElement().asString()
                    .contains(" ms for a copy or op under way on it to return; its 4096 bytes go back to the pool only then.")
                    .doesNotContain("held by").doesNotContain("view scope");
        } finally {
            Holds.release(buffer, null, CompletableFuture.completedFuture(null));
        }
        assertThat(parts.figures.statistics(DEVICE).heldBuffers()).isZero();
    }

    /**
     * As below, for many buffers: a batch job's thread viewed its 200 buffers, closed elsewhere while one kernel still
     * read them all. The warning told of them in one line, but as the kernel finished, the check that gave their pages
     * back wrote a line for each buffer. It writes one.
     */
    @Test
    void pagesOfManyBuffersGivenBackAtALaterCheckAreToldOfInOneLine() throws Exception {
        BufferCore[] buffers = new BufferCore[200];
        CountDownLatch viewed = new CountDownLatch(1);
        CountDownLatch idle = new CountDownLatch(1);
        Thread.ofPlatform().name("idle-viewer").start(() -> {
            for (int i = 0; i < buffers.length; i++) {
                buffers[i] = parts.buffer(MemoryLocation.HOST, 64 * 1024);
                BufferViews.view(buffers[i], AccessMode.WRITE).fill((byte) 1); // confined to this thread, which allocated it
            }
            viewed.countDown();
            awaitQuietly(idle);
        });
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(viewed.await(30, TimeUnit.SECONDS)).isTrue();
            CompletableFuture<Void> kernel = new CompletableFuture<>();
            for (BufferCore buffer : buffers) {
                Holds.deviceRegion(buffer, AccessMode.READ);
                Holds.release(buffer, null, kernel); // queued, still running
                buffer.close();
            }
            services.warnAboutHeld(Duration.ZERO);
            assertThat(log.messages(Level.WARNING)).singleElement().asString().startsWith("200 closed buffers").doesNotContain("operating system");

            kernel.complete(null);
            services.warnAboutHeld(Duration.ZERO);

            assertThat(log.messages(Level.INFO)).filteredOn(line -> line.contains("operating system")).singleElement().asString()
                    .startsWith("the pages of 200 closed buffers (UnifiedBuffer[HOST, 65536 bytes");
        } finally {
            idle.countDown();
        }
    }

    /**
     * Device work still running on a closed buffer's memory (a kernel reading it for a live buffer's result) keeps its
     * pages, though only an idle thread's view holds the buffer: they go back at the first check after it has finished.
     */
    @Test
    void pagesUnderDeviceWorkStayUntilItHasFinished() throws Exception {
        BufferCore[] buffer = new BufferCore[1];
        MemorySegment[] view = new MemorySegment[1];
        CountDownLatch viewed = new CountDownLatch(1);
        CountDownLatch idle = new CountDownLatch(1);
        Thread.ofPlatform().name("idle-viewer").start(() -> {
            buffer[0] = parts.buffer(MemoryLocation.HOST, 64 * 1024);
            view[0] = BufferViews.view(buffer[0], AccessMode.WRITE); // confined to this thread, which allocated it
            view[0].fill((byte) 1);
            viewed.countDown();
            awaitQuietly(idle);
        });
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(viewed.await(30, TimeUnit.SECONDS)).isTrue();
            CompletableFuture<Void> kernel = new CompletableFuture<>();
            Holds.deviceRegion(buffer[0], AccessMode.READ);
            Holds.release(buffer[0], null, kernel); // queued, still running
            buffer[0].close();

            services.warnAboutHeld(Duration.ZERO);
            assertThat(log.messages(Level.WARNING)).singleElement().asString().contains("held by 'idle-viewer'").doesNotContain("operating system");

            kernel.complete(null);
            services.warnAboutHeld(Duration.ZERO);
            assertThat(log.messages(Level.INFO)).anySatisfy(line -> assertThat(line).contains("went back to the operating system"));
        } finally {
            idle.countDown();
        }
    }

    /**
     * A backend whose discardPages throws keeps the pages, never the warning: the held memory is still told of (the
     * exception ended the check before its warning, at every check), and the refusal once, not at every check.
     */
    @Test
    void aBackendRefusingToDiscardPagesKeepsThemButNotTheWarning() throws Exception {
        BufferCore[] buffer = new BufferCore[1];
        CountDownLatch viewed = new CountDownLatch(1);
        CountDownLatch idle = new CountDownLatch(1);
        Thread.ofPlatform().name("idle-viewer").start(() -> {
            buffer[0] = parts.buffer(MemoryLocation.HOST, 64 * 1024);
            BufferViews.view(buffer[0], AccessMode.WRITE).fill((byte) 1); // confined to this thread, which allocated it
            viewed.countDown();
            awaitQuietly(idle);
        });
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(viewed.await(30, TimeUnit.SECONDS)).isTrue();
            backend.failDiscarding(new IllegalStateException("madvise refused"));
            buffer[0].close();

            services.warnAboutHeld(Duration.ZERO);
            services.warnAboutHeld(Duration.ZERO);

            assertThat(log.messages(Level.WARNING)).filteredOn(line -> line.contains("held by 'idle-viewer'")).singleElement()
                    .asString().doesNotContain("went back to the operating system");
            assertThat(log.messages(Level.WARNING)).filteredOn(line -> line.contains("madvise refused")).hasSize(1);
        } finally {
            idle.countDown();
        }
    }

    /**
     * Pages a backend cannot give back (here: a buffer smaller than a page) are asked for once, not at every check: a
     * buffer held for good would otherwise cost its gate and monitor at each one.
     */
    @Test
    void pagesThatCannotGoBackAreAskedForOnce() throws Exception {
        BufferCore[] buffer = new BufferCore[1];
        CountDownLatch viewed = new CountDownLatch(1);
        CountDownLatch idle = new CountDownLatch(1);
        Thread.ofPlatform().name("idle-viewer").start(() -> {
            buffer[0] = parts.buffer(MemoryLocation.HOST, 100);
            BufferViews.view(buffer[0], AccessMode.WRITE).fill((byte) 1);
            viewed.countDown();
            awaitQuietly(idle);
        });
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(viewed.await(30, TimeUnit.SECONDS)).isTrue();
            buffer[0].close();

            for (int check = 0; check < 5; check++) {
                services.warnAboutHeld(Duration.ZERO);
            }

            assertThat(backend.discardCalls()).isEqualTo(1);
            assertThat(log.messages(Level.WARNING)).filteredOn(line -> line.contains("held by 'idle-viewer'")).singleElement()
                    .asString().doesNotContain("went back to the operating system");
        } finally {
            idle.countDown();
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
