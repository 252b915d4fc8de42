package dev.compute.memory.cpu;

import static dev.compute.memory.cpu.ScenarioSupport.check;
import static dev.compute.memory.cpu.ScenarioSupport.expectEnded;
import static dev.compute.memory.cpu.ScenarioSupport.manager;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.ViewScope;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Ways a user could once reach freed memory through the API, each a {@code main} that {@link LifetimeRuleInChildJvmTest}
 * runs in a JVM of its own: before the lifetime rule, each of them read another buffer's data or crashed the JVM
 * (a read of memory a trim had unmapped). A scenario prints {@code OK <name>} and exits 0 when the rule held;
 * an assertion it makes fails with exit code 1; a crash shows as one.
 */
public final class LifetimeScenarios {

    private static final int BIG = 4 << 20; // whole mapped pages: a trim unmaps them

    public static void main(String[] args) throws Throwable {
        String name = args[0];
        switch (name) {
            case "staleViewAfterCloseAndTrim" -> staleViewAfterCloseAndTrim();
            case "viewClosedElsewhereThenTrimmed" -> viewClosedElsewhereThenTrimmed();
            case "managerClosedUnderAWritingView" -> managerClosedUnderAWritingView();
            case "managerClosedUnderASharedWritingView" -> managerClosedUnderASharedWritingView();
            case "managerClosedUnderAViewThatCallsBack" -> managerClosedUnderAViewThatCallsBack();
            case "managerClosedUnderANativeCall" -> managerClosedUnderANativeCall();
            case "opsAndCopiesRaceCloseAndTrim" -> opsAndCopiesRaceCloseAndTrim();
            case "leakedBufferWithALiveView" -> leakedBufferWithALiveView();
            case "pagesHeldByAnIdleViewGoBack" -> pagesHeldByAnIdleViewGoBack();
            default -> throw new IllegalArgumentException("no scenario " + name);
        }
        System.out.println("OK " + name);
        System.exit(0);
    }

    /** A view returned out of try-with-resources, its memory then unmapped by a trim: a clear exception, never a crash. */
    static void staleViewAfterCloseAndTrim() {
        try (UnifiedMemoryManager manager = manager(Duration.ofSeconds(5), LeakDetectionLevel.SIMPLE)) {
            for (MemoryLocation location : manager.locations()) {
                MemorySegment stale;
                try (UnifiedBuffer buffer = manager.allocate(BIG, location)) {
                    stale = buffer.hostView();
                    stale.fill((byte) 1);
                }
                manager.releaseCachedMemory();
                expectEnded(() -> stale.get(JAVA_BYTE, BIG - 1), location + " view read after close and trim");
                expectEnded(() -> stale.set(JAVA_BYTE, 0, (byte) 2), location + " view write after close and trim");
            }
        }
    }

