package dev.compute.memory.cpu;

import static dev.compute.memory.cpu.ScenarioSupport.check;
import static dev.compute.memory.cpu.ScenarioSupport.expectEnded;
import static dev.compute.memory.cpu.ScenarioSupport.manager;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.BooleanSupplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Attacks on the lifetime rule that could crash the JVM, each a {@code main} that {@link LifetimeAttackTest} runs in
 * a JVM of its own. As {@link LifetimeScenarios}: a scenario prints {@code OK <name>} and exits 0 when the rule held;
 * a check that fails exits 1; a read of unmapped memory shows as a crash. Buffers are large enough to be whole mapped
 * pages, so memory given back and trimmed is really unmapped.
 */
public final class LifetimeAttackScenarios {

    private static final int BIG = 4 << 20;
    private static final int MINIMUM_USES = 1000;

    public static void main(String[] args) throws Throwable {
        // the LEAK lines of the scenarios that drop buffers on purpose would drown the output a failure shows
        Logger.getLogger("").setLevel(Level.WARNING);
        String name = args[0];
        switch (name) {
            case "viewsAndAccessesOpenedWhileTheManagerCloses" -> viewsAndAccessesOpenedWhileTheManagerCloses();
            case "everyUseRacesCloseTrimAndLeaks" -> everyUseRacesCloseTrimAndLeaks();
            case "sharedAccessEndedUnderItsReaders" -> sharedAccessEndedUnderItsReaders();
            case "leakedBuffersWithDroppedAccessesAndLiveSlices" -> leakedBuffersWithDroppedAccessesAndLiveSlices();
            case "managerClosedInsideADeviceAccessOfASlice" -> managerClosedInsideADeviceAccessOfASlice();
            default -> throw new IllegalArgumentException("no scenario " + name);
        }
        System.out.println("OK " + name);
        System.exit(0);
    }

