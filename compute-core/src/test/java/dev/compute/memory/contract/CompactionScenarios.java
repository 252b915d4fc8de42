package dev.compute.memory.contract;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.CompactionReport;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Compaction racing the users of the buffers it moves, each a {@code main} that {@link CompactionSafetyContractTest}
 * runs in a JVM of its own on one backend ({@code args}: the backend's name, or {@code simulated}, then the scenario):
 * a move under a user would corrupt data or, with its memory given back, crash the JVM. A scenario prints
 * {@code OK <name>} and exits 0 when every check held; a failed check exits 1; a crash shows as one.
 */
public final class CompactionScenarios {

    private static final int BYTES = 3 << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private CompactionScenarios() {}

    public static void main(String[] args) throws Throwable {
        String backend = args[0];
        String name = args[1];
        switch (name) {
            case "usersAndCompactionRace" -> usersAndCompactionRace(backend);
            case "managerClosedWhileCompacting" -> managerClosedWhileCompacting(backend);
            case "allocationsCompactUnderUsers" -> allocationsCompactUnderUsers(backend);
            case "managerClosedWhileRunningOutOfMemory" -> managerClosedWhileRunningOutOfMemory(backend);
            default -> throw new IllegalArgumentException("no scenario " + name);
        }
        System.out.println("OK " + name);
        System.exit(0);
    }

    /** A builder on the backend named (or the simulated device) that gives everything back on a trim and never trims by itself. */
    static UnifiedMemoryManagerBuilder builder(String backend) {
        UnifiedMemoryManagerBuilder builder = UnifiedMemoryManager.builder();
        builder = backend.equals("simulated") ? builder.backend(new SimulatedDiscreteBackend()) : builder.backend(backend);
        return builder.releaseThreshold(0).closeTimeout(Duration.ofSeconds(10)).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO);
    }

    private static UnifiedMemoryManager manager(String backend) {
        return builder(backend).leakDetection(LeakDetectionLevel.PARANOID).build();
    }

    private static UnifiedBuffer floats(UnifiedMemoryManager manager, int bytes) {
        return manager.allocate(DataType.FLOAT32, bytes / 4, DEVICE);
    }

    /**
     * How long a race runs: four seconds, and on a loaded machine (where the users may hold every buffer whenever a
     * compaction looks) longer, until a compaction has moved something, thirty seconds at most.
     */
    record Window(long started, AtomicLong moved) {
        boolean open() {
            long elapsed = System.nanoTime() - started;
            return elapsed < Duration.ofSeconds(4).toNanos() || (moved.get() == 0 && elapsed < Duration.ofSeconds(30).toNanos());
        }
    }

    /** Ends the scenario with exit status 1, saying what failed, unless {@code condition} holds. */
    static void check(boolean condition, String what) {
        if (!condition) {
            System.out.println("FAILED: " + what);
            System.exit(1);
        }
    }

    /** Ends the scenario with exit status 1, the failure's trace printed, if one of its threads failed ({@code what}: who failed). */
    static void checkNoFailure(AtomicReference<Throwable> failure, String what) {
        Throwable thrown = failure.get();
        if (thrown != null) {
            thrown.printStackTrace(System.out);
        }
        check(thrown == null, what + ": " + thrown);
    }

    /**
     * Three threads each keep four large buffers and, over and over, write one, read it back whole, read it through an
     * access or a slice, run an op on it, close it and allocate another, or drop one unclosed (a leak the detector
     * finds); a fourth compacts all the while. Every read must see exactly what its thread wrote.
     */
    private static void usersAndCompactionRace(String backend) throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong moved = new AtomicLong();
        Window until = new Window(System.nanoTime(), moved);
        try (UnifiedMemoryManager manager = manager(backend)) {
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                int thread = t;
                threads.add(Thread.ofPlatform().name("user-" + t).start(() -> {
                    try {
                        useBuffers(manager, new Random(thread), until);
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            threads.add(Thread.ofPlatform().name("compactor").start(() -> {
                try {
                    while (until.open() && failure.get() == null) {
                        for (CompactionReport report : manager.compact()) {
                            moved.addAndGet(report.buffersMoved());
                        }
                        System.gc();
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
            for (Thread thread : threads) {
                thread.join();
            }
        }
        checkNoFailure(failure, "a user or the compactor failed");
        check(moved.get() > 0, "compaction moved no buffer at all");
        System.out.println("buffers moved: " + moved.get());
    }

    /** Writes random bytes over the whole buffer and returns them. */
    private static byte[] writeRandom(UnifiedBuffer buffer, Random random) {
        byte[] data = new byte[(int) buffer.byteSize()];
        random.nextBytes(data);
        buffer.copyFrom(data);
        return data;
    }

    /** Reads the whole buffer back and checks it holds {@code written}. */
    private static void checkWholeRead(UnifiedBuffer buffer, byte[] written) {
        byte[] read = new byte[written.length];
        buffer.copyTo(read);
        check(Arrays.equals(read, written), "a whole read saw other bytes than its thread wrote");
    }

    private static void useBuffers(UnifiedMemoryManager manager, Random random, Window until) {
        UnifiedBuffer[] buffers = new UnifiedBuffer[4];
        byte[][] contents = new byte[4][];
        for (int i = 0; i < buffers.length; i++) {
            buffers[i] = floats(manager, BYTES + 4 * random.nextInt(1 << 18));
            contents[i] = null;
        }
        while (until.open()) {
            int i = random.nextInt(buffers.length);
            UnifiedBuffer buffer = buffers[i];
            int size = (int) buffer.byteSize();
            switch (random.nextInt(7)) {
                case 0 -> contents[i] = writeRandom(buffer, random);
                case 1 -> {
                    if (contents[i] != null) {
                        checkWholeRead(buffer, contents[i]);
                    }
                }
                case 2 -> {
                    if (contents[i] != null) {
                        try (UnifiedBuffer tail = buffer.slice(buffer.elementCount() - 1024, 1024)) {
                            byte[] read = new byte[4096];
                            tail.copyTo(read);
                            check(Arrays.equals(read, Arrays.copyOfRange(contents[i], size - 4096, size)), "a slice saw other bytes");
                        }
                    }
                }
                case 3 -> {
                    if (contents[i] != null) {
                        try (BufferAccess access = buffer.hostAccess(AccessMode.READ)) {
                            MemorySegment bytes = access.segment();
                            int at = random.nextInt(size);
                            check(bytes.get(ValueLayout.JAVA_BYTE, at) == contents[i][at], "a host access saw another byte");
                        }
                    }
                }
                case 4 -> {
                    manager.ops().fill(buffer, 0);
                    contents[i] = new byte[size];
                }
                case 5 -> {
                    buffer.close();
                    buffers[i] = floats(manager, BYTES + 4 * random.nextInt(1 << 18));
                    contents[i] = null;
                }
                default -> {
                    if (random.nextInt(8) == 0) {
                        buffers[i] = floats(manager, BYTES); // the old one is dropped unclosed
                        contents[i] = null;
                    }
                }
            }
        }
        for (UnifiedBuffer buffer : buffers) {
            buffer.close();
        }
    }

    /**
     * No compactor: under a cap that three threads' buffers nearly fill, their allocations run out of memory and compact
     * (compact-on-out-of-memory), moving the other threads' buffers while those write, read and access them. Each thread
     * replaces a buffer by allocating the new one before closing the old; a refusal leaves the old one in use. Every
     * read must see exactly what its thread wrote, and some allocation must have compacted.
     */
    private static void allocationsCompactUnderUsers(String backend) throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong moved = new AtomicLong();
        Window until = new Window(System.nanoTime(), moved);
        AtomicLong refused = new AtomicLong();
        MemoryEventListener compactions = new MemoryEventListener() {
            @Override
            public void compacted(CompactionReport report) {
                moved.addAndGet(report.buffersMoved());
            }
        };
        try (UnifiedMemoryManager manager = builder(backend).maxPoolSize(64L << 20).eventListener(compactions).build()) {
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                int thread = t;
                threads.add(Thread.ofPlatform().name("user-" + t).start(() -> {
                    try {
                        replaceUnderPressure(manager, new Random(thread), until, refused);
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            for (Thread thread : threads) {
                thread.join();
            }
        }
        checkNoFailure(failure, "a user failed");
        check(moved.get() > 0, "no allocation compacted (refused " + refused.get() + ")");
        System.out.println("buffers moved: " + moved.get() + ", allocations refused: " + refused.get());
    }

    private static void replaceUnderPressure(UnifiedMemoryManager manager, Random random, Window until, AtomicLong refused) {
        UnifiedBuffer[] buffers = new UnifiedBuffer[4];
        byte[][] contents = new byte[4][];
        for (int i = 0; i < buffers.length; i++) {
            buffers[i] = floats(manager, BYTES);
            contents[i] = new byte[BYTES];
            buffers[i].copyFrom(contents[i]);
        }
        while (until.open()) {
            int i = random.nextInt(buffers.length);
            UnifiedBuffer buffer = buffers[i];
            int size = (int) buffer.byteSize();
            switch (random.nextInt(4)) {
                case 0 -> contents[i] = writeRandom(buffer, random);
                case 1 -> checkWholeRead(buffer, contents[i]);
                case 2 -> {
                    try (BufferAccess access = buffer.hostAccess(AccessMode.READ)) {
                        int at = random.nextInt(size);
                        check(access.segment().get(ValueLayout.JAVA_BYTE, at) == contents[i][at], "a host access saw another byte");
                    }
                }
                default -> {
                    int bytes = BYTES + 4 * random.nextInt(1 << 19);
                    try {
                        UnifiedBuffer replacement = floats(manager, bytes);
                        byte[] data = new byte[bytes];
                        random.nextBytes(data);
                        replacement.copyFrom(data);
                        buffer.close();
                        buffers[i] = replacement;
                        contents[i] = data;
                    } catch (DeviceOutOfMemoryException e) {
                        refused.incrementAndGet();
                    }
                }
            }
        }
        for (UnifiedBuffer buffer : buffers) {
            buffer.close();
        }
    }

    /** One thread compacts over and over while the manager closes under it: the compaction stops, nothing crashes. */
    private static void managerClosedWhileCompacting(String backend) throws Exception {
        UnifiedMemoryManager manager = manager(backend);
        List<UnifiedBuffer> kept = new ArrayList<>();
        for (int round = 0; round < 4; round++) {
            for (int i = 0; i < 12; i++) {
                UnifiedBuffer buffer = manager.allocate(BYTES, DEVICE);
                buffer.copyFrom(new byte[] {(byte) i});
                if (i % 3 == 0) {
                    kept.add(buffer);
                } else {
                    buffer.close();
                }
            }
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread compactor = Thread.ofPlatform().name("compactor").start(() -> {
            try {
                while (true) {
                    manager.compact(DEVICE);
                }
            } catch (IllegalStateException closed) {
                if (!closed.getMessage().contains("closed")) {
                    failure.set(closed);
                }
            } catch (Throwable e) {
                failure.set(e);
            }
        });
        Thread.sleep(200);
        manager.close();
        compactor.join(Duration.ofSeconds(30));
        check(!compactor.isAlive(), "the compaction did not stop once the manager closed");
        check(failure.get() == null, "the compaction failed otherwise than closed: " + failure.get());
        for (UnifiedBuffer buffer : kept) {
            check(buffer.isClosed(), "a buffer is still open after its manager closed");
        }
    }
    /**
     * Four threads keep buffers, drop others unclosed (leaks the detector collects) and, over and over, ask for more than
     * fits, so that their allocations compact, while the manager closes under them: each thread ends on the closed
     * manager, having read only what it wrote, and nothing crashes.
     */
    private static void managerClosedWhileRunningOutOfMemory(String backend) throws Exception {
        UnifiedMemoryManager manager = builder(backend).maxPoolSize(64L << 20).leakDetection(LeakDetectionLevel.PARANOID).build();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong refused = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) { // every thread's buffers first: their allocations must not meet the others' requests
            Random random = new Random(t);
            List<byte[]> contents = new ArrayList<>();
            List<UnifiedBuffer> kept = keptAndDropped(manager, random, contents);
            threads.add(Thread.ofPlatform().name("user-" + t).unstarted(() -> {
                try {
                    runOutOfMemoryUntilClosed(manager, random, kept, contents, refused);
                } catch (IllegalStateException closed) {
                    if (!manager.isClosed()) {
                        failure.compareAndSet(null, closed);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        threads.forEach(Thread::start);
        Thread.sleep(500);
        manager.close();
        for (Thread thread : threads) {
            thread.join(Duration.ofSeconds(30));
            check(!thread.isAlive(), "a thread did not end once the manager closed");
        }
        checkNoFailure(failure, "a thread failed otherwise than closed");
        check(refused.get() > 0, "no allocation ran out of memory");
    }

    /** Four written buffers: two kept (their contents added to {@code contents}), two dropped unclosed. */
    private static List<UnifiedBuffer> keptAndDropped(UnifiedMemoryManager manager, Random random, List<byte[]> contents) {
        List<UnifiedBuffer> kept = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            UnifiedBuffer buffer = floats(manager, BYTES);
            byte[] data = new byte[BYTES];
            random.nextBytes(data);
            buffer.copyFrom(data);
            if (i % 2 == 0) {
                kept.add(buffer);
                contents.add(data);
            } // else dropped unclosed: a leak, collected while compactions run
        }
        return kept;
    }

    private static void runOutOfMemoryUntilClosed(UnifiedMemoryManager manager, Random random, List<UnifiedBuffer> kept,
                                                  List<byte[]> contents, AtomicLong refused) {
        while (true) {
            Optional<UnifiedBuffer> roomy = manager.tryAllocate(DataType.FLOAT32, (24 << 20) / 4, DEVICE);
            if (roomy.isPresent()) {
                roomy.get().copyFrom(new byte[] {1, 2, 3});
                roomy.get().close();
            } else {
                refused.incrementAndGet();
            }
            int i = random.nextInt(kept.size());
            byte[] read = new byte[BYTES];
            kept.get(i).copyTo(read);
            check(Arrays.equals(read, contents.get(i)), "a read saw other bytes than its thread wrote");
            if (random.nextInt(8) == 0) {
                System.gc();
            }
        }
    }
}
