package dev.compute.memory.contract;

import static dev.compute.memory.contract.CompactionScenarios.builder;
import static dev.compute.memory.contract.CompactionScenarios.check;
import static dev.compute.memory.contract.CompactionScenarios.checkNoFailure;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Compaction called from where callers really call it, each a {@code main} that {@link CompactionCallerSafetyContractTest}
 * runs in a JVM of its own ({@code args}: the backend's name, or {@code simulated}, then the scenario): several
 * compactions, trims and cache releases at once among users, and compaction from an out-of-memory handler. A scenario
 * prints {@code OK <name>} and exits 0 when every check held; a failed check exits 1; a hang is killed by the parent.
 */
public final class CompactionCallerScenarios {

    private static final int BYTES = 3 << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private CompactionCallerScenarios() {}

    public static void main(String[] args) throws Throwable {
        String backend = args[0];
        String name = args[1];
        switch (name) {
            case "compactionsTrimsAndReleasesAtOnce" -> compactionsTrimsAndReleasesAtOnce(backend);
            case "outOfMemoryHandlersThatCompact" -> outOfMemoryHandlersThatCompact(backend);
            default -> throw new IllegalArgumentException("no scenario " + name);
        }
        System.out.println("OK " + name);
        System.exit(0);
    }

    /**
     * Two threads compact, one trims and one gives the cache back, all the while, as three users write, read back
     * and replace large buffers at two locations (and drop some, which the leak detector finds): every read must see
     * what its thread wrote, and once all is closed nothing may be left allocated.
     */
    private static void compactionsTrimsAndReleasesAtOnce(String backend) throws Exception {
        long until = System.nanoTime() + Duration.ofSeconds(4).toNanos();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        try (UnifiedMemoryManager manager = builder(backend).leakDetection(LeakDetectionLevel.PARANOID).build()) {
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                int thread = t;
                threads.add(Thread.ofPlatform().name("user-" + t).start(() -> {
                    try {
                        useBuffers(manager, new Random(thread), thread % 2 == 0 ? DEVICE : MemoryLocation.HOST, until);
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            List<Runnable> maintenance = List.of(manager::compact, manager::compact, manager::trim, manager::releaseCachedMemory);
            for (Runnable task : maintenance) {
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        while (System.nanoTime() < until && failure.get() == null) {
                            task.run();
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            for (Thread thread : threads) {
                thread.join();
            }
            checkNoFailure(failure, "a user or a maintenance thread failed");
            for (int i = 0; i < 3 && manager.liveBuffers().stream().anyMatch(b -> b.location() == DEVICE || b.location() == MemoryLocation.HOST); i++) {
                System.gc(); // the dropped buffers
                Thread.sleep(200);
            }
            for (MemoryLocation location : List.of(DEVICE, MemoryLocation.HOST)) {
                check(manager.statistics(location).allocatedBytes() == 0,
                        location + " still has allocated bytes once every buffer is closed or found: " + manager.statistics(location));
            }
        }
    }

    private static void useBuffers(UnifiedMemoryManager manager, Random random, MemoryLocation location, long until) {
        UnifiedBuffer[] buffers = new UnifiedBuffer[4];
        byte[][] contents = new byte[4][];
        for (int i = 0; i < buffers.length; i++) {
            buffers[i] = manager.allocate(BYTES + 4096 * random.nextInt(64), location);
        }
        while (System.nanoTime() < until) {
            int i = random.nextInt(buffers.length);
            UnifiedBuffer buffer = buffers[i];
            switch (random.nextInt(4)) {
                case 0 -> {
                    byte[] data = new byte[(int) buffer.byteSize()];
                    random.nextBytes(data);
                    buffer.copyFrom(data);
                    contents[i] = data;
                }
                case 1 -> {
                    if (contents[i] != null) {
                        byte[] read = new byte[(int) buffer.byteSize()];
                        buffer.copyTo(read);
                        check(Arrays.equals(read, contents[i]), "a read saw other bytes than its thread wrote");
                    }
                }
                case 2 -> {
                    if (random.nextInt(6) != 0) {
                        buffer.close();
                    } // else dropped unclosed: a leak the detector finds
                    buffers[i] = manager.allocate(BYTES + 4096 * random.nextInt(64), location);
                    contents[i] = null;
                }
                default -> {
                    if (contents[i] != null) {
                        MemorySegment view = buffer.hostView();
                        int at = random.nextInt(contents[i].length);
                        check(view.get(ValueLayout.JAVA_BYTE, at) == contents[i][at], "a view saw another byte");
                        buffer.close(); // a view lasts until its buffer closes
                        buffers[i] = manager.allocate(BYTES + 4096 * random.nextInt(64), location);
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
     * An out-of-memory handler that compacts, the natural thing to try before giving up, on two threads whose host
     * views of device buffers need host mirrors where the pinned pool is full: each mirror is asked for under its
     * buffer's monitor, and a compaction takes every movable buffer's. Both must come back (the views fail or succeed),
     * not wait on each other forever.
     */
    private static void outOfMemoryHandlersThatCompact(String backend) throws Exception {
        CyclicBarrier bothInHandlers = new CyclicBarrier(2);
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        UnifiedMemoryManager manager = builder(backend).maxPinnedSize(8L << 20).outOfMemoryRetries(1)
                .outOfMemoryHandler((location, requested, attempt, failure) -> {
                    try {
                        bothInHandlers.await(5, TimeUnit.SECONDS);
                    } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
                        // the other thread did not need memory at the same moment: compact all the same
                    }
                    self.get().compact();
                    return false;
                }).build();
        self.set(manager);
        UnifiedBuffer pinned = manager.allocate(6L << 20, MemoryLocation.PINNED);
        List<UnifiedBuffer> devices = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            UnifiedBuffer buffer = manager.allocate(BYTES, DEVICE);
            buffer.copyFrom(new byte[] {(byte) i});
            devices.add(buffer);
        }
        devices.get(2).close();
        devices.get(3).close();
        List<Thread> viewers = new ArrayList<>();
        for (UnifiedBuffer buffer : List.of(devices.get(4), devices.get(5))) {
            viewers.add(Thread.ofPlatform().daemon().start(() -> {
                try {
                    buffer.hostView();
                } catch (RuntimeException outOfPinnedMemory) {
                    // the handler gave up: that is an answer
                }
            }));
        }
        for (Thread viewer : viewers) {
            viewer.join(Duration.ofSeconds(30));
            for (StackTraceElement frame : viewer.getStackTrace()) {
                System.out.println("\tat " + frame);
            }
            check(!viewer.isAlive(), "a host view whose mirror ran out of memory never came back: its out-of-memory"
                    + " handler's compaction waits on the other's buffer, which waits on its own");
        }
        pinned.close();
        manager.close();
    }
}
