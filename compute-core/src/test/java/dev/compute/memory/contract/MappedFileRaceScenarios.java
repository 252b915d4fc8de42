package dev.compute.memory.contract;

import dev.compute.memory.AccessMode;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MappedFileTruncatedException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Comparator;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Issue 25's adversarial pass: what could crash or hang around mapped files and file paths, each a {@code main} run in
 * a JVM of its own ({@code args}: the backend's name or {@code simulated}, then the scenario). Prints {@code OK <name>}
 * and exits 0 when the rule held; a failed check exits 1; a hang is killed by the parent; a crash shows as one.
 */
public final class MappedFileRaceScenarios {

    private MappedFileRaceScenarios() {}

    public static void main(String[] args) throws Throwable {
        String backend = args[0];
        String name = args[1];
        Path dir = Files.createTempDirectory("issue25-scenario");
        try {
            switch (name) {
                case "compiledCopiesThroughViewsOpsAndOtherMappings" -> compiledCopiesThroughViewsOpsAndOtherMappings(backend, dir);
                case "accessesAndOtherManagersMappingsAfterTruncation" -> accessesAndOtherManagersMappingsAfterTruncation(backend, dir);
                case "aPipeRenamedOverTheFileBetweenTheCheckAndTheOpen" -> aPipeRenamedOverTheFileBetweenTheCheckAndTheOpen(backend, dir);
                default -> throw new IllegalArgumentException("no scenario " + name);
            }
        } finally {
            try (var files = Files.walk(dir)) {
                for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(file);
                }
            }
        }
        System.out.println("OK " + name);
        System.exit(0);
    }

    private static UnifiedMemoryManager manager(String backend) {
        UnifiedMemoryManagerBuilder builder = UnifiedMemoryManager.builder();
        builder = backend.equals("simulated") ? builder.backend(new SimulatedDiscreteBackend()) : builder.backend(backend);
        return builder.stagingBufferSize(64 << 10).closeTimeout(Duration.ofSeconds(5)).leakDetection(LeakDetectionLevel.SIMPLE)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build();
    }

    /**
     * Copies whose other side is a mapping in a form the scenario did not warm up (a slice of a view, a view
     * passed to the async forms, a copy between two mapped files, an op on a slice of a mapping), each run until
     * compiled, then the file truncated: each must fail with {@link MappedFileTruncatedException}, never a raw
     * {@link InternalError}, every time.
     */
    static void compiledCopiesThroughViewsOpsAndOtherMappings(String backend, Path dir) throws Exception {
        int n = (1 << 20) / 4;
        Path file = Files.write(dir.resolve("shrinking.bin"), new byte[n * 4]);
        Path other = Files.write(dir.resolve("other.bin"), new byte[n * 4]);
        boolean javaOps = backend.equals("cpu") || backend.equals("simulated") || backend.equals("cuda");
        try (UnifiedMemoryManager manager = manager(backend);
             UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_WRITE);
             UnifiedBuffer target = manager.mapFile(other, DataType.FLOAT32, FileMapMode.READ_WRITE);
             UnifiedBuffer host = manager.allocate(DataType.FLOAT32, 256, MemoryLocation.HOST);
             UnifiedBuffer device = manager.allocate(DataType.FLOAT32, 256, MemoryLocation.DEVICE)) {
            long tailAt = (long) (n - 256) * 4;
            MemorySegment tail = mapped.hostView().asSlice(tailAt, 1024);
            UnifiedBuffer tailSlice = mapped.slice(n - 256, 256);
            for (int i = 0; i < 30_000; i++) {
                host.copyFrom(0, tail);
                host.copyTo(0, tail);
                device.copyFromAsync(0, tail).join();
                device.copyToAsync(0, tail).join();
                target.copyFrom(mapped, tailAt, 0, 1024);
                if (javaOps) {
                    manager.ops().sum(tailSlice);
                }
            }
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                channel.truncate(4096);
            }
            for (int i = 0; i < 20; i++) {
                expectTruncated(() -> host.copyFrom(0, tail), file, "a compiled copy from a slice of a view");
                expectTruncated(() -> host.copyTo(0, tail), file, "a compiled copy into a slice of a view");
                expectTruncated(() -> device.copyFromAsync(0, tail).join(), file, "a compiled async copy from a view");
                expectTruncated(() -> device.copyToAsync(0, tail).join(), file, "a compiled async copy into a view");
                expectTruncated(() -> target.copyFrom(mapped, tailAt, 0, 1024), file, "a compiled copy between two mapped files");
                if (javaOps) {
                    expectTruncated(() -> manager.ops().sum(tailSlice), file, "a compiled op on a slice of the mapping");
                }
            }
            tailSlice.close();
        }
    }

    /**
     * The other segments the library hands out over a mapping (a shared host access, a device access's segment on
     * host memory) and a view of another manager's mapping, given to copies of DEVICE memory after the truncation.
     */
    static void accessesAndOtherManagersMappingsAfterTruncation(String backend, Path dir) throws Exception {
        int n = (1 << 20) / 4;
        Path file = Files.write(dir.resolve("shrinking.bin"), new byte[n * 4]);
        try (UnifiedMemoryManager owner = manager(backend);
             UnifiedMemoryManager other = manager(backend);
             UnifiedBuffer mapped = owner.mapFile(file, DataType.FLOAT32, FileMapMode.READ_WRITE);
             UnifiedBuffer device = other.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
            other.ops().fill(device, 1.0);
            MemorySegment ownersView = mapped.readOnlyHostView();
            try (var shared = mapped.sharedHostAccess(AccessMode.READ_WRITE)) {
                try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                    channel.truncate(4096);
                }
                expectTruncated(() -> device.copyFrom(0, ownersView), file, "a copy from another manager's mapping");
                expectTruncated(() -> device.copyTo(0, shared.segment()), file, "a copy into a shared host access");
                expectTruncated(() -> device.copyFromAsync(0, shared.segment()).join(), file, "an async copy from a shared host access");
            }
            if (!backend.equals("opencl")) { // OpenCL gives no device access to HOST memory
                try (var access = mapped.deviceAccess(AccessMode.READ)) {
                    MemorySegment bytes = access.segment();
                    expectTruncated(() -> device.copyFrom(0, bytes), file, "a copy from a device access's segment");
                }
            }
        }
    }

    /**
     * {@code mapFile} and {@code AllocationTrace.writeTo} check that the path is a regular file, then open it: a named
     * pipe renamed over the path between the two (a file replaced by rename, as the mapFile documentation advises)
     * is opened, and the open waits for the pipe's other end for ever. Every call must end within seconds.
     */
    static void aPipeRenamedOverTheFileBetweenTheCheckAndTheOpen(String backend, Path dir) throws Exception {
        Path target = dir.resolve("data.bin");
        Files.write(target, new byte[4096]);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong callStarted = new AtomicLong();
        AtomicLong calls = new AtomicLong();
        Thread swapper = Thread.ofPlatform().daemon().start(() -> {
            try {
                for (int i = 0; !stop.get(); i++) {
                    Path pipe = dir.resolve("pipe-" + i);
                    if (new ProcessBuilder("mkfifo", pipe.toString()).start().waitFor() != 0) {
                        throw new IllegalStateException("mkfifo failed");
                    }
                    Files.move(pipe, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
                    Path regular = Files.write(dir.resolve("regular-" + i), new byte[4096]);
                    Files.move(regular, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
                }
            } catch (Exception e) {
                e.printStackTrace();
            }
        });
        Thread watchdog = Thread.ofPlatform().daemon().start(() -> {
            while (!stop.get()) {
                long started = callStarted.get();
                if (started != 0 && System.nanoTime() - started > 10_000_000_000L) {
                    System.out.println("HUNG: a call on " + target + " did not return within 10 s, after " + calls.get() + " calls");
                    Thread.getAllStackTraces().forEach((thread, stack) -> {
                        if (thread.getName().equals("main")) {
                            for (StackTraceElement frame : stack) {
                                System.out.println("    at " + frame);
                            }
                        }
                    });
                    System.exit(3);
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        try (UnifiedMemoryManager manager = manager(backend)) {
            long end = System.nanoTime() + Duration.ofSeconds(40).toNanos();
            while (System.nanoTime() < end) {
                callStarted.set(System.nanoTime());
                try {
                    manager.mapFile(target, DataType.INT8, FileMapMode.READ_ONLY).close();
                } catch (IllegalArgumentException | NoSuchFileException refused) {
                    // a pipe seen by the check, or the moment between the renames
                }
                calls.incrementAndGet();
                callStarted.set(0);
            }
        } finally {
            stop.set(true);
            swapper.join(10_000); // it may be between two renames: the directory is deleted after it has stopped
        }
        watchdog.interrupt();
    }

    private static void expectTruncated(Runnable use, Path file, String what) {
        try {
            use.run();
        } catch (MappedFileTruncatedException expected) {
            check(expected.file().equals(file), what + " named another file: " + expected.getMessage());
            return;
        } catch (Throwable other) {
            throw new AssertionError(what + " failed with " + other + ", not MappedFileTruncatedException", other);
        }
        throw new AssertionError(what + " did not fail on a file truncated under its mapping");
    }

    private static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }
}