    /**
     * A thread takes its first view or access while another closes the manager. Either the call fails because the
     * manager closed, or the view ends with the manager (the thread calls back in), or the close keeps the memory;
     * the memory is never freed under a view that still works.
     */
    static void viewsAndAccessesOpenedWhileTheManagerCloses() throws Throwable {
        long deadline = System.nanoTime() + 20_000_000_000L;
        for (int trial = 0; trial < 300 && System.nanoTime() < deadline; trial++) {
            UnifiedMemoryManager manager = manager(Duration.ofMillis(500), LeakDetectionLevel.DISABLED);
            UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.HOST);
            int way = trial % 3;
            CountDownLatch go = new CountDownLatch(1);
            CountDownLatch closed = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            int attempt = trial;
            Thread user = Thread.ofPlatform().start(() -> {
                try {
                    go.await();
                    MemorySegment bytes;
                    BufferAccess access = null;
                    try {
                        switch (way) {
                            case 0 -> bytes = buffer.hostView();
                            case 1 -> {
                                access = buffer.hostAccess(AccessMode.READ_WRITE);
                                bytes = access.segment();
                            }
                            default -> {
                                access = buffer.deviceAccess(AccessMode.READ_WRITE);
                                bytes = access.segment();
                            }
                        }
                    } catch (IllegalStateException managerClosed) {
                        return;
                    }
                    callInUntilClosed(manager);
                    closed.await();
                    try {
                        bytes.get(JAVA_BYTE, BIG - 1);
                        check(manager.statistics(MemoryLocation.HOST).reservedBytes() > 0,
                                "trial " + attempt + ": a view or access works after the manager freed its memory");
                    } catch (IllegalStateException ended) {
                        // the rule held: the view or access ended with the manager
                    }
                    if (access != null) {
                        access.close();
                    }
                } catch (Throwable e) {
                    failure.set(e);
                }
            });
            go.countDown();
            Thread.sleep(0, ThreadLocalRandom.current().nextInt(50_000));
            manager.close();
            closed.countDown();
            user.join();
            if (failure.get() != null) {
                throw failure.get();
            }
        }
    }

    private static void callInUntilClosed(UnifiedMemoryManager manager) {
        try {
            while (true) {
                manager.allocate(64).close();
            }
        } catch (IllegalStateException managerClosed) {
            // this call ended the views and accesses the close handed to this thread
        }
    }

    /**
     * Platform and virtual threads share eight slots of tagged buffers and do everything to them at once: views,
     * host, device and shared accesses, slices, copies, ops, close, trims, drops (leaks) and collections. Every
     * buffer holds only its own tag, so any path that reached memory freed or handed to another buffer reads a
     * wrong tag; uses of what was closed fail with an IllegalStateException (or WrongThreadException), nothing else.
     * Afterwards everything is closed, and the figures say so exactly.
     */
    static void everyUseRacesCloseTrimAndLeaks() throws Exception {
        int elements = BIG / 4;
        UnifiedMemoryManager manager = manager(Duration.ofSeconds(5), LeakDetectionLevel.PARANOID);
        record Tagged(UnifiedBuffer buffer, float tag) {}
        AtomicReferenceArray<Tagged> slots = new AtomicReferenceArray<>(8);
        AtomicLong tags = new AtomicLong();
        AtomicLong uses = new AtomicLong();
        ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
        // six seconds of races, longer where a loaded machine has not let the threads do enough yet (a minimum of
        // uses, not a speed: the check below is that the races ran, not how fast)
        long start = System.nanoTime();
        BooleanSupplier racing = () -> {
            long now = System.nanoTime();
            return now - start < 6_000_000_000L || uses.get() < MINIMUM_USES && now - start < 40_000_000_000L;
        };
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            Thread.Builder builder = t % 2 == 0 ? Thread.ofPlatform() : Thread.ofVirtual();
            threads.add(builder.start(() -> {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                List<MemorySegment> views = new ArrayList<>();
                List<Float> viewTags = new ArrayList<>();
                while (racing.getAsBoolean()) {
                    int slot = random.nextInt(8);
                    Tagged tagged = slots.get(slot);
                    try {
                        if (tagged == null) {
                            float tag = 1 + tags.incrementAndGet() % 1000;
                            UnifiedBuffer fresh = manager.allocate(DataType.FLOAT32, elements, MemoryLocation.values()[random.nextInt(4)]);
                            manager.ops().fill(fresh, tag);
                            if (!slots.compareAndSet(slot, null, new Tagged(fresh, tag))) {
                                fresh.close();
                            }
                            continue;
                        }
                        UnifiedBuffer buffer = tagged.buffer();
                        float tag = tagged.tag();
                        switch (random.nextInt(13)) {
                            case 0 -> {
                                if (slots.compareAndSet(slot, tagged, null)) {
                                    buffer.close();
                                }
                            }
                            case 1 -> manager.releaseCachedMemory();
                            case 2 -> {
                                views.add(buffer.readOnlyHostView());
                                viewTags.add(tag);
                            }
                            case 3 -> {
                                try (BufferAccess access = buffer.hostAccess(AccessMode.READ)) {
                                    expectTag(access.segment().getAtIndex(JAVA_FLOAT_UNALIGNED, random.nextInt(elements)), tag, "host access");
                                }
                            }
                            case 4 -> {
                                try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                                    int at = random.nextInt(elements);
                                    expectTag(access.segment().getAtIndex(JAVA_FLOAT_UNALIGNED, at), tag, "device access");
                                    access.segment().setAtIndex(JAVA_FLOAT_UNALIGNED, at, tag);
                                }
                            }
                            case 5 -> {
                                BufferAccess shared = buffer.sharedHostAccess(AccessMode.READ);
                                MemorySegment bytes = shared.segment();
                                Thread reader = Thread.ofVirtual().start(() -> {
                                    try {
                                        expectTag(bytes.getAtIndex(JAVA_FLOAT_UNALIGNED, elements - 1), tag, "shared access");
                                    } catch (IllegalStateException ended) {
                                        // ended under the reader: allowed
                                    } catch (Throwable e) {
                                        unexpected.add(e);
                                    }
                                });
                                if (random.nextBoolean()) {
                                    shared.close();
                                }
                                reader.join();
                                shared.close();
                            }
                            case 6 -> {
                                UnifiedBuffer slice = buffer.slice(random.nextInt(elements - 16), 16);
                                float[] back = new float[16];
                                slice.copyTo(back);
                                for (float value : back) {
                                    expectTag(value, tag, "slice copy");
                                }
                                if (random.nextBoolean()) {
                                    slice.close();
                                }
                            }
                            case 7 -> expectTag((float) (manager.ops().sum(buffer) / elements), tag, "sum");
                            case 8 -> {
                                UnifiedBuffer low = buffer.slice(0, elements / 2);
                                UnifiedBuffer high = buffer.slice(elements / 4, elements / 2); // overlaps low: copied as memmove
                                manager.ops().axpy(0.0, low, buffer.slice(elements / 2, elements / 2)); // axpy takes ranges apart
                                manager.ops().scale(low, 1.0);
                                high.copyFrom(low, 0, 0, 64);
                            }
                            case 9 -> {
                                float[] back = new float[4];
                                buffer.copyTo((long) random.nextInt(elements - 4) * 4, back, 0, 4);
                                for (float value : back) {
                                    expectTag(value, tag, "copyTo");
                                }
                            }
                            case 10 -> {
                                if (random.nextInt(20) == 0) {
                                    System.gc();
                                }
                            }
                            case 11 -> slots.compareAndSet(slot, tagged, null); // dropped without close: a leak
                            default -> {
                                views.add(buffer.slice(1, 8).hostView());
                                viewTags.add(tag);
                            }
                        }
                        uses.incrementAndGet();
                    } catch (WrongThreadException | IllegalStateException refused) {
                        clearInterruptOfEndedRead();
                        String message = String.valueOf(refused.getMessage());
                        if (!(refused instanceof WrongThreadException) && !message.contains("closed") && !message.contains("ended")) {
                            unexpected.add(refused);
                        }
                    } catch (Throwable e) {
                        unexpected.add(e);
                    }
                    for (int k = views.size() - 1; k >= 0; k--) {
                        try {
                            expectTag(views.get(k).getAtIndex(JAVA_FLOAT_UNALIGNED, 0), viewTags.get(k), "view");
                        } catch (IllegalStateException ended) {
                            clearInterruptOfEndedRead();
                            views.remove(k);
                            viewTags.remove(k);
                        } catch (Throwable e) {
                            unexpected.add(e);
                            views.remove(k);
                            viewTags.remove(k);
                        }
                    }
                }
                manager.allocate(1).close(); // a last call in: ends the views other threads handed to this one
            }));
        }
        for (Thread thread : threads) {
            thread.join();
        }
        for (int slot = 0; slot < 8; slot++) {
            Tagged left = slots.getAndSet(slot, null);
            if (left != null) {
                left.buffer().close();
            }
        }
        long settle = System.nanoTime() + 20_000_000_000L;
        // the dropped buffers go back through the leak detector; memory a view of an ended thread held, once the
        // scope sweeper has seen the thread end (it looks every 200 ms)
        while (System.nanoTime() < settle && manager.locations().stream()
                .anyMatch(l -> manager.statistics(l).liveBuffers() > 0 || manager.statistics(l).heldBuffers() > 0)) {
            System.gc();
            Thread.sleep(20);
        }
        manager.releaseCachedMemory();
        System.out.println("uses " + uses.get() + ", leaks found " + manager.leaksDetected());
        for (Throwable e : unexpected.stream().limit(5).toList()) {
            e.printStackTrace(System.out);
        }
        check(unexpected.isEmpty(), unexpected.size() + " wrong reads or unexpected exceptions (first ones above)");
        check(uses.get() >= MINIMUM_USES, "the threads did something: " + uses.get());
        for (MemoryLocation location : manager.locations()) {
            MemoryStatistics figures = manager.statistics(location);
            check(figures.liveBuffers() == 0 && figures.allocatedBytes() == 0 && figures.reservedBytes() == 0,
                    location + ": nothing left after everything ended and a trim: " + figures);
        }
        manager.close();
    }

    /**
     * Threads read a shared access's segment in a loop while the buffer is closed, the access is ended by yet
     * another thread and the memory is trimmed: each read sees the buffer's bytes or fails with an
     * IllegalStateException, never freed memory.
     */
    static void sharedAccessEndedUnderItsReaders() throws Exception {
        try (UnifiedMemoryManager manager = manager(Duration.ofSeconds(5), LeakDetectionLevel.PARANOID)) {
            for (int round = 0; round < 20; round++) {
                UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.values()[round % 4]);
                BufferAccess shared = buffer.sharedHostAccess(AccessMode.READ_WRITE);
                MemorySegment bytes = shared.segment();
                bytes.fill((byte) 6);
                AtomicBoolean wrong = new AtomicBoolean();
                CountDownLatch reading = new CountDownLatch(2);
                List<Thread> readers = new ArrayList<>();
                for (int r = 0; r < 2; r++) {
                    readers.add(Thread.ofPlatform().start(() -> {
                        reading.countDown();
                        try {
                            while (true) {
                                if (bytes.get(JAVA_BYTE, ThreadLocalRandom.current().nextLong(BIG)) != 6) {
                                    wrong.set(true);
                                }
                            }
                        } catch (IllegalStateException ended) {
                            // the access ended under the reader
                        }
                    }));
                }
                reading.await();
                buffer.close();
                Thread ender = Thread.ofPlatform().start(() -> {
                    shared.close();
                    manager.releaseCachedMemory();
                });
                ender.join();
                try (UnifiedBuffer next = manager.allocate(BIG, buffer.location())) {
                    next.copyFrom(new byte[BIG]);
                }
                manager.releaseCachedMemory();
                for (Thread reader : readers) {
                    reader.join();
                }
                check(!wrong.get(), "a reader of the shared access saw bytes that were not the buffer's");
            }
            for (MemoryLocation location : manager.locations()) {
                check(manager.statistics(location).liveBuffers() == 0, location + ": the buffers went back");
            }
        }
    }

    /**
     * Buffers dropped without close while their accesses (confined and shared) were dropped unclosed too, their
     * segments still held; and a buffer dropped while a slice of it lives. The leak detector must not free what the
     * slice still reaches, and must free the rest once the segments' thread calls in, with the figures exact.
     */
    static void leakedBuffersWithDroppedAccessesAndLiveSlices() throws Exception {
        try (UnifiedMemoryManager manager = manager(Duration.ofSeconds(5), LeakDetectionLevel.PARANOID)) {
            for (boolean shared : new boolean[] {false, true}) {
                long before = manager.leaksDetected();
                MemorySegment bytes = segmentOfAnAccessDroppedWithItsBuffer(manager, shared);
                awaitLeaks(manager, before + 1);
                manager.releaseCachedMemory();
                try {
                    check(bytes.get(JAVA_BYTE, BIG - 1) == 9, "the dropped access reads its own buffer's bytes");
                } catch (IllegalStateException ended) {
                    check(shared, "only a shared access may be ended by the leak detector's thread");
                }
                manager.allocate(64).close(); // this thread calls in: the confined access ends
                expectEnded(() -> bytes.get(JAVA_BYTE, 0), "an access of a leaked buffer after its thread called in");
                check(manager.statistics(MemoryLocation.HOST).liveBuffers() == 0, "the leaked buffer went back");
            }
            long before = manager.leaksDetected();
            UnifiedBuffer slice = sliceOfADroppedBuffer(manager);
            for (int i = 0; i < 30; i++) {
                System.gc();
                Thread.sleep(10);
            }
            check(manager.leaksDetected() == before, "a buffer reachable through its slice is no leak");
            manager.releaseCachedMemory();
            byte[] back = new byte[16];
            slice.copyTo(back);
            for (byte b : back) {
                check(b == 7, "the slice reads its buffer's bytes");
            }
            slice = null;
            awaitLeaks(manager, before + 1);
            check(manager.statistics(MemoryLocation.HOST).liveBuffers() == 0, "the buffer went back once its slice was dropped");
            check(manager.statistics(MemoryLocation.HOST).allocatedBytes() == 0, "nothing allocated");
        }
    }

    private static MemorySegment segmentOfAnAccessDroppedWithItsBuffer(UnifiedMemoryManager manager, boolean shared) {
        UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.HOST);
        buffer.copyFrom(filled(BIG, (byte) 9));
        BufferAccess access = shared ? buffer.sharedHostAccess(AccessMode.READ) : buffer.hostAccess(AccessMode.READ);
        return access.segment();
    }

    private static UnifiedBuffer sliceOfADroppedBuffer(UnifiedMemoryManager manager) {
        UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.HOST);
        buffer.copyFrom(filled(BIG, (byte) 7));
        return buffer.slice(BIG - 16, 16);
    }

    /**
     * A read that failed because another thread closed its shared arena under it can leave the reading thread's
     * interrupt flag set: HotSpot sets it when it installs the asynchronous exception that ends the read
     * (JDK-8306324, fixed after JDK 25). Nobody interrupts these threads, so the flag is that and nothing else.
     */
    private static void clearInterruptOfEndedRead() {
        Thread.interrupted();
    }

    private static void awaitLeaks(UnifiedMemoryManager manager, long count) throws InterruptedException {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (manager.leaksDetected() < count && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(10);
        }
        check(manager.leaksDetected() == count, "the dropped buffer was found out as a leak");
    }

    /** The manager closed by the thread that holds a device access of a slice: the access ends before anything is freed. */
    static void managerClosedInsideADeviceAccessOfASlice() {
        UnifiedMemoryManager manager = manager(Duration.ofSeconds(5), LeakDetectionLevel.PARANOID);
        UnifiedBuffer buffer = manager.allocate(BIG, MemoryLocation.DEVICE);
        UnifiedBuffer slice = buffer.slice(BIG / 2, BIG / 2);
        BufferAccess access = slice.deviceAccess(AccessMode.READ_WRITE);
        MemorySegment bytes = access.segment();
        bytes.fill((byte) 3);
        MemorySegment view = slice.hostView();
        manager.close();
        expectEnded(() -> bytes.get(JAVA_BYTE, BIG / 2 - 1), "the device access's segment after the manager closed");
        expectEnded(() -> view.get(JAVA_BYTE, 0), "the slice's view after the manager closed");
        expectEnded(access::segment, "segment() of the ended access");
        expectEnded(access::offset, "offset() of the ended access");
        check(!access.isOpen(), "the access says it ended");
        access.close();
        access.close();
        slice.close();
        buffer.close();
    }

    private static byte[] filled(int size, byte value) {
        byte[] bytes = new byte[size];
        Arrays.fill(bytes, value);
        return bytes;
    }

    private static void expectTag(float read, float tag, String where) {
        if (read != tag) {
            throw new AssertionError(where + " read " + read + " in a buffer tagged " + tag + ": another buffer's memory");
        }
    }

    private LifetimeAttackScenarios() {}
}
