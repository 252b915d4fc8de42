package dev.compute.memory.contract;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;

import dev.compute.memory.AccessMode;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MappedFileTruncatedException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.ViewScope;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * What could crash the JVM around a mapped file, each a {@code main} that {@link MappedFileSafetyContractTest} runs in a
 * JVM of its own on one backend ({@code args}: the backend's name, or {@code simulated}, then the scenario): a write
 * into a read-only mapping is a {@code SIGSEGV}, a read of an unmapped or truncated one a {@code SIGSEGV} or
 * {@code SIGBUS}. A scenario prints {@code OK <name>} and exits 0 when the rule held; a failed check exits 1; a crash
 * shows as one.
 */
public final class MappedFileScenarios {

    private static final int FILE_BYTES = 4 << 20;

    private MappedFileScenarios() {}

    public static void main(String[] args) throws Throwable {
        String backend = args[0];
        String name = args[1];
        Path dir = Files.createTempDirectory("mapped-file-scenario");
        try {
            switch (name) {
                case "readOnlyMappingRefusesEveryWrite" -> readOnlyMappingRefusesEveryWrite(backend, dir);
                case "closedWhileAnotherThreadReadsThroughAView" -> closedWhileAnotherThreadReadsThroughAView(backend, dir);
                case "managerClosedWhileAnotherThreadReadsThroughAView" -> managerClosedWhileAnotherThreadReadsThroughAView(backend, dir);
                case "sharedViewEndsWithTheBufferWhileAnotherThreadReads" -> sharedViewEndsWithTheBufferWhileAnotherThreadReads(backend, dir);
                case "truncatedWhileMapped" -> truncatedWhileMapped(backend, dir);
                case "copiesThroughTheMappingsOwnViewsAfterTruncation" -> copiesThroughTheMappingsOwnViewsAfterTruncation(backend, dir);
                case "truncatedThenDeletedOrReplaced" -> truncatedThenDeletedOrReplaced(backend, dir);
                case "compiledCopiesOfATruncatedFile" -> compiledCopiesOfATruncatedFile(backend, dir);
                case "namedPipesAreRefusedBeforeTheyAreOpened" -> namedPipesAreRefusedBeforeTheyAreOpened(backend, dir);
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

    private static UnifiedMemoryManager manager(String backend, Duration closeTimeout) {
        UnifiedMemoryManagerBuilder builder = UnifiedMemoryManager.builder();
        builder = backend.equals("simulated") ? builder.backend(new SimulatedDiscreteBackend()) : builder.backend(backend);
        return builder.stagingBufferSize(64 << 10).closeTimeout(closeTimeout).leakDetection(LeakDetectionLevel.SIMPLE)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build();
    }

    /** A file of {@link #FILE_BYTES} whose byte {@code i} is {@code i * 31 % 127}, so any byte read can be checked. */
    private static Path patternFile(Path dir) throws Exception {
        byte[] content = new byte[FILE_BYTES];
        for (int i = 0; i < content.length; i++) {
            content[i] = expected(i);
        }
        return Files.write(dir.resolve("pattern.bin"), content);
    }

    private static byte expected(long i) {
        return (byte) (i * 31 % 127);
    }

    /**
     * Every way to write a buffer, on a read-only mapping: each refused before it touches the memory. On the OpenCL
     * backend a kernel or a read from the device into the mapping would be native code writing it, which ends the process.
     */
    static void readOnlyMappingRefusesEveryWrite(String backend, Path dir) throws Exception {
        Path file = patternFile(dir);
        byte[] before = Files.readAllBytes(file);
        int n = FILE_BYTES / 4;
        try (UnifiedMemoryManager manager = manager(backend, Duration.ofSeconds(5));
             UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY);
             UnifiedBuffer device = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE);
             UnifiedBuffer host = manager.allocate(DataType.FLOAT32, n, MemoryLocation.HOST)) {
            manager.ops().fill(device, 1.0);
            host.copyFrom(new float[n]);
            refused(() -> mapped.copyFrom(new float[] {1f}), "copyFrom(float[])");
            refused(() -> mapped.copyFrom(0, MemorySegment.ofArray(new byte[4])), "copyFrom(MemorySegment)");
            refused(() -> mapped.copyFromAsync(0, MemorySegment.ofArray(new byte[4])).join(), "copyFromAsync");
            refused(() -> mapped.copyFrom(device), "copyFrom(a DEVICE buffer)");
            refused(() -> mapped.copyFrom(host), "copyFrom(a HOST buffer)");
            refused(mapped::hostView, "hostView()");
            for (AccessMode mode : new AccessMode[] {AccessMode.WRITE, AccessMode.READ_WRITE}) {
                refused(() -> mapped.hostAccess(mode).close(), "hostAccess(" + mode + ")");
                refused(() -> mapped.sharedHostAccess(mode).close(), "sharedHostAccess(" + mode + ")");
                refused(() -> mapped.deviceAccess(mode).close(), "deviceAccess(" + mode + ")");
            }
            refused(() -> manager.ops().fill(mapped, 2.0), "ops().fill");
            refused(() -> manager.ops().scale(mapped, 2.0), "ops().scale");
            refused(() -> manager.ops().axpy(1.0, device, mapped), "ops().axpy into it");
            try (UnifiedBuffer slice = mapped.slice(16, 16)) {
                refused(() -> manager.ops().fill(slice, 2.0), "ops().fill of a slice");
                refused(() -> slice.copyFrom(device, 0, 0, 64), "copyFrom into a slice");
            }
            try {
                mapped.readOnlyHostView().set(JAVA_BYTE, 0, (byte) 1);
                throw new AssertionError("a write through a read-only view succeeded");
            } catch (IllegalArgumentException refusedByTheFfmApi) {
                // "Attempt to write a read-only segment"
            }
            device.copyFrom(mapped);
            float[] back = new float[n];
            device.copyTo(back);
            check(Arrays.equals(back, floats(before)), "the mapped file still reads as it was");
        }
        check(Arrays.equals(Files.readAllBytes(file), before), "the file is unchanged");
    }

    /**
     * A reader thread reads through its view, taken in a view scope, while the main thread closes the buffer: the file
     * stays mapped under the view, every byte it reads is the file's, and once the reader's scope ends its view ends and
     * the file is unmapped. (A view taken outside a scope by a thread that did not map the file is shared: the close
     * ends it at once, see {@link #sharedViewEndsWithTheBufferWhileAnotherThreadReads}.)
     */
    static void closedWhileAnotherThreadReadsThroughAView(String backend, Path dir) throws Throwable {
        Path file = patternFile(dir);
        try (UnifiedMemoryManager manager = manager(backend, Duration.ofSeconds(5))) {
            UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
            CountDownLatch viewing = new CountDownLatch(1);
            CountDownLatch closed = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread reader = Thread.ofPlatform().name("reader").start(() -> {
                try {
                    MemorySegment view;
                    try (ViewScope scope = ViewScope.open()) {
                        view = mapped.readOnlyHostView();
                        viewing.countDown();
                        while (closed.getCount() > 0) {
                            readAll(view);
                        }
                        readAll(view);
                        check(manager.mappedFileStatistics().openMappings() == 1, "the file stays mapped while the view is open");
                    }
                    expectEnded(() -> view.get(JAVA_BYTE, 0), "a read through the view after its scope");
                } catch (Throwable t) {
                    failure.set(t);
                    viewing.countDown();
                }
            });
            viewing.await();
            mapped.close();
            closed.countDown();
            reader.join();
            if (failure.get() != null) {
                throw failure.get();
            }
            check(manager.mappedFileStatistics().openMappings() == 0, "unmapped once the view ended");
        }
    }

    /**
     * The manager closes while a reader that never calls in reads through its view: the close waits its timeout and
     * keeps the mapping rather than unmap it under the reader, which reads on. Kept memory stays until the process ends,
     * as a pool's does; a mapping goes earlier if its buffer is closed once the reader is done.
     */
    static void managerClosedWhileAnotherThreadReadsThroughAView(String backend, Path dir) throws Throwable {
        Path file = patternFile(dir);
        UnifiedMemoryManager manager = manager(backend, Duration.ofMillis(300));
        UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
        CountDownLatch viewing = new CountDownLatch(1);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread reader = Thread.ofPlatform().name("reader").start(() -> {
            try (ViewScope scope = ViewScope.open()) {
                MemorySegment view = mapped.readOnlyHostView();
                viewing.countDown();
                while (!stop.get()) {
                    readAll(view);
                }
            } catch (Throwable t) {
                failure.set(t);
                viewing.countDown();
            }
        });
        viewing.await();
        manager.close();
        check(mapped.isClosed(), "the buffer is closed with its manager");
        check(manager.mappedFileStatistics().openMappings() == 1, "the close kept the mapping the reader still reads");
        Thread.sleep(200); // the reader reads on, after the close
        stop.set(true);
        reader.join();
        if (failure.get() != null) {
            throw failure.get();
        }
        check(manager.mappedFileStatistics().openMappings() == 1, "still mapped: nothing closed the buffer");
        mapped.close();
        check(manager.mappedFileStatistics().openMappings() == 0, "unmapped once closed with its reader gone");
    }

    /**
     * A reader thread that did not map the file reads through a view taken outside any scope (a shared one) while the
     * main thread closes the buffer: the close ends the view at once and unmaps the file; the reader's next read fails
     * with an {@link IllegalStateException}, never a fault, and every byte it read before was the file's.
     */
    static void sharedViewEndsWithTheBufferWhileAnotherThreadReads(String backend, Path dir) throws Throwable {
        Path file = patternFile(dir);
        try (UnifiedMemoryManager manager = manager(backend, Duration.ofSeconds(5))) {
            UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
            CountDownLatch viewing = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread reader = Thread.ofPlatform().name("reader").start(() -> {
                MemorySegment view = mapped.readOnlyHostView();
                viewing.countDown();
                try {
                    while (true) {
                        readAll(view);
                    }
                } catch (IllegalStateException ended) {
                    // the buffer was closed: the view ended under the loop, cleanly
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            viewing.await();
            Thread.sleep(20);
            mapped.close();
            check(manager.mappedFileStatistics().openMappings() == 0, "unmapped at the close, whatever the reader does");
            reader.join(10_000);
            check(!reader.isAlive(), "the reader stopped");
            if (failure.get() != null) {
                throw failure.get();
            }
        }
    }

    /**
     * The file is truncated under its mapping, as another process might: the kernel drops the pages past the new end
     * from every mapping of it. Copies that meet the missing bytes fail with {@link MappedFileTruncatedException}, the
     * bytes still in the file read as before, a view's read past the end gets the JVM's {@link InternalError}, and the
     * JVM lives on. Ops are tried where the backend runs them in Java (CPU, simulated): OpenCL kernels read the mapping
     * natively, which this cannot guard (see {@code mapFile}), and CUDA's refuse HOST memory.
     */
    static void truncatedWhileMapped(String backend, Path dir) throws Exception {
        Random random = new Random(3);
        int n = (1 << 20) / 4;
        ByteBuffer content = ByteBuffer.allocate(n * 4).order(ByteOrder.nativeOrder());
        for (int i = 0; i < n; i++) {
            content.putFloat(random.nextFloat());
        }
        Path file = Files.write(dir.resolve("shrinking.bin"), content.array());
        float[] values = floats(content.array());
        try (UnifiedMemoryManager manager = manager(backend, Duration.ofSeconds(5));
             UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY);
             UnifiedBuffer device = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
            device.copyFrom(mapped);
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                channel.truncate(4096);
            }
            expectTruncated(() -> device.copyFrom(mapped), file, "a copy to DEVICE memory");
            expectTruncated(() -> mapped.copyTo(new float[n]), file, "a copy to an array");
            float[] head = new float[1024];
            mapped.copyTo(head);
            check(Arrays.equals(head, Arrays.copyOf(values, 1024)), "the bytes still in the file read as before");
            if (backend.equals("cpu") || backend.equals("simulated")) {
                expectTruncated(() -> manager.ops().sum(mapped), file, "ops().sum");
            }
            MemorySegment view = mapped.readOnlyHostView();
            try {
                view.get(JAVA_FLOAT, (long) (n - 1) * 4);
                throw new AssertionError("a read past the file's end through a view succeeded");
            } catch (InternalError faultCaughtByTheJvm) {
                // "a fault occurred in an unsafe memory access operation"
            }
        }
    }

    /**
     * The file is truncated under its mapping and then deleted, or another file of the full size renamed over it: its
     * name no longer says how long the mapped file is, but copies that meet the missing bytes still fail with
     * {@link MappedFileTruncatedException} naming it, not with the JVM's {@link InternalError}.
     */
    static void truncatedThenDeletedOrReplaced(String backend, Path dir) throws Exception {
        int n = (1 << 20) / 4;
        Path deleted = Files.write(dir.resolve("deleted.bin"), new byte[n * 4]);
        Path replaced = Files.write(dir.resolve("replaced.bin"), new byte[n * 4]);
        try (UnifiedMemoryManager manager = manager(backend, Duration.ofSeconds(5));
             UnifiedBuffer gone = manager.mapFile(deleted, DataType.FLOAT32, FileMapMode.READ_WRITE);
             UnifiedBuffer overwritten = manager.mapFile(replaced, DataType.FLOAT32, FileMapMode.READ_ONLY);
             UnifiedBuffer device = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE);
             UnifiedBuffer host = manager.allocate(DataType.FLOAT32, n, MemoryLocation.HOST)) {
            for (Path file : new Path[] {deleted, replaced}) {
                try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                    channel.truncate(4096);
                }
            }
            Files.delete(deleted);
            Files.move(Files.write(dir.resolve("new.bin"), new byte[n * 4]), replaced, StandardCopyOption.REPLACE_EXISTING);
            for (UnifiedBuffer mapped : new UnifiedBuffer[] {gone, overwritten}) {
                Path file = mapped.mappedFile();
                expectTruncated(() -> device.copyFrom(mapped), file, "a copy to DEVICE memory of " + file);
                expectTruncated(() -> mapped.copyTo(new float[n]), file, "a copy to an array of " + file);
                expectTruncated(() -> host.copyFrom(mapped), file, "a copy to HOST memory of " + file);
                expectTruncated(() -> device.copyFrom(0, mapped.readOnlyHostView()), file, "a copy of a view of " + file);
                if (backend.equals("cpu") || backend.equals("simulated")) {
                    expectTruncated(() -> manager.ops().sum(mapped), file, "ops().sum of " + file);
                }
            }
            expectTruncated(() -> gone.copyFrom(device), deleted, "a copy from DEVICE memory into the deleted file");
            float[] head = new float[1024];
            gone.copyTo(head); // what is left of the file still reads
        }
    }

    /**
     * The segments the library hands out over a mapping (views and host accesses) passed to copies of other buffers,
     * after the file was truncated: a backend must know them as a mapping and copy them by Java, so the copy fails with
     * {@link MappedFileTruncatedException}; handed to a driver (OpenCL's {@code clEnqueueWriteBuffer}, CUDA's pageable
     * copy) the fault would end the process. Into a read-write mapping's view too, and the async forms.
     */
    static void copiesThroughTheMappingsOwnViewsAfterTruncation(String backend, Path dir) throws Exception {
        int n = (1 << 20) / 4;
        Path file = Files.write(dir.resolve("shrinking.bin"), new byte[n * 4]);
        try (UnifiedMemoryManager manager = manager(backend, Duration.ofSeconds(5));
             UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_WRITE);
             UnifiedBuffer device = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE);
             UnifiedBuffer host = manager.allocate(DataType.FLOAT32, n, MemoryLocation.HOST)) {
            manager.ops().fill(device, 1.0);
            MemorySegment readOnly = mapped.readOnlyHostView();
            MemorySegment writable = mapped.hostView();
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                channel.truncate(4096);
            }
            expectTruncated(() -> device.copyFrom(0, readOnly), file, "a copy to DEVICE memory from the read-only view");
            expectTruncated(() -> device.copyFrom(0, writable), file, "a copy to DEVICE memory from the view");
            expectTruncated(() -> device.copyFromAsync(0, readOnly).join(), file, "an async copy to DEVICE memory from the view");
            expectTruncated(() -> host.copyFrom(0, readOnly), file, "a copy to HOST memory from the view");
            expectTruncated(() -> device.copyTo(0, writable), file, "a copy from DEVICE memory into the view");
            expectTruncated(() -> device.copyToAsync(0, writable).join(), file, "an async copy from DEVICE memory into the view");
            try (var access = mapped.hostAccess(AccessMode.READ)) {
                expectTruncated(() -> device.copyFrom(0, access.segment()), file, "a copy to DEVICE memory from a host access");
            }
            float[] inFile = new float[1024];
            mapped.copyTo(inFile);
            device.copyFrom(0, readOnly.asSlice(0, 4096)); // what is left of the file still copies
            float[] back = new float[1024];
            device.copyTo(back);
            check(Arrays.equals(back, inFile), "the bytes still in the file were copied");
        }
    }

    /**
     * Copies to and from a mapped file's buffer, run until the JIT has compiled them, then the file truncated: a
     * compiled copy's fault reaches Java late (at the thread's next safepoint check), after the code that would turn
     * it into {@link MappedFileTruncatedException}, unless the library makes it surface inside. Each copy is tried
     * several times, since the JVM delivers it at one point or another.
     */
    static void compiledCopiesOfATruncatedFile(String backend, Path dir) throws Exception {
        int n = (1 << 20) / 4;
        Path file = Files.write(dir.resolve("shrinking.bin"), new byte[n * 4]);
        try (UnifiedMemoryManager manager = manager(backend, Duration.ofSeconds(5));
             UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_WRITE);
             UnifiedBuffer host = manager.allocate(DataType.FLOAT32, 256, MemoryLocation.HOST)) {
            float[] tail = new float[256];
            long tailAt = (long) (n - 256) * 4;
            for (int i = 0; i < 30_000; i++) {
                mapped.copyTo(tailAt, tail, 0, tail.length);
                mapped.copyFrom(tailAt, tail, 0, tail.length);
                host.copyFrom(mapped, tailAt, 0, 1024);
            }
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                channel.truncate(4096);
            }
            for (int i = 0; i < 20; i++) {
                expectTruncated(() -> mapped.copyTo(tailAt, tail, 0, tail.length), file, "a compiled copy to an array");
                expectTruncated(() -> mapped.copyFrom(tailAt, tail, 0, tail.length), file, "a compiled copy from an array");
                expectTruncated(() -> host.copyFrom(mapped, tailAt, 0, 1024), file, "a compiled copy to a HOST buffer");
            }
            mapped.copyTo(0, tail, 0, tail.length); // the bytes still in the file read as before
        }
    }

    /**
     * A named pipe opened for reading blocks until a writer opens it, for ever if none does: {@code mapFile} refuses
     * it (and anything else that is not a regular file) before it opens it, and the manager closes promptly after.
     */
    static void namedPipesAreRefusedBeforeTheyAreOpened(String backend, Path dir) throws Exception {
        Path fifo = dir.resolve("pipe");
        Process mkfifo = new ProcessBuilder("mkfifo", fifo.toString()).inheritIO().start();
        check(mkfifo.waitFor() == 0, "mkfifo made the pipe");
        UnifiedMemoryManager manager = manager(backend, Duration.ofSeconds(30));
        for (FileMapMode mode : FileMapMode.values()) {
            try {
                manager.mapFile(fifo, DataType.INT8, mode).close();
                throw new AssertionError("a named pipe was mapped " + mode);
            } catch (IllegalArgumentException expected) {
                check(expected.getMessage().contains("not a regular file"), "the refusal says why: " + expected.getMessage());
            }
        }
        try {
            manager.mapFile(dir, DataType.INT8, FileMapMode.READ_ONLY).close();
            throw new AssertionError("a directory was mapped");
        } catch (IllegalArgumentException expected) {
            check(expected.getMessage().contains("a directory"), "the refusal says why: " + expected.getMessage());
        }
        long start = System.nanoTime();
        manager.close();
        check(System.nanoTime() - start < 10_000_000_000L, "the manager closed without waiting out its close timeout");
        check(manager.statistics(MemoryLocation.HOST).reservedBytes() == 0, "and freed its pools");
    }

    private static void readAll(MemorySegment view) {
        for (long i = 0; i < view.byteSize(); i += 4093) {
            if (view.get(JAVA_BYTE, i) != expected(i)) {
                throw new AssertionError("byte " + i + " read through the view is not the file's");
            }
        }
    }

    private static float[] floats(byte[] bytes) {
        float[] values = new float[bytes.length / 4];
        ByteBuffer.wrap(bytes).order(ByteOrder.nativeOrder()).asFloatBuffer().get(values);
        return values;
    }

    private static void refused(Runnable write, String what) {
        try {
            write.run();
        } catch (UnsupportedOperationException expected) {
            check(expected.getMessage().contains("mapped read-only"), what + " was refused without saying why: " + expected.getMessage());
            return;
        }
        throw new AssertionError(what + " was not refused on a read-only mapping");
    }

    private static void expectTruncated(Runnable use, Path file, String what) {
        try {
            use.run();
        } catch (MappedFileTruncatedException expected) {
            check(expected.file().equals(file) && expected.getMessage().contains("truncated while mapped"),
                    what + " failed without naming the truncation: " + expected.getMessage());
            return;
        }
        throw new AssertionError(what + " did not fail on a file truncated under its mapping");
    }

    private static void expectEnded(Runnable use, String what) {
        try {
            use.run();
        } catch (IllegalStateException expected) {
            return;
        }
        throw new AssertionError(what + " did not fail: it reached memory that was given back");
    }

    private static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }
}
