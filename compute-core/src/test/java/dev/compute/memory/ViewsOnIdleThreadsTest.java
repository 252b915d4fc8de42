package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 27's promise on the threads applications have: views taken in a {@link ViewScope} on a platform thread, a pool's
 * thread, a scheduled task, {@code ForkJoinPool.commonPool()} or a virtual thread, of a buffer that thread allocated and
 * of one allocated elsewhere, both closed on another thread while the scope is open; the scope ends and its thread idles
 * for good. Within a bound nothing is held, and while the memory waits no figure counts a closed buffer as live.
 */
class ViewsOnIdleThreadsTest {

    private static final long BYTES = 64 * 1024;
    /** Where the scope has ended, the memory is back at once; the bound only allows for a loaded machine. */
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
    void aPlatformThreadThatNeverCallsInAgain() throws Exception {
        CountDownLatch forever = new CountDownLatch(1);
        try {
            closedWhileViewed(work -> {
                Thread idle = Thread.ofPlatform().daemon().name("idle-platform").unstarted(() -> {
                    try (ViewScope views = ViewScope.open()) {
                        work.run();
                    }
                    awaitQuietly(forever); // idle, never calling the manager again
                });
                idle.start();
            });
        } finally {
            forever.countDown();
        }
    }

    @Test
    void aTaskOfAFixedPool() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(1);
        try {
            closedWhileViewed(work -> pool.submit(ViewScope.wrap(work)));
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aScheduledTask() throws Exception {
        ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();
        try {
            closedWhileViewed(work -> scheduler.schedule(ViewScope.wrap(work), 10, TimeUnit.MILLISECONDS));
        } finally {
            scheduler.shutdownNow();
        }
    }

    @Test
    void aTaskOfTheCommonPool() throws Exception {
        closedWhileViewed(work -> ForkJoinPool.commonPool().submit(ViewScope.wrap(work)));
    }

    @Test
    void aVirtualThreadThatParksForGood() throws Exception {
        CountDownLatch forever = new CountDownLatch(1);
        try {
            closedWhileViewed(work -> Thread.ofVirtual().start(() -> {
                try (ViewScope views = ViewScope.open()) {
                    work.run();
                }
                awaitQuietly(forever);
            }));
        } finally {
            forever.countDown();
        }
    }

    /** A virtual thread that viewed its own buffer outside any scope and ended: the sweeper drops its view. */
    @Test
    void aVirtualThreadThatEndsOutsideAnyScope() throws Exception {
        closedWhileViewed(work -> Thread.ofVirtual().start(work));
    }

    /**
     * The case that waits, at the scale of a service on virtual threads: 2,000 of them each allocate a buffer, view it
     * outside any scope and park; the buffers are closed here while the pool lends new ones of the same size and this
     * thread fills them. No figure counts a closed buffer live, each counts held; every view still reads its own
     * buffer's bytes, never a new one's; and the memory is back once the threads call in again (half of them) or end.
     */
    @Test
    void thousandsOfParkedVirtualThreadsViewingTheirOwnBuffersHoldOnlyTheirOwnMemory() throws Exception {
        int threads = 2000;
        UnifiedBuffer[] buffers = new UnifiedBuffer[threads];
        CountDownLatch viewing = new CountDownLatch(threads);
        CountDownLatch wake = new CountDownLatch(1);
        List<Thread> viewers = new ArrayList<>();
        List<String> wrong = new CopyOnWriteArrayList<>();
        for (int i = 0; i < threads; i++) {
            int index = i;
            viewers.add(Thread.ofVirtual().start(() -> {
                buffers[index] = manager.allocate(DataType.INT32, 256, index % 2 == 0 ? MemoryLocation.HOST : MemoryLocation.DEVICE);
                MemorySegment view = buffers[index].hostView();
                view.fill((byte) 0);
                view.setAtIndex(ValueLayout.JAVA_INT, 0, index);
                viewing.countDown();
                awaitQuietly(wake);
                if (view.getAtIndex(ValueLayout.JAVA_INT, 0) != index) {
                    wrong.add(index + " read " + view.getAtIndex(ValueLayout.JAVA_INT, 0));
                }
                if (index % 2 == 0) {
                    manager.allocate(4, MemoryLocation.HOST).close(); // calls in again: its views of closed buffers end
                }
            }));
        }
        assertThat(viewing.await(BOUND.toSeconds() * 6, TimeUnit.SECONDS)).isTrue();
        for (UnifiedBuffer buffer : buffers) {
            buffer.close();
        }
        List<UnifiedBuffer> lentAgain = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            UnifiedBuffer next = manager.allocate(DataType.INT32, 256, i % 2 == 0 ? MemoryLocation.HOST : MemoryLocation.DEVICE);
            next.copyFrom(filled(next.byteSize(), (byte) 0x7F));
            lentAgain.add(next);
        }
        for (MemoryLocation location : manager.locations()) {
            MemoryStatistics figures = manager.statistics(location);
            assertThat(figures.liveBuffers()).as("%s: live, the new buffers only", location)
                    .isEqualTo(location == MemoryLocation.HOST || location == MemoryLocation.DEVICE ? threads / 2 : 0);
        }
        assertThat(manager.locations().stream().mapToLong(location -> manager.statistics(location).heldBuffers()).sum())
                .as("each closed buffer held by its parked thread's view").isEqualTo(threads);

        wake.countDown();
        for (Thread viewer : viewers) {
            assertThat(viewer.join(BOUND)).isTrue();
        }
        assertThat(wrong).as("views that read another buffer's bytes").isEmpty();
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (heldBytes() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(heldBytes()).as("held once the threads called in again or ended").isZero();
        lentAgain.forEach(UnifiedBuffer::close);
    }

    /**
     * The one case the README says waits: a view the allocating thread took outside any scope, of a buffer closed
     * elsewhere. With the default settings the memory is held (not live); past {@code held-memory-warning} a warning
     * names the thread and the memory's pages go back to the operating system (the view reads zeros there, its
     * neighbours' bytes stay); a figure read on that thread gives nothing back, and its next use of the manager's memory
     * gives the pool the range.
     */
    @Test
    void aViewTheAllocatingThreadTookOutsideAnyScopeGivesItsPagesBackPastTheBoundAndTheRangeAtItsNextUse() throws Exception {
        try (UnifiedMemoryManager defaults = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).build();
             LogCapture log = LogCapture.managerLog()) {
            BlockingQueue<Runnable> work = new LinkedBlockingQueue<>();
            UnifiedBuffer[] buffers = new UnifiedBuffer[3];
            MemorySegment[] view = new MemorySegment[1];
            Thread owner = worker("unscoped-owner", work);
            try {
                onThe(owner, work, () -> {
                    for (int i = 0; i < 3; i++) { // the viewed buffer between two neighbours of its segment
                        buffers[i] = defaults.allocate(i == 1 ? BYTES : 1000, MemoryLocation.HOST);
                        buffers[i].copyFrom(filled(buffers[i].byteSize(), (byte) 5));
                    }
                    view[0] = buffers[1].hostView();
                    view[0].fill((byte) 1);
                });
                buffers[1].close();
                MemoryStatistics held = defaults.statistics(MemoryLocation.HOST);
                assertThat(held.liveBuffers()).isEqualTo(2);
                assertThat(held.heldBytes()).isEqualTo(BYTES);

                long deadline = System.nanoTime() + BOUND.toNanos();
                while (log.messages(Level.WARNING).isEmpty() && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                assertThat(log.messages(Level.WARNING)).singleElement().asString().contains("held by 'unscoped-owner'")
                        .contains(BYTES + " bytes go back to the pool only then").contains("went back to the operating system now");
                onThe(owner, work, () -> {
                    assertThat(view[0].get(ValueLayout.JAVA_BYTE, BYTES / 2)).as("the page went back: zeros").isZero();
                    for (long i = 0; i < BYTES; i++) {
                        assertThat(view[0].get(ValueLayout.JAVA_BYTE, i)).as("its own bytes or zeros, at %d", i).isIn((byte) 0, (byte) 1);
                    }
                });
                for (int i : new int[] {0, 2}) {
                    assertThat(bytesOf(buffers[i])).as("a neighbour's bytes").isEqualTo(filled(buffers[i].byteSize(), (byte) 5));
                }

                onThe(owner, work, () -> defaults.statistics(MemoryLocation.HOST));
                assertThat(defaults.statistics(MemoryLocation.HOST).heldBytes()).as("a figure read is no use of memory").isEqualTo(BYTES);
                onThe(owner, work, () -> defaults.allocate(BYTES, MemoryLocation.HOST).close());
                assertThat(defaults.statistics(MemoryLocation.HOST).heldBytes()).as("given back by the thread's next allocation").isZero();
                buffers[0].close();
                buffers[2].close();
            } finally {
                owner.interrupt();
                owner.join(10_000);
            }
        }
    }

    /**
     * Held past the bound by an idle thread's view and another thread's access: the access reaches the memory (a copy
     * may be reading it), so its pages stay; once the access ends and only the view is left, they go back at the next check.
     */
    @Test
    void thePagesGoBackOnceTheAccessBesideAnIdleViewEnds() throws Exception {
        try (UnifiedMemoryManager quick = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .heldMemoryWarning(Duration.ofMillis(50)).build();
             LogCapture log = LogCapture.managerLog()) {
            BlockingQueue<Runnable> viewerWork = new LinkedBlockingQueue<>();
            BlockingQueue<Runnable> accessorWork = new LinkedBlockingQueue<>();
            Thread viewer = worker("idle-viewer", viewerWork);
            Thread accessor = worker("accessor", accessorWork);
            UnifiedBuffer[] viewed = new UnifiedBuffer[1];
            MemorySegment[] view = new MemorySegment[1];
            BufferAccess[] access = new BufferAccess[1];
            try {
                onThe(viewer, viewerWork, () -> {
                    viewed[0] = quick.allocate(BYTES, MemoryLocation.HOST);
                    view[0] = viewed[0].hostView();
                    view[0].fill((byte) 1);
                });
                onThe(accessor, accessorWork, () -> access[0] = viewed[0].hostAccess(AccessMode.READ));
                viewed[0].close();
                long deadline = System.nanoTime() + BOUND.toNanos();
                while (log.messages(Level.WARNING).isEmpty() && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                assertThat(log.messages(Level.WARNING)).singleElement().asString().doesNotContain("operating system");
                onThe(accessor, accessorWork, () -> assertThat(access[0].segment().get(ValueLayout.JAVA_BYTE, BYTES / 2))
                        .as("the access reads its bytes").isEqualTo((byte) 1));

                onThe(accessor, accessorWork, () -> access[0].close());
                deadline = System.nanoTime() + BOUND.toNanos();
                while (log.messages(Level.INFO).stream().noneMatch(line -> line.contains("operating system")) && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                assertThat(log.messages(Level.INFO)).anySatisfy(line -> assertThat(line).contains("went back to the operating system"));
                onThe(viewer, viewerWork, () -> assertThat(view[0].get(ValueLayout.JAVA_BYTE, BYTES / 2)).isZero());
                onThe(viewer, viewerWork, () -> quick.allocate(16, MemoryLocation.HOST).close());
                assertThat(quick.statistics(MemoryLocation.HOST).heldBytes()).isZero();
            } finally {
                for (Thread thread : List.of(viewer, accessor)) {
                    thread.interrupt();
                    thread.join(10_000);
                }
            }
        }
    }

    /** A daemon thread that runs what {@code work} gives it, for {@link #onThe}, until interrupted or idle for 30 s. */
    private static Thread worker(String name, BlockingQueue<Runnable> work) {
        return Thread.ofPlatform().daemon().name(name).start(() -> {
            try {
                for (Runnable next; (next = work.poll(30, TimeUnit.SECONDS)) != null; ) {
                    next.run();
                }
            } catch (InterruptedException e) {
                // the test is over
            }
        });
    }

    /**
     * A view scope ends with its request or task, a bound of its own: a view in one still open past
     * {@code held-memory-warning} keeps reading the closed buffer's own bytes (a long request may still be using them),
     * and the memory goes back as the scope ends.
     */
    @Test
    void aViewInAScopeStillOpenPastTheBoundKeepsItsBytes() throws Exception {
        try (UnifiedMemoryManager quick = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .heldMemoryWarning(Duration.ofMillis(50)).build();
             LogCapture log = LogCapture.managerLog()) {
            BlockingQueue<Runnable> work = new LinkedBlockingQueue<>();
            UnifiedBuffer[] viewed = new UnifiedBuffer[1];
            MemorySegment[] view = new MemorySegment[1];
            ViewScope[] scope = new ViewScope[1];
            Thread owner = worker("scoped-owner", work);
            try {
                onThe(owner, work, () -> {
                    scope[0] = ViewScope.open();
                    viewed[0] = quick.allocate(BYTES, MemoryLocation.HOST);
                    view[0] = viewed[0].hostView();
                    view[0].fill((byte) 1);
                });
                viewed[0].close();
                long deadline = System.nanoTime() + BOUND.toNanos();
                while (log.messages(Level.WARNING).isEmpty() && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                assertThat(log.messages(Level.WARNING)).singleElement().asString().contains("held by 'scoped-owner'")
                        .contains("A view scope still open holds views of it: close each scope where it was opened")
                        .doesNotContain("operating system").doesNotContain("Take views inside a view scope");
                onThe(owner, work, () -> {
                    for (long i = 0; i < BYTES; i++) {
                        assertThat(view[0].get(ValueLayout.JAVA_BYTE, i)).as("its own bytes, at %d", i).isEqualTo((byte) 1);
                    }
                    scope[0].close();
                });
                assertThat(quick.statistics(MemoryLocation.HOST).heldBytes()).as("back as the scope ended").isZero();
            } finally {
                owner.interrupt();
                owner.join(10_000);
            }
        }
    }

    /**
     * A host view of a device buffer reaches its host mirror, never its device memory: closed elsewhere while only such a
     * view holds it (the allocating thread's, outside any scope, on a thread that idles), the device memory goes back at
     * the close, for the pool to lend again, and only the mirror waits for the view, which keeps reading the buffer's
     * own bytes. The device memory, the scarce one, waited for the idle thread with the mirror.
     */
    @Test
    void aDeviceBuffersMemoryGoesBackAtTheCloseWhileOnlyAViewOfItsHostMirrorWaits() throws Exception {
        BlockingQueue<Runnable> work = new LinkedBlockingQueue<>();
        UnifiedBuffer[] viewed = new UnifiedBuffer[1];
        MemorySegment[] view = new MemorySegment[1];
        Thread owner = worker("unscoped-device-viewer", work);
        try {
            MemoryBudget tenant = manager.budget("tenant", 4 * BYTES);
            onThe(owner, work, () -> {
                viewed[0] = tenant.allocate(BYTES, MemoryLocation.DEVICE);
                view[0] = viewed[0].hostView();
                view[0].fill((byte) 7);
            });
            viewed[0].close();

            MemoryStatistics device = manager.statistics(MemoryLocation.DEVICE);
            assertThat(device.liveBuffers()).isZero();
            assertThat(device.heldBytes()).as("the device memory waits for no host view").isZero();
            assertThat(device.allocatedBytes()).isZero();
            assertThat(tenant.statistics().allocatedBytes()).as("back in the budget too").isZero();
            assertThat(heldBytes()).as("the mirror waits for the view").isPositive();
            try (UnifiedBuffer next = manager.allocate(BYTES, MemoryLocation.DEVICE)) {
                assertThat(manager.statistics(MemoryLocation.DEVICE).poolHits()).as("lent again from the pool").isOne();
                next.copyFrom(new byte[(int) BYTES]);
            }
            onThe(owner, work, () -> assertThat(view[0].get(ValueLayout.JAVA_BYTE, BYTES - 1)).as("the buffer's own bytes").isEqualTo((byte) 7));

            onThe(owner, work, () -> manager.allocate(16, MemoryLocation.HOST).close()); // its next use ends the view
            assertThat(heldBytes()).isZero();
            onThe(owner, work, () -> assertThatThrownBy(() -> view[0].get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class));
            manager.releaseCachedMemory();
            for (MemoryLocation location : manager.locations()) {
                assertThat(manager.statistics(location).reservedBytes()).as("%s: all back in the pool", location).isZero();
            }
        } finally {
            owner.interrupt();
            owner.join(10_000);
        }
    }

    /** As above, where an access of this thread's held the device buffer too: the device memory is back as it ends. */
    @Test
    void aDeviceBuffersMemoryGoesBackAsTheLastAccessEndsWhileOnlyAViewOfItsHostMirrorWaits() throws Exception {
        CountDownLatch forever = new CountDownLatch(1);
        try {
            UnifiedBuffer[] viewed = {deviceBufferViewedByAThreadThatIdles(forever)};
            BufferAccess access = viewed[0].deviceAccess(AccessMode.READ);
            viewed[0].close();
            assertThat(manager.statistics(MemoryLocation.DEVICE).heldBytes()).as("the access reaches the device memory").isEqualTo(BYTES);

            access.close();

            assertThat(manager.statistics(MemoryLocation.DEVICE).heldBytes()).as("the view does not").isZero();
            assertThat(heldBytes()).as("the mirror waits for the view").isPositive();
        } finally {
            forever.countDown();
        }
    }

    /**
     * As above, where the access's thread died with it open: the sweeper ends the access, and the device memory is back
     * then, not at the viewing thread's next call.
     */
    @Test
    void aDeviceBuffersMemoryGoesBackAsTheSweeperEndsTheAccessOfADeadThread() throws Exception {
        CountDownLatch forever = new CountDownLatch(1);
        try {
            UnifiedBuffer[] viewed = {deviceBufferViewedByAThreadThatIdles(forever)};
            CountDownLatch opened = new CountDownLatch(1);
            CountDownLatch die = new CountDownLatch(1);
            Thread dying = Thread.ofPlatform().daemon().name("dying-accessor").start(() -> {
                viewed[0].deviceAccess(AccessMode.READ); // never ended
                opened.countDown();
                awaitQuietly(die);
            });
            assertThat(opened.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();
            viewed[0].close();
            assertThat(manager.statistics(MemoryLocation.DEVICE).heldBytes()).as("the access reaches the device memory").isEqualTo(BYTES);

            die.countDown();
            dying.join(BOUND.toMillis());
            long deadline = System.nanoTime() + BOUND.toNanos();
            while (manager.statistics(MemoryLocation.DEVICE).heldBytes() != 0 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertThat(manager.statistics(MemoryLocation.DEVICE).heldBytes()).as("the view does not hold it").isZero();
            assertThat(heldBytes()).as("the mirror waits for the view").isPositive();
        } finally {
            forever.countDown();
        }
    }

    /** A DEVICE buffer that a thread allocated and viewed outside any scope, then idles until {@code forever}. */
    private UnifiedBuffer deviceBufferViewedByAThreadThatIdles(CountDownLatch forever) throws InterruptedException {
        UnifiedBuffer[] viewed = new UnifiedBuffer[1];
        CountDownLatch taken = new CountDownLatch(1);
        Thread.ofPlatform().daemon().name("unscoped-device-viewer").start(() -> {
            viewed[0] = manager.allocate(BYTES, MemoryLocation.DEVICE);
            viewed[0].hostView().fill((byte) 7);
            taken.countDown();
            awaitQuietly(forever);
        });
        assertThat(taken.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();
        return viewed[0];
    }

    private static byte[] filled(long bytes, byte value) {
        byte[] filled = new byte[Math.toIntExact(bytes)];
        Arrays.fill(filled, value);
        return filled;
    }

    private static byte[] bytesOf(UnifiedBuffer buffer) {
        byte[] bytes = new byte[Math.toIntExact(buffer.byteSize())];
        buffer.copyTo(bytes);
        return bytes;
    }

    /** Runs {@code step} on {@code owner} and waits for it. */
    private static void onThe(Thread owner, BlockingQueue<Runnable> work, Runnable step) throws Exception {
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

    /** How {@code work} is run on the thread under test: in a scope, which ends before the thread idles. */
    private interface Starter {
        void start(Runnable work) throws Exception;
    }

    /**
     * On the thread {@code starter} gives: a HOST and a DEVICE buffer of its own allocation, and one of each allocated
     * here, all viewed there; closed here while its views are open, then let go of. Returns once all is back.
     */
    private void closedWhileViewed(Starter starter) throws Exception {
        List<UnifiedBuffer> fromHere = List.of(manager.allocate(BYTES, MemoryLocation.HOST), manager.allocate(BYTES, MemoryLocation.DEVICE));
        List<UnifiedBuffer> buffers = new ArrayList<>(fromHere);
        List<MemorySegment> views = new ArrayList<>();
        CountDownLatch viewing = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        starter.start(() -> {
            for (MemoryLocation location : List.of(MemoryLocation.HOST, MemoryLocation.DEVICE)) {
                UnifiedBuffer own = manager.allocate(BYTES, location);
                buffers.add(own);
                own.hostView().fill((byte) 1);
            }
            for (UnifiedBuffer buffer : buffers) {
                views.add(buffer.readOnlyHostView());
            }
            viewing.countDown();
            awaitQuietly(closed);
        });
        assertThat(viewing.await(BOUND.toSeconds(), TimeUnit.SECONDS)).as("the work took its views").isTrue();
        for (UnifiedBuffer buffer : buffers) {
            buffer.close();
        }
        assertThat(manager.liveBuffers()).isEmpty();
        assertThat(heldBytes()).as("the views the work still holds keep the memory").isPositive();
        closed.countDown();

        long deadline = System.nanoTime() + BOUND.toNanos();
        while (heldBytes() > 0 && System.nanoTime() < deadline) {
            for (MemoryLocation location : manager.locations()) {
                MemoryStatistics figures = manager.statistics(location);
                assertThat(figures.liveBuffers()).as("%s: a closed buffer counted live while its memory waits", location).isZero();
                assertThat(figures.allocatedBytes()).as("%s: allocated while its memory waits", location).isZero();
            }
            Thread.sleep(5);
        }
        for (MemoryLocation location : manager.locations()) {
            MemoryStatistics figures = manager.statistics(location);
            assertThat(figures.heldBuffers()).as("%s: held past %s", location, BOUND).isZero();
            assertThat(figures.heldBytes()).as("%s: held past %s", location, BOUND).isZero();
            assertThat(figures.liveBuffers()).isZero();
        }
        for (MemorySegment view : views) {
            assertThatThrownBy(() -> view.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOfAny(IllegalStateException.class, WrongThreadException.class);
        }
        manager.releaseCachedMemory();
        for (MemoryLocation location : manager.locations()) {
            assertThat(manager.statistics(location).reservedBytes()).as("%s: back in the pool, so a release gives it back", location).isZero();
        }
    }

    private long heldBytes() {
        return manager.locations().stream().mapToLong(location -> manager.statistics(location).heldBytes()).sum();
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