    /** Closed and trimmed by another thread: the memory waits for the view's thread, which reads its own bytes. */
    static void viewClosedElsewhereThenTrimmed() throws Exception {
        try (UnifiedMemoryManager manager = manager(Duration.ofSeconds(5), LeakDetectionLevel.SIMPLE)) {
            UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.HOST);
            MemorySegment view = buffer.hostView();
            view.fill((byte) 3);
            Thread closer = Thread.ofPlatform().start(() -> {
                buffer.close();
                manager.releaseCachedMemory();
                try (UnifiedBuffer next = manager.allocate(BIG, MemoryLocation.HOST)) {
                    next.copyFrom(new byte[BIG]);
                    manager.releaseCachedMemory();
                }
            });
            closer.join();
            for (long i = 0; i < BIG; i += 4096) {
                check(view.get(JAVA_BYTE, i) == 3, "the view reads its own bytes at " + i + ", not freed or reused memory");
            }
            manager.allocate(64).close(); // this thread calls in: the view ends
            expectEnded(() -> view.get(JAVA_BYTE, 0), "view after its thread called back in");
        }
    }

    /**
     * Closed elsewhere while this thread's view, taken outside any scope, holds it, past {@code held-memory-warning}:
     * the memory's whole pages go back to the operating system (the view reads zeros there, its own bytes on the pages
     * it shares with neighbours), and no neighbour's byte changes, in a small segment and in a mapped one. The range
     * goes back to the pool at this thread's next call.
     */
    static void pagesHeldByAnIdleViewGoBack() throws Exception {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).heldMemoryWarning(Duration.ofMillis(100)).build()) {
            for (int heldBytes : new int[] {100_000, BIG + 1000}) {
                UnifiedBuffer before = manager.allocate(3000, MemoryLocation.HOST);
                UnifiedBuffer held = manager.allocate(heldBytes, MemoryLocation.HOST);
                UnifiedBuffer after = manager.allocate(3000, MemoryLocation.HOST);
                before.copyFrom(filled(3000, (byte) 5));
                after.copyFrom(filled(3000, (byte) 5));
                MemorySegment view = held.hostView();
                view.fill((byte) 3);
                Thread closer = Thread.ofPlatform().start(held::close);
                closer.join();
                long middle = heldBytes / 2;
                long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                while (view.get(JAVA_BYTE, middle) != 0 && System.nanoTime() < deadline) {
                    Thread.sleep(20); // reading the view is no call into the manager
                }
                check(view.get(JAVA_BYTE, middle) == 0, "the pages of " + heldBytes + " held bytes went back within the bound");
                long zeros = 0;
                for (long i = 0; i < heldBytes; i++) {
                    byte b = view.get(JAVA_BYTE, i);
                    check(b == 0 || b == 3, "the view reads its own bytes or zeros at " + i + ", never another's: " + b);
                    zeros += b == 0 ? 1 : 0;
                }
                check(zeros >= heldBytes - 2 * 4096L * 16, "all but the pages shared at its ends went back: " + zeros + " zeros");
                for (UnifiedBuffer neighbour : List.of(before, after)) {
                    byte[] bytes = new byte[3000];
                    neighbour.copyTo(bytes);
                    for (byte b : bytes) {
                        check(b == 5, "a neighbour's bytes stay as written");
                    }
                    neighbour.close();
                }
                check(manager.statistics(MemoryLocation.HOST).heldBytes() == 0, "the range went back to the pool at this thread's call");
                expectEnded(() -> view.get(JAVA_BYTE, 0), "the view after its thread called in");
            }
        }
    }

    private static byte[] filled(int bytes, byte value) {
        byte[] filled = new byte[bytes];
        Arrays.fill(filled, value);
        return filled;
    }

    /**
     * The manager closes while another thread writes through a view it took inside its own {@link ViewScope} (a
     * confined view) and never calls the manager: the close waits its timeout, then keeps that memory rather than
     * unmap it under the writer.
     */
    static void managerClosedUnderAWritingView() throws Exception {
        UnifiedMemoryManager manager = manager(Duration.ofMillis(300), LeakDetectionLevel.PARANOID);
        UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.HOST);
        CountDownLatch writing = new CountDownLatch(1);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong writes = new AtomicLong();
        Thread writer = Thread.ofPlatform().start(() -> {
            try (ViewScope views = ViewScope.open()) {
                MemorySegment view = buffer.hostView();
                writing.countDown();
                while (!stop.get()) {
                    view.set(JAVA_BYTE, ThreadLocalRandom.current().nextLong(BIG), (byte) 1);
                    writes.incrementAndGet();
                }
            }
        });
        writing.await();
        long started = System.nanoTime();
        manager.close();
        long tookMillis = (System.nanoTime() - started) / 1_000_000;
        check(manager.isClosed(), "the manager is closed");
        check(tookMillis < 5_000, "close() is bounded by its timeout, took " + tookMillis + " ms");
        long before = writes.get();
        Thread.sleep(200);
        check(writes.get() > before, "the writer still writes, into memory that was kept, not freed");
        stop.set(true);
        writer.join();
    }

    /**
     * The manager closes while another thread writes through a view it took outside any scope, of a buffer it did not
     * allocate: that view is shared, so the close ends it at once (no wait for the timeout) and the writer's next
     * write fails cleanly; the memory is freed.
     */
    static void managerClosedUnderASharedWritingView() throws Exception {
        UnifiedMemoryManager manager = manager(Duration.ofSeconds(30), LeakDetectionLevel.PARANOID);
        UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.HOST);
        CountDownLatch writing = new CountDownLatch(1);
        AtomicLong writes = new AtomicLong();
        AtomicBoolean ended = new AtomicBoolean();
        Thread writer = Thread.ofPlatform().start(() -> {
            MemorySegment view = buffer.hostView();
            writing.countDown();
            try {
                while (true) {
                    view.set(JAVA_BYTE, ThreadLocalRandom.current().nextLong(BIG), (byte) 1);
                    writes.incrementAndGet();
                }
            } catch (IllegalStateException closed) {
                ended.set(true);
            }
        });
        writing.await();
        long started = System.nanoTime();
        manager.close();
        long tookMillis = (System.nanoTime() - started) / 1_000_000;
        writer.join(10_000);
        check(manager.isClosed(), "the manager is closed");
        check(tookMillis < 10_000, "close() did not wait out its 30 s timeout for a shared view, took " + tookMillis + " ms");
        check(ended.get(), "the writer's shared view ended with the close");
        check(!writer.isAlive(), "the writer stopped");
    }

    /**
     * As the first, a confined view (taken in the writer's scope), but the writer calls into the manager now and
     * then: it is told the manager closed, and its view ends on that call.
     */
    static void managerClosedUnderAViewThatCallsBack() throws Exception {
        UnifiedMemoryManager manager = manager(Duration.ofSeconds(10), LeakDetectionLevel.PARANOID);
        UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.DEVICE);
        CountDownLatch writing = new CountDownLatch(1);
        AtomicBoolean viewEnded = new AtomicBoolean();
        Thread writer = Thread.ofPlatform().start(() -> {
            try (ViewScope views = ViewScope.open()) { // the close, not the scope's end, must end the view
                MemorySegment view = buffer.hostView();
                writing.countDown();
                try {
                    while (true) {
                        view.set(JAVA_BYTE, ThreadLocalRandom.current().nextLong(BIG), (byte) 1);
                        buffer.copyTo(0, new byte[8], 0, 8);
                    }
                } catch (IllegalStateException managerClosed) {
                    try {
                        view.get(JAVA_BYTE, 0);
                    } catch (IllegalStateException ended) {
                        viewEnded.set(true);
                    }
                }
            }
        });
        writing.await();
        manager.close();
        writer.join();
        check(viewEnded.get(), "the writer's view ended when it called back in after the close");
    }

    /**
     * A shared access whose segment is inside a native call (nanosleep reads its timespec from it for 400 ms) when
     * the manager closes: the close waits for the call to return, then frees, and the backend is closed.
     */
    static void managerClosedUnderANativeCall() throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle nanosleep = linker.downcallHandle(linker.defaultLookup().find("nanosleep").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        UnifiedMemoryManager manager = manager(Duration.ofSeconds(10), LeakDetectionLevel.PARANOID);
        UnifiedBuffer buffer = manager.allocate(64, MemoryLocation.PINNED);
        BufferAccess access = buffer.sharedHostAccess(AccessMode.READ_WRITE);
        MemorySegment timespec = access.segment();
        timespec.set(JAVA_LONG, 0, 0);
        timespec.set(JAVA_LONG, 8, 400_000_000L);
        CountDownLatch calling = new CountDownLatch(1);
        Thread sleeper = Thread.ofPlatform().start(() -> {
            calling.countDown();
            try {
                int result = (int) nanosleep.invokeExact(timespec, MemorySegment.NULL);
                check(result == 0, "nanosleep returned " + result);
            } catch (Throwable e) {
                throw new AssertionError(e);
            }
        });
        calling.await();
        Thread.sleep(50);
        long started = System.nanoTime();
        manager.close();
        long tookMillis = (System.nanoTime() - started) / 1_000_000;
        sleeper.join();
        check(tookMillis >= 200, "the close waited for the native call (" + tookMillis + " ms)");
        check(!access.isOpen(), "the close ended the shared access");
        expectEnded(() -> timespec.get(JAVA_LONG, 0), "the shared segment after the close");
        access.close();
        buffer.close();
    }

    /**
     * Ops and buffer-to-buffer copies while other threads close their buffers and trim: every op either runs on
     * memory it holds or fails because the buffer is closed; none crashes, none writes into a buffer made since.
     */
    static void opsAndCopiesRaceCloseAndTrim() throws Exception {
        try (UnifiedMemoryManager manager = manager(Duration.ofSeconds(5), LeakDetectionLevel.SIMPLE)) {
            int elements = BIG / 8;
            AtomicLong ran = new AtomicLong();
            AtomicLong refused = new AtomicLong();
            long deadline = System.nanoTime() + 2_000_000_000L;
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                threads.add(Thread.ofPlatform().start(() -> {
                    ThreadLocalRandom random = ThreadLocalRandom.current();
                    while (System.nanoTime() < deadline) {
                        UnifiedBuffer x = manager.allocate(DataType.FLOAT64, elements);
                        UnifiedBuffer y = manager.allocate(DataType.FLOAT64, elements);
                        manager.ops().fill(x, 1);
                        manager.ops().fill(y, 0);
                        Thread closer = Thread.ofPlatform().start(() -> {
                            Thread.onSpinWait();
                            (random.nextBoolean() ? x : y).close();
                            manager.releaseCachedMemory();
                        });
                        try {
                            switch (random.nextInt(4)) {
                                case 0 -> manager.ops().axpy(2, x, y);
                                case 1 -> manager.ops().sum(x);
                                case 2 -> manager.ops().scale(y, 3);
                                default -> y.copyFrom(x, 0, 0, (long) elements * 8);
                            }
                            ran.incrementAndGet();
                        } catch (IllegalStateException closed) {
                            check(closed.getMessage().contains("is closed"), "refused for being closed: " + closed.getMessage());
                            refused.incrementAndGet();
                        }
                        try {
                            closer.join();
                        } catch (InterruptedException e) {
                            throw new AssertionError(e);
                        }
                        // the buffer closed under the op: a fresh one of the same size is untouched by it
                        try (UnifiedBuffer fresh = manager.allocate(DataType.FLOAT64, elements)) {
                            fresh.copyFrom(new double[elements]);
                            manager.releaseCachedMemory();
                            check(manager.ops().sum(fresh) == 0, "a fresh buffer stays zero");
                        }
                        x.close();
                        y.close();
                    }
                }));
            }
            for (Thread thread : threads) {
                thread.join();
            }
            System.out.println("ops run: " + ran.get() + ", refused as closed: " + refused.get());
            check(ran.get() + refused.get() > 0, "some ops raced");
        }
    }

    /**
     * A buffer dropped without close() while this thread still uses its view: the leak detector reports it, but
     * its memory waits for the view; trims meanwhile do not unmap it.
     */
    static void leakedBufferWithALiveView() throws Exception {
        try (UnifiedMemoryManager manager = manager(Duration.ofSeconds(5), LeakDetectionLevel.PARANOID)) {
            MemorySegment view = viewOfADroppedBuffer(manager);
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (manager.leaksDetected() == 0 && System.nanoTime() < deadline) {
                System.gc();
                Thread.sleep(20);
            }
            check(manager.leaksDetected() == 1, "the dropped buffer was found out as a leak");
            Thread trimmer = Thread.ofPlatform().start(() -> {
                try (UnifiedBuffer next = manager.allocate(BIG, MemoryLocation.HOST)) {
                    next.copyFrom(new byte[BIG]);
                }
                manager.releaseCachedMemory();
            });
            trimmer.join();
            for (long i = 0; i < BIG; i += 4096) {
                check(view.get(JAVA_BYTE, i) == 4, "the view reads the leaked buffer's own bytes at " + i);
            }
            manager.allocate(64).close();
            expectEnded(() -> view.get(JAVA_BYTE, 0), "the view of a leaked buffer after its thread called back in");
        }
    }

    private static MemorySegment viewOfADroppedBuffer(UnifiedMemoryManager manager) {
        MemorySegment view = manager.allocate(BIG, MemoryLocation.HOST).hostView();
        view.fill((byte) 4);
        return view;
    }

    private LifetimeScenarios() {}
}
