package dev.compute.memory;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ControlledBackend;
import dev.compute.memory.spi.NativeDevice;
import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the kernel API does with the lifetime rule, on the simulated discrete device, whose device accesses can be
 * made to leave work in flight ({@link SimulatedDiscreteBackend#queueWork}): a launch's kernel is recorded on every
 * buffer, so a close right after it or a read waits for it; Java kernels' own rules.
 */
class KernelsTest {

    private static final JavaKernel FILL = (shape, args) -> args.segment(0).elements(JAVA_FLOAT)
            .forEach(element -> element.set(JAVA_FLOAT, 0, args.floatValue(1)));

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(device).timelineInterval(Duration.ZERO).build();
    private final ExecutorService other = Executors.newSingleThreadExecutor();

    @AfterEach
    void close() {
        other.shutdownNow();
        manager.close();
    }

    @Test
    void aCloseRightAfterTheLaunchFreesTheMemoryOnlyAfterTheKernel() throws Exception {
        ComputeKernel fill = manager.kernels().compile(KernelSource.java("fill", FILL));
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
        long closedAt;
        try (BufferAccess access = buffer.deviceAccess(AccessMode.READ)) {
            closedAt = access.offset();
        }
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        device.queueWork(kernel); // the device is still running what the launch's accesses queued
        try {
            fill.launch(LaunchShape.of(1024), buffer, 7f).join();
        } finally {
            device.queueWork(CompletableFuture.completedFuture(null));
        }
        Future<?> read = other.submit(() -> buffer.copyTo(new float[1]));
        assertThatThrownBy(() -> read.get(200, TimeUnit.MILLISECONDS)).as("a read waits for the kernel").isInstanceOf(TimeoutException.class);
        buffer.close();
        try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
             BufferAccess access = next.deviceAccess(AccessMode.READ)) {
            assertThat(access.offset()).as("the closed buffer's block waits for its kernel").isNotEqualTo(closedAt);
        }
        long freesBefore = device.frees();
        kernel.complete(null);
        assertThatThrownBy(() -> read.get(10, TimeUnit.SECONDS)).as("the read ran once the kernel was done, on a closed buffer")
                .isInstanceOf(ExecutionException.class).hasCauseInstanceOf(IllegalStateException.class);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        boolean reused = false;
        while (!reused && System.nanoTime() < deadline) {
            try (UnifiedBuffer again = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 BufferAccess access = again.deviceAccess(AccessMode.READ)) {
                reused = access.offset() == closedAt;
            }
        }
        assertThat(reused).as("once the kernel is done, the block goes back to the pool").isTrue();
        assertThat(device.frees()).as("to the pool, not the device").isEqualTo(freesBefore);
    }

    /**
     * Another thread's close while a launch opens its accesses: the access's call, overtaken by the close, ends the
     * thread's accesses as it returns, and the launch failed with "this access to ... has ended", naming neither the
     * kernel, nor the argument, nor the close. It fails as a launch on a closed manager's buffer does, runs nothing, and
     * the close finishes.
     */
    @Test
    void aCloseWhileALaunchOpensItsAccessesFailsItNamingTheKernelTheArgumentAndTheClose() {
        ControlledBackend controlled = new ControlledBackend(new SimulatedDiscreteBackend());
        UnifiedMemoryManager closing = UnifiedMemoryManager.builder().backend(controlled).timelineInterval(Duration.ZERO).build();
        AtomicBoolean ran = new AtomicBoolean();
        ComputeKernel fill = closing.kernels().compile(KernelSource.java("fill", (shape, args) -> ran.set(true)));
        UnifiedBuffer buffer = closing.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE);
        CompletableFuture<Void> closed = new CompletableFuture<>();
        controlled.beforeOpeningHandles(() -> {
            controlled.beforeOpeningHandles(null);
            other.execute(() -> {
                closing.close();
                closed.complete(null);
            });
            while (!closing.isClosed()) {
                Thread.onSpinWait();
            }
        });
        assertThatThrownBy(() -> fill.launch(LaunchShape.of(16), buffer, 7f)).isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("kernel 'fill', argument 0 (UnifiedBuffer[DEVICE, 64 bytes, FLOAT32")
                .hasMessageEndingWith("is closed because its UnifiedMemoryManager was closed");
        assertThat(ran).as("the kernel ran").isFalse();
        assertThat(closed).as("the close finished").succeedsWithin(Duration.ofSeconds(10));
    }

    /**
     * A close between the launch's own check of the manager and the launch's call of it: the call was refused with the
     * manager's bare "this UnifiedMemoryManager is closed", naming no kernel; it is refused as a launch of a closed
     * manager's kernel is.
     */
    @Test
    void aCloseJustBeforeTheLaunchCallsTheManagerRefusesItNamingTheKernel() {
        ControlledBackend controlled = new ControlledBackend(new SimulatedDiscreteBackend());
        UnifiedMemoryManager closing = UnifiedMemoryManager.builder().backend(controlled).timelineInterval(Duration.ZERO).build();
        AtomicBoolean ran = new AtomicBoolean();
        ComputeKernel fill = closing.kernels().compile(KernelSource.java("fill", (shape, args) -> ran.set(true)));
        controlled.beforeCheckingLaunches(closing::close);
        assertThatThrownBy(() -> fill.launch(LaunchShape.of(16), 7f)).isInstanceOf(IllegalStateException.class)
                .hasMessage("kernel 'fill' cannot launch: its UnifiedMemoryManager is closed");
        assertThat(ran).as("the kernel ran").isFalse();
    }

    @Test
    void aJavaKernelGetsItsReadArgumentsReadOnlyAndItsWrittenOnesWritable() {
        JavaKernel copyInto = (shape, args) -> {
            MemorySegment from = args.segment(0);
            MemorySegment to = args.segment(1);
            assertThat(from.isReadOnly()).isTrue();
            assertThat(to.isReadOnly()).isFalse();
            to.copyFrom(from);
            from.set(JAVA_FLOAT, 0, 1f); // refused: the launch fails
        };
        ComputeKernel copy = manager.kernels().compile(KernelSource.java("copy_into", copyInto));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 4); UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 4)) {
            x.copyFrom(new float[] {1, 2, 3, 4});
            CompletableFuture<Void> launched = copy.launch(LaunchShape.of(4), KernelArg.read(x), KernelArg.write(y));
            assertThat(launched).failsWithin(Duration.ofSeconds(5)).withThrowableOfType(ExecutionException.class)
                    .withCauseInstanceOf(IllegalArgumentException.class);
            float[] result = new float[4];
            y.copyTo(result);
            assertThat(result).as("what the kernel wrote before it failed").containsExactly(1, 2, 3, 4);
            x.copyTo(result);
            assertThat(result).as("the read argument").containsExactly(1, 2, 3, 4);
            try (BufferAccess access = x.deviceAccess(AccessMode.READ_WRITE)) {
                assertThat(access.isOpen()).as("the failed launch ended its accesses").isTrue();
            }
        }
    }

    @Test
    void aJavaKernelsSegmentsEndWithTheLaunchSoThatNoneReachesMemoryTheBufferGaveBack() throws Exception {
        MemorySegment[] kept = new MemorySegment[2];
        ComputeKernel keep = manager.kernels().compile(KernelSource.java("keep", (shape, args) -> {
            kept[0] = args.segment(0);
            kept[1] = args.segment(1);
        }));
        UnifiedBuffer device = manager.allocate(DataType.FLOAT32, 4, MemoryLocation.DEVICE);
        UnifiedBuffer host = manager.allocate(DataType.FLOAT32, 4, MemoryLocation.HOST);
        keep.launch(LaunchShape.of(4), device, KernelArg.read(host)).join();
        device.close();
        host.close();

        try (UnifiedBuffer reused = manager.allocate(DataType.FLOAT32, 4, MemoryLocation.DEVICE)) {
            reused.copyFrom(new float[] {1, 2, 3, 4});
            assertThatThrownBy(() -> kept[0].set(JAVA_FLOAT, 0, 42f)).as("a segment kept past the launch")
                    .isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> kept[1].get(JAVA_FLOAT, 0)).isInstanceOf(IllegalStateException.class);
            float[] values = new float[4];
            reused.copyTo(values);
            assertThat(values).containsExactly(1, 2, 3, 4);
        }
        JavaKernel handOver = (shape, args) -> {
            MemorySegment x = args.segment(0);
            try {
                other.submit(() -> x.set(JAVA_FLOAT, 0, 42f)).get();
            } catch (InterruptedException | ExecutionException e) {
                throw new IllegalStateException(e.getCause());
            }
        };
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 4, MemoryLocation.DEVICE)) {
            assertThat(manager.kernels().compile(KernelSource.java("hand_over", handOver)).launch(LaunchShape.of(4), x))
                    .as("confined to the launching thread").failsWithin(Duration.ofSeconds(5))
                    .withThrowableOfType(ExecutionException.class).havingCause().havingCause().isInstanceOf(WrongThreadException.class);
        }
    }

    @Test
    void aJavaKernelThatClosesItsManagerKeepsItsBuffersMemoryUntilItReturns() {
        long[] freesSeen = new long[2];
        float[] read = new float[1];
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
        ComputeKernel closing = manager.kernels().compile(KernelSource.java("closing", (shape, args) -> {
            MemorySegment x = args.segment(0);
            freesSeen[0] = device.frees();
            buffer.close();
            manager.close();
            freesSeen[1] = device.frees();
            if (freesSeen[1] == freesSeen[0]) { // else this test would write freed memory itself
                x.set(JAVA_FLOAT, 0, 5f); // the kernel's segment still works: its memory must still be the buffer's
                read[0] = x.get(JAVA_FLOAT, 0);
            }
        }));
        closing.launch(LaunchShape.of(1024), buffer).join();
        assertThat(freesSeen[1]).as("a close from inside the kernel frees nothing under it").isEqualTo(freesSeen[0]);
        assertThat(read[0]).isEqualTo(5f);
        assertThat(manager.isClosed()).isTrue();
        assertThat(device.frees()).as("the close finished once the launch was over").isGreaterThan(freesSeen[0]);
    }

    @Test
    void aManagerClosedElsewhereWhileAJavaKernelRunsFreesItsMemoryOnlyOnceTheKernelReturned() throws Exception {
        CountDownLatch running = new CountDownLatch(1);
        long[] freesSeen = new long[1];
        long[] freesBefore = new long[1];
        ComputeKernel slow = manager.kernels().compile(KernelSource.java("slow", (shape, args) -> {
            MemorySegment x = args.segment(0);
            running.countDown();
            while (!manager.isClosed()) {
                Thread.onSpinWait();
            }
            try {
                manager.allocate(64).close(); // a call after the close: refused
            } catch (IllegalStateException refused) {
                // a kernel may go on after a failed call, with the segments it holds
            }
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500); // time enough for a close that did not wait
            while (System.nanoTime() < until && freesSeen[0] == 0) {
                freesSeen[0] = device.frees() - freesBefore[0];
            }
            if (freesSeen[0] == 0) { // else this test would write freed memory itself
                x.set(JAVA_FLOAT, 0, 5f);
            }
        }));
        UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
        freesBefore[0] = device.frees();
        Future<CompletableFuture<Void>> launched = other.submit(() -> slow.launch(LaunchShape.of(1024), x));
        running.await();
        x.close();
        manager.close();
        try {
            launched.get(10, TimeUnit.SECONDS);
        } catch (ExecutionException closedUnderIt) {
            // the kernel's call after the close ended its accesses: the launch says so once the kernel returned
            assertThat(closedUnderIt).hasCauseInstanceOf(IllegalStateException.class);
        }
        assertThat(freesSeen[0]).as("frees while the kernel still ran").isZero();
        assertThat(device.frees()).as("the close freed the memory after it").isGreaterThan(freesBefore[0]);
    }

    @Test
    void aCheckedExceptionThrownByAJavaKernelFailsTheLaunchsFutureAsAnyOtherDoes() {
        ComputeKernel sneaky = manager.kernels().compile(KernelSource.java("sneaky", (shape, args) -> sneak(new java.io.IOException("disk"))));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 4)) {
            CompletableFuture<Void> launched = sneaky.launch(LaunchShape.of(4), x);
            assertThat(launched).failsWithin(Duration.ofSeconds(5)).withThrowableOfType(ExecutionException.class)
                    .withCauseInstanceOf(java.io.IOException.class);
            try (BufferAccess access = x.deviceAccess(AccessMode.READ_WRITE)) {
                assertThat(access.isOpen()).as("the failed launch ended its accesses").isTrue();
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> void sneak(Throwable checked) throws T {
        throw (T) checked; // what Lombok's @SneakyThrows, Kotlin or Groovy code throws where Java would not compile it
    }

    @Test
    void aJavaKernelSeesTheShapeAsAskedAndItsArgumentsByPosition() {
        long[] seen = new long[3];
        JavaKernel look = (shape, args) -> {
            seen[0] = shape.dimensions();
            seen[1] = shape.size(0) * shape.size(1);
            seen[2] = args.count();
            assertThatThrownBy(() -> args.segment(1)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Java kernel 'look' reads argument 1 as buffer, but the launch passed a Long (5)");
            assertThatThrownBy(() -> args.doubleValue(2)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Java kernel 'look' reads argument 2 as a Double (double), but the launch passed a Float (2.5)");
            assertThatThrownBy(() -> args.intValue(0)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("a buffer (UnifiedBuffer[");
            assertThatThrownBy(() -> args.intValue(3)).isInstanceOf(IndexOutOfBoundsException.class)
                    .hasMessage("Java kernel 'look' asked for argument 3; the launch passed 3");
        };
        ComputeKernel kernel = manager.kernels().compile(KernelSource.java("look", look));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 4)) {
            kernel.launch(LaunchShape.of(37, 3), x, 5L, 2.5f).join();
        }
        assertThat(seen).containsExactly(2, 111, 3);
    }

    @Test
    void theSimulatedDeviceHasNoNativeDeviceAndCompilesOnlyJava() {
        interface Anything extends NativeDevice {}
        assertThatThrownBy(() -> manager.nativeDevice(Anything.class)).isInstanceOf(IllegalStateException.class)
                .hasMessage("the simulated backend has no Anything; it has no native device objects (its memory is reached through host segments)");
        assertThat(manager.kernels().languages()).containsExactly(KernelSource.Language.JAVA);
        assertThatThrownBy(() -> manager.kernels().compile(KernelSource.openCl("__kernel void k() {}", "k")))
                .isInstanceOf(UnsupportedOperationException.class)
                .hasMessage("the simulated backend compiles kernels in [JAVA], and none of the sources given is: [OpenCL C kernel 'k'];"
                        + " add a KernelSource.java(name, body)");
    }
    @Test
    void aJavaKernelCapturingARequestsStateIsNotKeptOnceNobodyHoldsIt() throws Exception {
        WeakReference<float[]> captured = compileAndDropAKernelCapturing(new float[1 << 20]);
        ComputeKernel held = manager.kernels().compile(KernelSource.java("fill", FILL));
        assertThat(manager.kernels().compile(KernelSource.java("fill", FILL))).as("an equal source, while held").isSameAs(held);

        for (int i = 0; i < 50 && captured.get() != null; i++) {
            System.gc();
            Thread.sleep(20);
            // the next compile lets go of kernels collected since the last one, as the next request's would
            assertThat(manager.kernels().compile(KernelSource.java("fill", FILL))).as("a kernel still held").isSameAs(held);
        }

        assertThat(captured.get()).as("what a kernel nobody holds captured is not kept by the manager").isNull();
    }

    /** Compiles and launches a kernel whose body captures {@code state}, as a request would, and keeps nothing of it. */
    private WeakReference<float[]> compileAndDropAKernelCapturing(float[] state) {
        ComputeKernel kernel = manager.kernels().compile(KernelSource.java("fill_from_request",
                (shape, args) -> args.segment(0).set(JAVA_FLOAT, 0, state[0])));
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.HOST)) {
            kernel.launch(LaunchShape.of(16), buffer).join();
        }
        return new WeakReference<>(state);
    }

    /** Refused before any access opens: by then an earlier argument's access would have synced its buffer to the device. */
    @Test
    void aReadOnlyMappedFilePassedForWritingIsRefusedBeforeAnyArgumentIsSynced(@TempDir Path dir) throws Exception {
        ComputeKernel fill = manager.kernels().compile(KernelSource.java("fill2", FILL));
        Path file = Files.write(dir.resolve("floats"), new byte[64]);
        try (UnifiedBuffer dirty = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE);
             UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY)) {
            try (BufferAccess access = dirty.hostAccess(AccessMode.WRITE)) {
                access.segment().fill((byte) 1); // the host copy is the newer one
            }
            BufferState before = dirty.state();

            assertThatThrownBy(() -> fill.launch(LaunchShape.of(16), KernelArg.write(dirty), KernelArg.write(mapped), 1f))
                    .isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("mapped read-only");
            assertThat(dirty.state()).as("the first argument was neither synced nor marked for a launch refused").isEqualTo(before);
        }
    }
}
