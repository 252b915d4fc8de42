package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.ComputeBackend;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/** Reading the manager's figures (statistics, snapshots, live buffers, the timeline) changes nothing it holds, at any moment. */
class ManagerFiguresReadingTest {

    private static final long MiB = 1L << 20;

    private static UnifiedMemoryManager manager() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).build();
    }

    /** Every figure the manager offers, read at once. */
    private static void readEverything(UnifiedMemoryManager manager) {
        manager.statistics();
        for (MemoryLocation location : manager.locations()) {
            manager.statistics(location);
            manager.snapshot(location);
            manager.timeline(location);
        }
        manager.liveBuffers();
    }

    @Test
    void aManagerReadBetweenEachAllocationAndFreeEndsAsOneNeverRead() {
        try (UnifiedMemoryManager read = manager(); UnifiedMemoryManager unread = manager()) {
            for (UnifiedMemoryManager manager : List.of(read, unread)) {
                Deque<UnifiedBuffer> live = new ArrayDeque<>();
                for (int i = 0; i < 200; i++) {
                    live.push(manager.allocate(512 + (i % 17) * 3000L, i % 3 == 0 ? MemoryLocation.HOST : MemoryLocation.DEVICE));
                    if (manager == read) {
                        readEverything(manager);
                    }
                    if (i % 3 == 2) {
                        live.pop().close();
                        live.removeLast().close();
                        if (manager == read) {
                            readEverything(manager);
                        }
                    }
                }
                live.forEach(UnifiedBuffer::close);
            }
            for (MemoryLocation location : List.of(MemoryLocation.HOST, MemoryLocation.DEVICE)) {
                assertThat(read.statistics(location)).as("%s", location).isEqualTo(unread.statistics(location));
            }
        }
    }

    @Test
    void figuresReadWhileThreeThreadsAllocateAreNeverNegativeNorContradictory() throws Exception {
        try (UnifiedMemoryManager manager = manager()) {
            AtomicBoolean stop = new AtomicBoolean();
            ExecutorService threads = Executors.newFixedThreadPool(3);
            List<Future<?>> workers = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                Random random = new Random(t);
                workers.add(threads.submit(() -> {
                    Deque<UnifiedBuffer> held = new ArrayDeque<>();
                    while (!stop.get()) {
                        if (held.size() > 8 || (!held.isEmpty() && random.nextBoolean())) {
                            held.poll().close();
                        } else {
                            held.add(manager.allocate(1 + random.nextInt(2 * (int) MiB), MemoryLocation.DEVICE));
                        }
                    }
                    held.forEach(UnifiedBuffer::close);
                    return null;
                }));
            }
            try {
                for (int i = 0; i < 5_000; i++) {
                    MemoryStatistics s = manager.statistics(MemoryLocation.DEVICE);
                    assertThat(s.allocatedBytes()).isNotNegative().isLessThanOrEqualTo(s.allocatedBytesPeak());
                    assertThat(s.requestedBytes()).isNotNegative().isLessThanOrEqualTo(s.requestedBytesPeak());
                    assertThat(s.reservedBytes()).isNotNegative().isLessThanOrEqualTo(s.reservedBytesPeak());
                    assertThat(s.cachedBytes()).isNotNegative().isLessThanOrEqualTo(s.reservedBytes());
                    assertThat(s.largestFreeBlockBytes()).isNotNegative().isLessThanOrEqualTo(s.cachedBytes());
                    assertThat(s.liveBuffers()).isNotNegative();
                    assertThat(s.fragmentation()).isBetween(0.0, 1.0);
                    manager.snapshot(MemoryLocation.DEVICE);
                }
            } finally {
                stop.set(true);
                for (Future<?> worker : workers) {
                    worker.get(30, TimeUnit.SECONDS);
                }
                threads.shutdown();
            }
            MemoryStatistics end = manager.statistics(MemoryLocation.DEVICE);
            assertThat(end.allocatedBytes()).isZero();
            assertThat(end.liveBuffers()).isZero();
        }
    }
    /**
     * A buffer closed here while another thread's view scope holds it, whose memory goes back as that scope ends: the
     * scope's end took it out of the held figures before its free was counted, and a reader summed the live counts
     * before the held ones, so a read in either window counted the closed buffer as live (and its bytes as allocated,
     * its block as LIVE on the map), about once in a few thousand rounds.
     */
    @Test
    void aClosedBufferWhoseViewScopeEndsElsewhereIsNeverReadAsLive() throws Exception {
        try (UnifiedMemoryManager manager = manager()) {
            // odd while the round's buffer is closed and nothing else is open: nothing may be read as live then
            AtomicLong phase = new AtomicLong();
            SynchronousQueue<UnifiedBuffer> toView = new SynchronousQueue<>();
            SynchronousQueue<Boolean> viewed = new SynchronousQueue<>();
            SynchronousQueue<Boolean> closed = new SynchronousQueue<>();
            SynchronousQueue<Boolean> released = new SynchronousQueue<>();
            Thread viewer = Thread.ofPlatform().daemon().name("scope-viewer").start(() -> {
                try {
                    for (UnifiedBuffer buffer; (buffer = toView.poll(30, TimeUnit.SECONDS)) != null; ) {
                        try (ViewScope scope = ViewScope.open()) {
                            buffer.readOnlyHostView().get(ValueLayout.JAVA_BYTE, 0);
                            viewed.offer(true, 30, TimeUnit.SECONDS);
                            closed.poll(30, TimeUnit.SECONDS);
                        } // the memory goes back here, on this thread
                        released.offer(true, 30, TimeUnit.SECONDS);
                    }
                } catch (InterruptedException e) {
                    // the test is over
                }
            });
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong checked = new AtomicLong();
            AtomicReference<String> counted = new AtomicReference<>();
            // one reader of the statistics, one of the map: each read is then short, and many fall in the windows
            Thread statistics = readWhileClosed(phase, stop, checked, counted, () -> {
                MemoryStatistics s = manager.statistics(MemoryLocation.HOST);
                return s.liveBuffers() != 0 || s.allocatedBytes() != 0 ? s.toString() : null;
            });
            Thread map = readWhileClosed(phase, stop, checked, counted, () -> manager.snapshot(MemoryLocation.HOST).segments().stream()
                    .flatMap(segment -> segment.blocks().stream()).filter(block -> block.state() == MemorySnapshot.BlockState.LIVE)
                    .findAny().map(block -> "a LIVE block on the map: " + block).orElse(null));
            try {
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
                while (System.nanoTime() < end && counted.get() == null) {
                    UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.HOST);
                    assertThat(toView.offer(buffer, 30, TimeUnit.SECONDS)).isTrue();
                    assertThat(viewed.poll(30, TimeUnit.SECONDS)).isTrue();
                    buffer.close();
                    phase.incrementAndGet();
                    assertThat(closed.offer(true, 30, TimeUnit.SECONDS)).isTrue();
                    assertThat(released.poll(30, TimeUnit.SECONDS)).isTrue();
                    phase.incrementAndGet();
                }
            } finally {
                stop.set(true);
                statistics.join(30_000);
                map.join(30_000);
                viewer.interrupt();
                viewer.join(30_000);
            }
            assertThat(counted.get()).as("a read while only a closed buffer's memory was out (of %d such reads)", checked.get()).isNull();
            assertThat(checked.get()).as("reads made while the buffer was closed").isPositive();
        }
    }

    /**
     * The last view of a buffer ends on its thread just as another thread closes the buffer: where the view's end took
     * the memory first, the close found nothing left to report as held and returned while that free was still on its
     * way, so the closing thread's own next read counted the closed buffer as live.
     */
    @Test
    void aCloseThatMeetsTheLastViewsEndElsewhereIsNeverReadAsLive() throws Exception {
        try (UnifiedMemoryManager manager = manager()) {
            AtomicReference<@Nullable UnifiedBuffer> toView = new AtomicReference<>();
            AtomicLong viewed = new AtomicLong();
            AtomicLong ending = new AtomicLong();
            AtomicBoolean stop = new AtomicBoolean();
            Thread viewer = Thread.ofPlatform().daemon().name("scope-viewer").start(() -> {
                for (long round = 1; !stop.get(); round++) {
                    UnifiedBuffer buffer;
                    while ((buffer = toView.getAndSet(null)) == null) {
                        if (stop.get()) {
                            return;
                        }
                        Thread.onSpinWait();
                    }
                    ViewScope scope = ViewScope.open();
                    buffer.readOnlyHostView().get(ValueLayout.JAVA_BYTE, 0);
                    viewed.set(round);
                    while (ending.get() != round && !stop.get()) {
                        Thread.onSpinWait();
                    }
                    scope.close(); // as the other thread closes the buffer
                }
            });
            String counted = null;
            long rounds = 0;
            try {
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
                for (long round = 1; System.nanoTime() < end && counted == null; round++) {
                    UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.HOST);
                    toView.set(buffer);
                    while (viewed.get() != round) {
                        assertThat(viewer.isAlive()).isTrue();
                        Thread.onSpinWait();
                    }
                    ending.set(round);
                    buffer.close();
                    MemoryStatistics s = manager.statistics(MemoryLocation.HOST);
                    if (s.liveBuffers() != 0 || s.allocatedBytes() != 0) {
                        counted = s.toString();
                    }
                    rounds++;
                }
            } finally {
                stop.set(true);
                viewer.join(30_000);
            }
            assertThat(counted).as("read by the closing thread after its close (round %d)", rounds).isNull();
        }
    }

    /**
     * A thread that reads figures until {@code stop}, checking with {@code contradiction} (a description of what it
     * read wrong, or null) those read while {@code phase} was odd throughout; the first contradiction stops it.
     */
    private static Thread readWhileClosed(AtomicLong phase, AtomicBoolean stop, AtomicLong checked, AtomicReference<String> counted,
                                          Supplier<@Nullable String> contradiction) {
        return Thread.ofPlatform().daemon().name("figures-reader").start(() -> {
            while (!stop.get() && counted.get() == null) {
                long before = phase.get();
                String wrong = contradiction.get();
                if (before % 2 == 1 && phase.get() == before) {
                    checked.incrementAndGet();
                    if (wrong != null) {
                        counted.compareAndSet(null, wrong);
                    }
                }
            }
        });
    }

    /**
     * Requests of whole 512-byte units are not rounded, so requested bytes equal allocated bytes at every moment; a
     * reader summed the allocated figure of every thread stripe, then the requested one, and an allocation counted in
     * between showed in requested only: more bytes requested than allocated.
     */
    @Test
    void requestedBytesReadWhileThreadsAllocateNeverExceedAllocatedBytes() throws Exception {
        try (UnifiedMemoryManager manager = manager()) {
            AtomicBoolean stop = new AtomicBoolean();
            ExecutorService threads = Executors.newFixedThreadPool(3);
            List<Future<?>> workers = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                Random random = new Random(t);
                workers.add(threads.submit(() -> {
                    Deque<UnifiedBuffer> held = new ArrayDeque<>();
                    while (!stop.get()) {
                        if (held.size() > 8 || (!held.isEmpty() && random.nextBoolean())) {
                            held.poll().close();
                        } else {
                            held.add(manager.allocate(512L * (1 + random.nextInt(64)), MemoryLocation.DEVICE));
                        }
                    }
                    held.forEach(UnifiedBuffer::close);
                    return null;
                }));
            }
            long inverted = 0;
            MemoryStatistics first = null;
            try {
                for (int i = 0; i < 200_000; i++) {
                    MemoryStatistics s = manager.statistics(MemoryLocation.DEVICE);
                    if (s.requestedBytes() > s.allocatedBytes()) {
                        inverted++;
                        first = first == null ? s : first;
                    }
                }
            } finally {
                stop.set(true);
                for (Future<?> worker : workers) {
                    worker.get(30, TimeUnit.SECONDS);
                }
                threads.shutdown();
            }
            assertThat(inverted).as("reads with more bytes requested than allocated, the first: %s", first).isZero();
        }
    }

    /**
     * A trim gives memory back without the pool's lock, and figures are read meanwhile: what it is giving back is no
     * cache (nothing can be served from it), so one free segment on its way back is no fragmented pool.
     */
    @Test
    void memoryATrimIsGivingBackIsNotReadAsCachedNorFragmented() throws Exception {
        SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
        CountDownLatch freeCalled = new CountDownLatch(1);
        CountDownLatch driverReturns = new CountDownLatch(1);
        AtomicBoolean holdFrees = new AtomicBoolean();
        ComputeBackend slow = (ComputeBackend) Proxy.newProxyInstance(ComputeBackend.class.getClassLoader(),
                new Class<?>[] {ComputeBackend.class}, (proxy, method, args) -> {
                    if (method.getName().equals("free") && holdFrees.get()) {
                        freeCalled.countDown();
                        driverReturns.await();
                    }
                    try {
                        return method.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(slow).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).build()) {
            manager.allocate(64 * MiB, MemoryLocation.DEVICE).close();
            holdFrees.set(true);
            Thread trimming = Thread.ofPlatform().start(manager::releaseCachedMemory);
            try {
                assertThat(freeCalled.await(30, TimeUnit.SECONDS)).isTrue();

                MemoryStatistics s = manager.statistics(MemoryLocation.DEVICE);
                assertThat(s.reservedBytes()).as("what the driver has not given back yet").isGreaterThanOrEqualTo(64 * MiB);
                assertThat(s.cachedBytes()).as("nothing to serve from while it is given back").isZero();
                assertThat(s.fragmentation()).isZero();
            } finally {
                driverReturns.countDown();
                trimming.join(Duration.ofSeconds(60));
            }
            assertThat(trimming.isAlive()).isFalse();
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
        }
    }
}
