package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ChildJvm;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Level;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 27's promise attacked from outside: views taken where applications take them (the common pool, a parallel
 * stream, a thread that dies, nested and misused scopes, slices, listeners), buffers closed elsewhere meanwhile. The
 * memory goes back within a bound, no figure counts a closed buffer as live, and nothing is left behind.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ViewLifetimeAttacksTest {

    private static final long BYTES = 64 * 1024;
    /** Memory that nothing holds any more is back at once; the bound only allows for a loaded machine. */
    private static final Duration BOUND = Duration.ofSeconds(5);

    private UnifiedMemoryManager manager;

    @BeforeEach
    void openManager() {
        manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).heldMemoryWarning(Duration.ZERO).build();
    }

    @AfterEach
    void closeManager() {
        manager.close();
    }

    @Test
    void viewsTakenInSupplyAsyncOnTheCommonPoolEndAsTheBufferClosesHere() throws Exception {
        List<UnifiedBuffer> buffers = List.of(manager.allocate(BYTES, MemoryLocation.HOST), manager.allocate(BYTES, MemoryLocation.DEVICE));
        List<MemorySegment> views = CompletableFuture.supplyAsync(() -> buffers.stream().map(UnifiedBuffer::readOnlyHostView).toList())
                .get(BOUND.toSeconds(), TimeUnit.SECONDS);

        buffers.forEach(UnifiedBuffer::close);

        assertNothingLiveNorHeld();
        for (MemorySegment view : views) {
            assertThatThrownBy(() -> CompletableFuture.runAsync(() -> view.get(ValueLayout.JAVA_BYTE, 0)).join())
                    .hasCauseInstanceOf(IllegalStateException.class);
        }
    }

    @Test
    void viewsTakenByEveryWorkerOfAParallelStreamEndAsTheBufferClosesHere() {
        List<UnifiedBuffer> buffers = List.of(manager.allocate(BYTES, MemoryLocation.HOST), manager.allocate(BYTES, MemoryLocation.DEVICE));
        for (UnifiedBuffer buffer : buffers) {
            buffer.hostView().fill((byte) 3);
            long sum = IntStream.range(0, 256).parallel()
                    .mapToLong(i -> buffer.readOnlyHostView().get(ValueLayout.JAVA_BYTE, i * (BYTES / 256))).sum();
            assertThat(sum).isEqualTo(3 * 256);
        }

        buffers.forEach(UnifiedBuffer::close);

        assertNothingLiveNorHeld();
    }

    @Test
    void aThreadThatDiesOfAnExceptionWithItsScopeLeftOpenGivesTheMemoryBackWithoutCallingInAgain() throws Exception {
        List<UnifiedBuffer> buffers = List.of(manager.allocate(BYTES, MemoryLocation.HOST), manager.allocate(BYTES, MemoryLocation.DEVICE));
        CountDownLatch viewing = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        AtomicReference<Throwable> died = new AtomicReference<>();
        Thread doomed = Thread.ofPlatform().name("doomed-viewer").uncaughtExceptionHandler((thread, e) -> died.set(e)).start(() -> {
            ViewScope.open(); // never closed: the thread dies first
            buffers.forEach(UnifiedBuffer::readOnlyHostView);
            UnifiedBuffer own = manager.allocate(BYTES, MemoryLocation.HOST);
            own.hostView();
            viewing.countDown();
            awaitQuietly(closed);
            throw new IllegalStateException("the task failed");
        });
        assertThat(viewing.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();
        buffers.forEach(UnifiedBuffer::close);
        assertThat(heldBytes()).as("the open scope's views hold the memory").isPositive();

        closed.countDown();
        doomed.join(BOUND.toMillis());
        assertThat(died.get()).hasMessage("the task failed");

        awaitNothingHeld();
        assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).as("the dead thread's own buffer, never closed").isEqualTo(1);
    }

    @Test
    void nestedScopesEachEndTheirOwnViewsAndTheOuterEndsWhatTheInnerLeftOpen() throws Exception {
        UnifiedBuffer outerOnly = manager.allocate(BYTES, MemoryLocation.HOST);
        UnifiedBuffer both = manager.allocate(BYTES, MemoryLocation.DEVICE);
        UnifiedBuffer innerOnly = manager.allocate(BYTES, MemoryLocation.HOST);
        Worker worker = new Worker("nested-scopes");
        try {
            ViewScope[] scopes = new ViewScope[3];
            MemorySegment[] outerView = new MemorySegment[1];
            worker.run(() -> {
                scopes[0] = ViewScope.open();
                outerView[0] = both.readOnlyHostView();
                outerOnly.readOnlyHostView();
                scopes[1] = ViewScope.open();
                both.readOnlyHostView();
                innerOnly.readOnlyHostView();
                scopes[2] = ViewScope.open(); // the innermost, left open: the inner's close ends it
                innerOnly.readOnlyHostView();
            });
            List.of(outerOnly, both, innerOnly).forEach(UnifiedBuffer::close);
            assertThat(heldBuffers()).isEqualTo(3);

            worker.run(() -> scopes[1].close());
            assertThat(heldBuffers()).as("the outer scope still views two of them").isEqualTo(2);
            worker.run(() -> outerView[0].get(ValueLayout.JAVA_BYTE, 0));

            worker.run(() -> scopes[2].close()); // closed already by the inner's close: nothing more
            worker.run(() -> scopes[0].close());
            assertNothingLiveNorHeld();
            worker.run(() -> assertThatThrownBy(() -> outerView[0].get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class));
        } finally {
            worker.stop();
        }
    }

    /**
     * A view in a scope lasts until the scope ends, whoever closes its buffer meanwhile: the thread's next calls into
     * the manager (an allocation, another buffer's view or close) do not end it under the code still reading it.
     */
    @Test
    void aViewInAnOpenScopeOutlivesItsThreadsLaterCallsAfterItsBufferClosedElsewhere() throws Exception {
        UnifiedBuffer buffer = manager.allocate(BYTES, MemoryLocation.HOST);
        UnifiedBuffer other = manager.allocate(BYTES, MemoryLocation.HOST);
        Worker worker = new Worker("request-thread");
        try {
            ViewScope[] scope = new ViewScope[1];
            MemorySegment[] view = new MemorySegment[1];
            worker.run(() -> {
                scope[0] = ViewScope.open();
                view[0] = buffer.hostView();
                view[0].fill((byte) 6);
            });
            buffer.close();
            worker.run(() -> {
                manager.allocate(BYTES, MemoryLocation.HOST).close();
                other.readOnlyHostView();
                other.close();
                assertThat(view[0].get(ValueLayout.JAVA_BYTE, 5)).as("its scope is still open").isEqualTo((byte) 6);
            });
            assertThat(heldBuffers()).isEqualTo(1);

            worker.run(() -> scope[0].close());
            assertNothingLiveNorHeld();
        } finally {
            worker.stop();
        }
    }

    /**
     * A thousand virtual threads, each in a scope viewing one buffer all share and one of its own, both closed here
     * while the scopes are open: the memory waits for them, counted held, and is back once the last scope ends.
     */
    @Test
    void aThousandScopedVirtualThreadsViewingBuffersClosedElsewhereGiveTheMemoryBackAsTheirScopesEnd() throws Exception {
        int threads = 1000;
        UnifiedBuffer shared = manager.allocate(BYTES, MemoryLocation.DEVICE);
        shared.copyFrom(filled((int) BYTES, (byte) 2));
        UnifiedBuffer[] own = new UnifiedBuffer[threads];
        for (int i = 0; i < threads; i++) {
            own[i] = manager.allocate(4096, MemoryLocation.HOST);
        }
        CountDownLatch viewing = new CountDownLatch(threads);
        CountDownLatch closed = new CountDownLatch(1);
        AtomicInteger wrongBytes = new AtomicInteger();
        List<Thread> viewers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            UnifiedBuffer mine = own[i];
            viewers.add(Thread.ofVirtual().start(() -> {
                try (ViewScope views = ViewScope.open()) {
                    MemorySegment all = shared.readOnlyHostView();
                    mine.hostView().fill((byte) 5);
                    viewing.countDown();
                    awaitQuietly(closed);
                    manager.allocate(512, MemoryLocation.HOST).close(); // a call in: the scope's views last
                    if (all.get(ValueLayout.JAVA_BYTE, BYTES - 1) != 2) {
                        wrongBytes.incrementAndGet();
                    }
                }
            }));
        }
        assertThat(viewing.await(BOUND.toSeconds() * 4, TimeUnit.SECONDS)).isTrue();
        shared.close();
        for (UnifiedBuffer buffer : own) {
            buffer.close();
        }
        assertThat(manager.liveBuffers()).isEmpty();
        assertThat(heldBuffers()).isEqualTo(threads + 1L);

        closed.countDown();
        for (Thread viewer : viewers) {
            viewer.join(BOUND.toMillis());
        }
        assertThat(wrongBytes).hasValue(0);
        assertNothingLiveNorHeld();
    }

    /** A budget closed while another thread's scope views a buffer it allocated and its owner closed: nothing left over. */
    @Test
    void aBudgetClosedWhileAnotherThreadViewsABufferClosedThroughItReportsNothingLeftOver() throws Exception {
        MemoryBudget budget = manager.budget("viewed-tenant", 1L << 20);
        UnifiedBuffer buffer = budget.allocate(BYTES, MemoryLocation.HOST);
        Worker worker = new Worker("tenant-reader");
        try {
            ViewScope[] scope = new ViewScope[1];
            worker.run(() -> {
                scope[0] = ViewScope.open();
                buffer.readOnlyHostView();
            });
            buffer.close();

            assertThat(budget.closeAndReport()).as("the buffer was closed by its owner").isEmpty();
            worker.run(() -> scope[0].close());
            assertNothingLiveNorHeld();
        } finally {
            worker.stop();
        }
    }

    /** A mapped file closed while another thread's scope views it: no longer listed as open, though it stays mapped. */
    @Test
    void aMappedFileClosedWhileAnotherThreadViewsItIsNoLongerListedLive(@TempDir Path directory) throws Exception {
        Path file = Files.write(directory.resolve("mapped.bin"), filled((int) BYTES, (byte) 8));
        UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
        Worker worker = new Worker("file-reader");
        try {
            ViewScope[] scope = new ViewScope[1];
            worker.run(() -> {
                scope[0] = ViewScope.open();
                mapped.readOnlyHostView();
            });
            assertThat(manager.liveBuffers()).singleElement().satisfies(live -> assertThat(live.mappedFile()).isEqualTo(file));

            mapped.close();

            assertThat(manager.liveBuffers()).as("closed, though a view keeps it mapped").isEmpty();
            assertThat(manager.mappedFileStatistics().openMappings()).as("still mapped for the view").isEqualTo(1);
            worker.run(() -> scope[0].close());
            assertThat(manager.mappedFileStatistics().openMappings()).isZero();
            assertThat(manager.liveBuffers()).isEmpty();

            UnifiedBuffer worked = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
            CompletableFuture<Void> deviceWork = new CompletableFuture<>();
            try (BufferAccess access = worked.deviceAccess(AccessMode.READ)) {
                access.inFlightUntil(deviceWork);
            }
            worked.close();
            assertThat(manager.liveBuffers()).as("closed, though device work on it keeps it mapped").isEmpty();
            assertThat(manager.mappedFileStatistics().openMappings()).isEqualTo(1);
            deviceWork.complete(null);
            assertThat(manager.mappedFileStatistics().openMappings()).isZero();
        } finally {
            worker.stop();
        }
    }

    @Test
    void aScopeClosedOnAnotherThreadIsRefusedNamingItsOwnerAndStillEndsItsViewsOnItsOwn() throws Exception {
        UnifiedBuffer buffer = manager.allocate(BYTES, MemoryLocation.HOST);
        Worker worker = new Worker("scope-owner");
        try {
            ViewScope[] scope = new ViewScope[1];
            MemorySegment[] view = new MemorySegment[1];
            worker.run(() -> {
                scope[0] = ViewScope.open();
                view[0] = buffer.hostView();
            });
            assertThatThrownBy(() -> scope[0].close()).isInstanceOf(WrongThreadException.class).hasMessageContaining("'scope-owner'");
            buffer.close();
            worker.run(() -> view[0].set(ValueLayout.JAVA_BYTE, 0, (byte) 1)); // the refused close ended nothing
            assertThat(heldBuffers()).isEqualTo(1);

            worker.run(() -> scope[0].close());
            assertNothingLiveNorHeld();
        } finally {
            worker.stop();
        }
    }

    @Test
    void aSliceOfAClosedSliceIsRefusedAndViewsTakenOfItBeforeEndWithTheBuffer() {
        UnifiedBuffer buffer = manager.allocate(DataType.INT32, 1024, MemoryLocation.DEVICE);
        UnifiedBuffer parent = buffer.slice(256, 512);
        UnifiedBuffer child = parent.slice(128, 128);
        MemorySegment before = child.hostView();
        before.set(ValueLayout.JAVA_INT, 0, 42);

        parent.close();

        assertThatThrownBy(child::readOnlyHostView).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("the slice it was cut from was closed");
        assertThat(before.get(ValueLayout.JAVA_INT, 0)).as("a view taken before lasts as the buffer's").isEqualTo(42);
        int[] read = new int[1];
        buffer.copyTo(384 * 4L, read, 0, 1);
        assertThat(read[0]).isEqualTo(42);

        buffer.close();
        assertNothingLiveNorHeld();
        assertThatThrownBy(() -> before.get(ValueLayout.JAVA_INT, 0)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aViewTakenInsideAListenerAndAnOutOfMemoryHandlerEndsAndGivesTheMemoryBack() throws Exception {
        AtomicReference<UnifiedBuffer> viewed = new AtomicReference<>();
        List<Throwable> failures = new ArrayList<>();
        AtomicInteger handled = new AtomicInteger();
        try (UnifiedMemoryManager small = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxPoolSize(32L << 20).heldMemoryWarning(Duration.ZERO)
                .eventListener(new MemoryEventListener() {
                    @Override
                    public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                        viewIn(viewed.get(), failures);
                    }
                })
                .outOfMemoryHandler((location, bytes, attempt, failure) -> {
                    handled.incrementAndGet();
                    viewIn(viewed.get(), failures);
                    return false;
                }).build()) {
            UnifiedBuffer first = small.allocate(BYTES, MemoryLocation.HOST);
            viewed.set(first);
            UnifiedBuffer device = small.allocate(BYTES, MemoryLocation.DEVICE); // a backend call: the listener views
            UnifiedBuffer most = small.allocate(20L << 20, MemoryLocation.HOST);
            assertThatThrownBy(() -> small.allocate(20L << 20, MemoryLocation.HOST)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(handled).hasPositiveValue();
            assertThat(failures).isEmpty();
            most.close();

            first.close();
            device.close();
            for (MemoryLocation location : small.locations()) {
                MemoryStatistics figures = small.statistics(location);
                assertThat(figures.liveBuffers()).as("%s", location).isZero();
                assertThat(figures.heldBytes()).as("%s: the listener's views ended with the buffer's close here", location).isZero();
            }
        }
    }

    private static void viewIn(UnifiedBuffer buffer, List<Throwable> failures) {
        if (buffer == null) {
            return;
        }
        try (ViewScope views = ViewScope.open()) {
            buffer.readOnlyHostView().get(ValueLayout.JAVA_BYTE, 0);
        } catch (Throwable e) {
            failures.add(e);
        }
    }

    @Test
    void aManagerClosedWhileAnotherThreadsScopeViewsItsBuffersReturnsWithinItsTimeoutNamingThatThreadAndTheScopesLaterEndIsQuiet()
            throws Exception {
        UnifiedMemoryManager closing = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .closeTimeout(Duration.ofMillis(500)).build();
        Worker worker = new Worker("still-viewing");
        try (LogCapture log = LogCapture.managerLog()) {
            UnifiedBuffer host = closing.allocate(BYTES, MemoryLocation.HOST);
            UnifiedBuffer device = closing.allocate(BYTES, MemoryLocation.DEVICE);
            ViewScope[] scope = new ViewScope[1];
            MemorySegment[] views = new MemorySegment[2];
            worker.run(() -> {
                scope[0] = ViewScope.open();
                views[0] = host.hostView();
                views[1] = device.hostView();
                views[0].fill((byte) 7);
            });

            long start = System.nanoTime();
            closing.close();
            assertThat(Duration.ofNanos(System.nanoTime() - start)).as("bounded by the close timeout").isLessThan(BOUND);
            assertThat(String.join("\n", log.messages(Level.WARNING))).contains("still-viewing");

            worker.run(() -> assertThat(views[0].get(ValueLayout.JAVA_BYTE, 1)).as("kept, not freed").isEqualTo((byte) 7));
            worker.run(() -> assertThatCode(() -> scope[0].close()).doesNotThrowAnyException());
            worker.run(() -> assertThatThrownBy(() -> views[0].get(ValueLayout.JAVA_BYTE, 1)).isInstanceOf(IllegalStateException.class));
            assertThat(log.messages(Level.WARNING)).as("the scope's end after the close").hasSize(1);
        } finally {
            worker.stop();
            closing.close();
        }
    }

    @Test
    void compactionLeavesABufferAnIdleThreadViewsWhereItIsAndMovesItOnceTheViewEnds() throws Exception {
        try (UnifiedMemoryManager compacting = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .heldMemoryWarning(Duration.ZERO).build()) {
            Worker worker = new Worker("idle-viewer");
            try {
                UnifiedBuffer gap = compacting.allocate(BYTES, MemoryLocation.HOST);
                UnifiedBuffer viewed = compacting.allocate(BYTES, MemoryLocation.HOST);
                viewed.copyFrom(filled((int) BYTES, (byte) 9));
                ViewScope[] scope = new ViewScope[1];
                MemorySegment[] view = new MemorySegment[1];
                worker.run(() -> {
                    scope[0] = ViewScope.open();
                    view[0] = viewed.readOnlyHostView();
                });
                gap.close();

                compacting.compact(MemoryLocation.HOST);
                worker.run(() -> {
                    for (long i = 0; i < BYTES; i += 4096) {
                        assertThat(view[0].get(ValueLayout.JAVA_BYTE, i)).as("at %d", i).isEqualTo((byte) 9);
                    }
                });
                viewed.copyFrom(filled((int) BYTES, (byte) 4));
                worker.run(() -> assertThat(view[0].get(ValueLayout.JAVA_BYTE, 100)).as("the view reaches the buffer's own bytes").isEqualTo((byte) 4));

                worker.run(() -> scope[0].close());
                compacting.compact(MemoryLocation.HOST);
                byte[] read = new byte[(int) BYTES];
                viewed.copyTo(read);
                assertThat(read).isEqualTo(filled((int) BYTES, (byte) 4));
                viewed.close();
                assertThat(compacting.statistics(MemoryLocation.HOST).heldBytes()).isZero();
            } finally {
                worker.stop();
            }
        }
    }

    @Test
    void aWarningNamesTheThreadHoldingTheViewsOnceAndSaysItsScopeIsOpen() throws Exception {
        try (UnifiedMemoryManager quick = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .heldMemoryWarning(Duration.ofMillis(50)).build();
             LogCapture log = LogCapture.managerLog()) {
            Worker holder = new Worker("the-holder");
            Worker bystander = new Worker("a-bystander");
            try {
                List<UnifiedBuffer> buffers = new ArrayList<>();
                for (int i = 0; i < 20; i++) {
                    buffers.add(quick.allocate(BYTES, MemoryLocation.HOST));
                }
                ViewScope[] scope = new ViewScope[1];
                holder.run(() -> {
                    scope[0] = ViewScope.open();
                    buffers.forEach(UnifiedBuffer::readOnlyHostView);
                });
                bystander.run(() -> {
                    try (ViewScope views = ViewScope.open()) {
                        buffers.forEach(UnifiedBuffer::readOnlyHostView);
                    }
                });
                buffers.forEach(UnifiedBuffer::close);

                long deadline = System.nanoTime() + BOUND.toNanos();
                while (log.messages(Level.WARNING).isEmpty() && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                Thread.sleep(500); // checks after the first warning, each of which would warn again were it not once
                assertThat(log.messages(Level.WARNING)).singleElement().asString().contains("'the-holder'").doesNotContain("a-bystander")
                        .contains("20 closed buffers").contains("A view scope still open");
                holder.run(() -> scope[0].close());
                assertThat(quick.statistics(MemoryLocation.HOST).heldBytes()).isZero();
            } finally {
                holder.stop();
                bystander.stop();
            }
        }
    }

    /**
     * Views taken as their buffers close on another thread, in scopes and outside, of buffers whose memory the pool
     * lends again at once: in a JVM of its own, which must not crash; every byte a view reads is its own buffer's (or
     * zero), and once the readers are done nothing is live or held.
     */
    @Test
    void viewsTakenAsTheirBuffersCloseReadOnlyTheirOwnBytesAndNothingCrashes() throws Exception {
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(90), CloseRacingViews.class);

        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("foreign bytes 0").contains("live 0 held 0");
    }

    /** The child: readers view buffers this thread closes under them, each filled with its own byte. */
    public static final class CloseRacingViews {

        public static void main(String[] args) throws Exception {
            try (UnifiedMemoryManager racing = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                    .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
                AtomicLong foreign = new AtomicLong();
                for (int round = 0; round < 400; round++) {
                    MemoryLocation location = round % 2 == 0 ? MemoryLocation.HOST : MemoryLocation.DEVICE;
                    byte own = (byte) (round % 120 + 1);
                    UnifiedBuffer buffer = racing.allocate(BYTES, location);
                    buffer.copyFrom(filled((int) BYTES, own));
                    CountDownLatch started = new CountDownLatch(2);
                    List<Thread> readers = new ArrayList<>();
                    for (boolean scoped : new boolean[] {true, false}) {
                        readers.add(Thread.ofPlatform().start(() -> {
                            started.countDown();
                            for (int i = 0; i < 50; i++) {
                                try (ViewScope views = scoped ? ViewScope.open() : null) {
                                    MemorySegment view = buffer.readOnlyHostView();
                                    for (long at = 0; at < BYTES; at += 512) {
                                        byte read = view.get(ValueLayout.JAVA_BYTE, at);
                                        if (read != own && read != 0) {
                                            foreign.incrementAndGet();
                                        }
                                    }
                                } catch (IllegalStateException closed) {
                                    Thread.interrupted(); // JDK-8306324: a read stopped by a shared arena's close may leave it set
                                }
                            }
                        }));
                    }
                    started.await();
                    buffer.close();
                    UnifiedBuffer next = racing.allocate(BYTES, location); // lent the memory again, if it is back
                    next.copyFrom(filled((int) BYTES, (byte) -1));
                    for (Thread reader : readers) {
                        reader.join();
                    }
                    next.close();
                }
                long deadline = System.nanoTime() + BOUND.toNanos();
                long live;
                long held;
                do {
                    Thread.sleep(10);
                    live = racing.locations().stream().mapToLong(at -> racing.statistics(at).liveBuffers()).sum();
                    held = racing.locations().stream().mapToLong(at -> racing.statistics(at).heldBytes()).sum();
                } while ((live > 0 || held > 0) && System.nanoTime() < deadline);
                System.out.println("foreign bytes " + foreign.get());
                System.out.println("live " + live + " held " + held);
            }
        }
    }

    private static byte[] filled(int length, byte value) {
        byte[] bytes = new byte[length];
        Arrays.fill(bytes, value);
        return bytes;
    }

    private void assertNothingLiveNorHeld() {
        assertThat(manager.liveBuffers()).isEmpty();
        for (MemoryLocation location : manager.locations()) {
            MemoryStatistics figures = manager.statistics(location);
            assertThat(figures.liveBuffers()).as("%s: live", location).isZero();
            assertThat(figures.allocatedBytes()).as("%s: allocated", location).isZero();
            assertThat(figures.heldBuffers()).as("%s: held", location).isZero();
            assertThat(figures.heldBytes()).as("%s: held bytes", location).isZero();
        }
    }

    private void awaitNothingHeld() throws InterruptedException {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (heldBytes() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(heldBytes()).as("held past %s", BOUND).isZero();
    }

    private long heldBytes() {
        return manager.locations().stream().mapToLong(location -> manager.statistics(location).heldBytes()).sum();
    }

    private long heldBuffers() {
        return manager.locations().stream().mapToLong(location -> manager.statistics(location).heldBuffers()).sum();
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** A platform thread of its own that runs steps given it one at a time and idles between them. */
    private static final class Worker {
        private final BlockingQueue<Runnable> work = new LinkedBlockingQueue<>();
        private final Thread thread;

        Worker(String name) {
            thread = Thread.ofPlatform().daemon().name(name).start(() -> {
                try {
                    while (true) {
                        work.take().run();
                    }
                } catch (InterruptedException stopped) {
                    // the test is over
                }
            });
        }

        void run(Runnable step) throws Exception {
            CompletableFuture<Void> done = new CompletableFuture<>();
            work.add(() -> {
                try {
                    step.run();
                    done.complete(null);
                } catch (Throwable e) {
                    done.completeExceptionally(e);
                }
            });
            done.get(BOUND.toSeconds(), TimeUnit.SECONDS);
        }

        void stop() throws InterruptedException {
            thread.interrupt();
            thread.join(BOUND.toMillis());
        }
    }
}
