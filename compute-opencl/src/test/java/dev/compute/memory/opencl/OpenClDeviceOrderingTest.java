package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jocl.CL.CL_COMPLETE;
import static org.jocl.CL.CL_SUCCESS;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceTimeoutException;
import dev.compute.memory.KernelArg;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.testing.ChildJvm;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_command_queue;
import org.jocl.cl_event;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Device work is ordered on the device: an access or an op after work still waiting on the backend's queue (a command
 * held back by a user event nobody has set yet) opens and queues at once, and runs after it; work recorded from a queue
 * of one's own is waited for by a barrier on the backend's queue; only host reads and frees wait on the host. With
 * the old host wait each of these would block until the device wait timeout and fail.
 */
class OpenClDeviceOrderingTest {

    private static final int N = 4096;

    private UnifiedMemoryManager manager;

    @BeforeEach
    void open() {
        OpenClTestSupport.requireOpenCl();
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                .deviceWaitTimeout(Duration.ofSeconds(5)).build();
    }

    @AfterEach
    void close() {
        if (manager != null) {
            manager.close();
        }
    }

    @Test
    void accessesAndOpsAfterWorkStillQueuedOpenAtOnceAndRunAfterIt() throws Exception {
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            x.copyFrom(new float[N]);
            cl_event gate = userEvent();
            try {
                try (BufferAccess access = x.deviceAccess(AccessMode.WRITE)) {
                    OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                    fill(cl.queue(), cl, 5f, gate, null); // held back until the gate opens
                }
                CompletableFuture<Void> scaled = manager.ops().scaleAsync(x, 2);
                try (BufferAccess again = x.deviceAccess(AccessMode.READ_WRITE)) {
                    assertThat(again.handle(OpenClDeviceHandle.class).queue()).isNotNull();
                }
                CompletableFuture<Void> scaledAgain = manager.ops().scaleAsync(x, 3);
                assertThat(scaled).as("queued behind the held fill, not waited for").isNotDone();
                assertThat(scaledAgain).isNotDone();

                CompletableFuture<float[]> read = CompletableFuture.supplyAsync(() -> {
                    float[] back = new float[N];
                    x.copyTo(back);
                    return back;
                });
                Thread.sleep(200);
                assertThat(read).as("a host read waits for the work").isNotDone();

                open(gate);
                float[] back = read.get(10, TimeUnit.SECONDS);
                assertThat(back).containsOnly(30f); // the fill, then both scales, in order
                assertThat(scaledAgain).succeedsWithin(Duration.ofSeconds(10));
            } finally {
                CL.clReleaseEvent(gate);
            }
        }
    }

    /** {@code x[i] += v} for the first {@code n} elements. */
    private ComputeKernel addKernel() {
        return manager.kernels().compile(KernelSource.openCl("""
                __kernel void add(__global float *x, long n, float v) {
                    long i = get_global_id(0);
                    if (i < n) { x[i] += v; }
                }
                """, "add"));
    }

    /** A launch records its kernel on each buffer: the next launch on the buffer queues behind it, as an op does. */
    @Test
    void launchesAfterWorkStillQueuedQueueAtOnceBehindIt() throws Exception {
        ComputeKernel add = addKernel();
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            x.copyFrom(new float[N]);
            cl_event gate = userEvent();
            try {
                fillHeldAt(x, gate);
                CompletableFuture<Void> first = add.launch(LaunchShape.of(N), x, (long) N, 2f);
                CompletableFuture<Void> second = add.launch(LaunchShape.of(N), x, (long) N, 3f);
                CompletableFuture<Void> scaled = manager.ops().scaleAsync(x, 10);
                assertThat(first).as("queued behind the held fill, not waited for").isNotDone();
                assertThat(second).as("queued behind the first launch, not waited for").isNotDone();
                assertThat(scaled).isNotDone();

                open(gate);
                float[] back = new float[N];
                x.copyTo(back);
                assertThat(back).containsOnly(60f); // the fill, both launches, then the scale, in order
            } finally {
                CL.clReleaseEvent(gate);
            }
        }
    }

    /**
     * A sum reads the buffer on the queue and adds its partial sums on the host once they are read: an op or a launch
     * after it queues at once behind its kernel, as after any op, rather than wait on the host for the whole sum.
     */
    @Test
    void opsAndLaunchesAfterASumStillQueuedQueueAtOnceBehindIt() throws Exception {
        ComputeKernel add = addKernel();
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            x.copyFrom(new float[N]);
            cl_event gate = userEvent();
            try {
                fillHeldAt(x, gate);
                CompletableFuture<Double> sum = manager.ops().sumAsync(x);
                CompletableFuture<Void> scaled = manager.ops().scaleAsync(x, 3);
                CompletableFuture<Void> added = add.launch(LaunchShape.of(N), x, (long) N, 1f);
                assertThat(scaled).as("queued behind the held sum, not waited for").isNotDone();
                assertThat(added).as("queued behind the held sum, not waited for").isNotDone();

                open(gate);
                assertThat(sum).succeedsWithin(Duration.ofSeconds(10)).isEqualTo((double) N);
                float[] back = new float[N];
                x.copyTo(back);
                assertThat(back).containsOnly(4f); // the fill, the sum of ones, the scale, then the launch, in order
            } finally {
                CL.clSetUserEventStatus(gate, CL_COMPLETE); // where an assertion failed before the gate opened
                CL.clReleaseEvent(gate);
            }
        }
    }

    /**
     * A launch whose arguments do not fit the kernel is refused before anything runs (the README): not after syncing a
     * newer host copy to the device behind held work, which waited there until the device wait timed out, and marked a
     * written argument's device copy newer for a launch that never ran.
     */
    @Test
    void aLaunchWithAWrongArgumentIsRefusedAtOnceBehindHeldWorkAndChangesNothing() throws Exception {
        reopenWithAShortDeviceWait();
        ComputeKernel add = addKernel();
        cl_event gate = userEvent();
        try (UnifiedBuffer held = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
             UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            x.copyFrom(new float[N]);
            try (var access = x.hostAccess(AccessMode.WRITE)) {
                access.segment().fill((byte) 0);
            }
            assertThat(x.state()).isEqualTo(BufferState.HOST_DIRTY);
            fillHeldAt(held, gate);

            assertThatThrownBy(() -> add.launch(LaunchShape.of(N), KernelArg.write(x), N, 1f)) // an int for the long n
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 1").hasMessageContaining("a Long");
            assertThatThrownBy(() -> add.launch(LaunchShape.of(N), KernelArg.write(x), (long) N))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("takes 3 argument(s)");
            assertThatThrownBy(() -> add.launch(LaunchShape.of(N).withWorkGroup(1 << 20), KernelArg.write(x), (long) N, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("work-group of [1048576]");
            assertThat(x.state()).as("nothing synced, nothing marked newer").isEqualTo(BufferState.HOST_DIRTY);
        } finally {
            open(gate);
            CL.clReleaseEvent(gate);
        }
    }

    /**
     * The refusals of a later argument that opening its access would make (a closed buffer, HOST memory) come before
     * any access opens too: an earlier argument whose host copy is newer is not synced behind held work, waiting there
     * until the device wait timed out, nor marked newer on the device, for a launch that never ran.
     */
    @Test
    void aLaunchWithAClosedOrHostBufferIsRefusedAtOnceBehindHeldWorkAndChangesNothing() throws Exception {
        reopenWithAShortDeviceWait();
        ComputeKernel copy = manager.kernels().compile(KernelSource.openCl("""
                __kernel void copy(__global float *x, __global const float *y, long n) {
                    long i = get_global_id(0);
                    if (i < n) { x[i] = y[i]; }
                }
                """, "copy"));
        cl_event gate = userEvent();
        try (UnifiedBuffer held = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
             UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
             UnifiedBuffer host = manager.allocate(DataType.FLOAT32, N, MemoryLocation.HOST)) {
            UnifiedBuffer closed = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
            closed.close();
            x.copyFrom(new float[N]);
            try (var access = x.hostAccess(AccessMode.WRITE)) {
                access.segment().fill((byte) 0);
            }
            fillHeldAt(held, gate);

            assertThatThrownBy(() -> copy.launch(LaunchShape.of(N), KernelArg.write(x), KernelArg.read(closed), (long) N))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("argument 1").hasMessageContaining("closed");
            assertThatThrownBy(() -> copy.launch(LaunchShape.of(N), KernelArg.write(x), KernelArg.read(host), (long) N))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("kernel 'copy', argument 1 (UnifiedBuffer[HOST")
                    .hasMessageContaining("HOST memory on OpenCL is plain host memory");
            assertThat(x.state()).as("nothing synced, nothing marked newer").isEqualTo(BufferState.HOST_DIRTY);
        } finally {
            open(gate);
            CL.clReleaseEvent(gate);
        }
    }

    @Test
    void workRecordedFromAQueueOfOnesOwnIsWaitedForByTheBackendsQueue() throws Exception {
        OpenClNativeDevice device = manager.nativeDevice(OpenClNativeDevice.class);
        int[] error = new int[1];
        @SuppressWarnings("deprecation")
        cl_command_queue own = CL.clCreateCommandQueue(device.context(), device.device(), 0, error);
        assertThat(error[0]).isEqualTo(CL_SUCCESS);
        cl_event gate = userEvent();
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            x.copyFrom(new float[N]);
            fillRecorded(own, x, 7f, gate);
            CompletableFuture<Void> scaled = manager.ops().scaleAsync(x, 2);
            assertThat(scaled).as("a barrier on the recorded work, not a host wait").isNotDone();

            open(gate);
            float[] back = new float[N];
            x.copyTo(back);
            assertThat(back).containsOnly(14f);
        } finally {
            CL.clReleaseEvent(gate);
            CL.clReleaseCommandQueue(own);
        }
    }

    /**
     * Recorded work that fails (a command of one's own queue behind a user event set to an error) while the backend's
     * queue is ordered after it: the failure is that work's own. On PoCL a barrier with the failing event in its wait list
     * ended the process (SIGABRT, "PTHREAD ERROR in pocl_update_event_failed()"), so the scenario runs in a JVM of its
     * own; the op on the buffer and another buffer's work run after the failed work as after any work that is over. So
     * does a PINNED buffer's writing access, whose end publishes the buffer to host memory after the recorded work.
     */
    @Test
    void recordedWorkThatFailsWhileTheBackendsQueueWaitsForItEndsNothingElse() throws Exception {
        ChildJvm.Result child = ChildJvm.run(Duration.ofMinutes(2), RecordedWorkFails.class);
        assertThat(child.exitCode()).as(child.describe()).isZero();
        assertThat(child.output()).as(child.describe()).contains("scaled: done", "other: [3.0, 3.0, 3.0]", "x: [2.0, 2.0, 2.0]",
                "pinned: [5.0, 5.0, 5.0]");
    }

    /** The child of {@link #recordedWorkThatFailsWhileTheBackendsQueueWaitsForItEndsNothingElse}. */
    static final class RecordedWorkFails {
        public static void main(String[] args) throws Exception {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                    .deviceWaitTimeout(Duration.ofSeconds(10)).build()) {
                OpenClNativeDevice device = manager.nativeDevice(OpenClNativeDevice.class);
                int[] error = new int[1];
                @SuppressWarnings("deprecation")
                cl_command_queue own = CL.clCreateCommandQueue(device.context(), device.device(), 0, error);
                cl_event gate = CL.clCreateUserEvent(device.context(), error);
                try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
                     UnifiedBuffer other = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
                     UnifiedBuffer pinned = manager.allocate(DataType.FLOAT32, N, MemoryLocation.PINNED)) {
                    x.copyFrom(filled(N, 1f));
                    other.copyFrom(filled(N, 4f));
                    pinned.copyFrom(filled(N, 5f));
                    fillRecorded(own, x, 7f, gate);
                    fillRecorded(own, pinned, 7f, gate); // the access's end maps the buffer after it
                    CompletableFuture<Void> scaled = manager.ops().scaleAsync(x, 2); // ordered after the recorded work
                    CompletableFuture<Void> otherFilled = manager.ops().fillAsync(other, 3);
                    CL.clSetUserEventStatus(gate, CL.CL_OUT_OF_RESOURCES); // the recorded work fails
                    System.out.println("scaled: " + outcome(scaled));
                    System.out.println("other filled: " + outcome(otherFilled));
                    float[] back = new float[N];
                    other.copyTo(back);
                    System.out.println("other: " + Arrays.toString(Arrays.copyOf(back, 3)));
                    x.copyTo(back);
                    System.out.println("x: " + Arrays.toString(Arrays.copyOf(back, 3)));
                    pinned.copyTo(back);
                    System.out.println("pinned: " + Arrays.toString(Arrays.copyOf(back, 3)));
                } finally {
                    CL.clReleaseEvent(gate);
                    CL.clReleaseCommandQueue(own);
                }
            }
        }

        private static String outcome(CompletableFuture<Void> work) {
            try {
                work.get(30, TimeUnit.SECONDS);
                return "done";
            } catch (Exception e) {
                return "failed: " + e;
            }
        }
    }

    /**
     * A writing PINNED access publishes the buffer to host memory after the work recorded on it; that work, on a queue
     * of one's own, does not hold up the backend's queue meanwhile (the README: slow work of yours never holds up the
     * backend's): another buffer's blocking copies go on, and the PINNED buffer's read sees the recorded work's result.
     */
    @Test
    void slowRecordedWorkOnAPinnedBufferHoldsUpNoOtherBuffersCopies() throws Exception {
        reopenWithAShortDeviceWait();
        OpenClNativeDevice device = manager.nativeDevice(OpenClNativeDevice.class);
        int[] error = new int[1];
        @SuppressWarnings("deprecation")
        cl_command_queue own = CL.clCreateCommandQueue(device.context(), device.device(), 0, error);
        assertThat(error[0]).isEqualTo(CL_SUCCESS);
        cl_event gate = userEvent();
        try (UnifiedBuffer pinned = manager.allocate(DataType.FLOAT32, N, MemoryLocation.PINNED);
             UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            pinned.copyFrom(filled(N, 1f));
            fillRecorded(own, pinned, 7f, gate);
            y.copyFrom(filled(N, 4f)); // a blocking copy on the backend's queue, while the recorded work waits at its gate
            float[] back = new float[N];
            y.copyTo(back);
            assertThat(back).containsOnly(4f);

            open(gate);
            pinned.copyTo(back);
            assertThat(back).as("the recorded work's result, published").containsOnly(7f);
        } finally {
            CL.clSetUserEventStatus(gate, CL_COMPLETE); // refused where it is complete already
            CL.clFinish(own);
            CL.clReleaseEvent(gate);
            CL.clReleaseCommandQueue(own);
        }
    }

    /**
     * The other side of the test above (the READMEs say so): once the buffer's next launch is ordered after recorded work
     * still waiting at its gate, the barrier that orders it holds up everything queued after it on the backend's queue:
     * another buffer's launch waits, and a third, idle buffer's blocking copy fails after the device wait, changing
     * nothing. Once the gate opens, all of it runs in order and each buffer reads as its work left it.
     */
    @Test
    void aLaunchOrderedAfterSlowRecordedWorkHoldsUpWhatIsQueuedAfterIt() throws Exception {
        reopenWithAShortDeviceWait();
        ComputeKernel add = addKernel();
        OpenClNativeDevice device = manager.nativeDevice(OpenClNativeDevice.class);
        int[] error = new int[1];
        @SuppressWarnings("deprecation")
        cl_command_queue own = CL.clCreateCommandQueue(device.context(), device.device(), 0, error);
        assertThat(error[0]).isEqualTo(CL_SUCCESS);
        cl_event gate = userEvent();
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
             UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
             UnifiedBuffer idle = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            x.copyFrom(filled(N, 1f));
            y.copyFrom(filled(N, 1f));
            idle.copyFrom(filled(N, 1f));
            fillRecorded(own, x, 7f, gate);
            CompletableFuture<Void> onX = add.launch(LaunchShape.of(N), x, (long) N, 1f); // queues the barrier
            CompletableFuture<Void> onY = add.launch(LaunchShape.of(N), y, (long) N, 2f);
            assertThatThrownBy(() -> idle.copyFrom(filled(N, 5f))).isInstanceOf(DeviceTimeoutException.class)
                    .hasMessageContaining("had not ended");
            assertThat(onY).as("queued after the barrier").isNotDone();

            open(gate);
            assertThat(onX).succeedsWithin(Duration.ofSeconds(10));
            assertThat(onY).succeedsWithin(Duration.ofSeconds(10));
            float[] back = new float[N];
            x.copyTo(back);
            assertThat(back).containsOnly(8f);
            y.copyTo(back);
            assertThat(back).containsOnly(3f);
            idle.copyTo(back);
            assertThat(back).as("the refused copy changed nothing").containsOnly(1f);
        } finally {
            CL.clSetUserEventStatus(gate, CL_COMPLETE); // refused where it is complete already
            CL.clFinish(own);
            CL.clReleaseEvent(gate);
            CL.clReleaseCommandQueue(own);
        }
    }

    @Test
    void aBufferClosedWithWorkStillQueuedGivesItsMemoryBackOnceTheWorkIsDone() throws Exception {
        cl_event gate = userEvent();
        try {
            UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
            try (BufferAccess access = x.deviceAccess(AccessMode.WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                fill(cl.queue(), cl, 1f, gate, null);
            }
            manager.ops().scaleAsync(x, 2);
            x.close();
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
            UnifiedBuffer next = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
            try {
                open(gate);
                next.copyFrom(filled(N, 9f));
                float[] back = new float[N];
                next.copyTo(back);
                assertThat(back).as("the held work never wrote into the next buffer").containsOnly(9f);
            } finally {
                next.close();
            }
        } finally {
            CL.clReleaseEvent(gate);
        }
    }

    /**
     * An op's future is the caller's own: cancelling it or completing it while the op is still queued (behind held work)
     * neither ends the op nor lets a buffer closed after it give its memory back before the work has run.
     */
    @Test
    void whatACallerDoesToAnOpsFutureLeavesTheBuffersMemoryWithTheWorkStillQueued() throws Exception {
        cl_event gate = userEvent();
        try {
            UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
            UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
            try (BufferAccess access = x.deviceAccess(AccessMode.WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                fill(cl.queue(), cl, 1f, gate, null);
            }
            CompletableFuture<Void> scaled = manager.ops().scaleAsync(x, 2);
            CompletableFuture<Void> filled = manager.ops().fillAsync(y, 3);
            assertThat(scaled.cancel(true)).isTrue();
            assertThat(filled.complete(null)).isTrue();
            x.close();
            y.close();
            assertThat(pendingBlocks()).as("both blocks wait for the work queued on them").isEqualTo(2);

            open(gate);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (pendingBlocks() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
                manager.trim(); // blocks whose work has ended go back at the pool's next call
            }
            assertThat(pendingBlocks()).as("back once the work has run").isZero();
        } finally {
            CL.clReleaseEvent(gate);
        }
    }

    @Test
    void aBlockingCopyOfAnotherBufferBehindStuckWorkFailsAfterTheDeviceWaitInsteadOfHanging() throws Exception {
        reopenWithAShortDeviceWait();
        cl_event gate = userEvent();
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
             UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            y.copyFrom(filled(N, 4f));
            fillHeldAt(x, gate);
            CompletableFuture<Void> read = CompletableFuture.runAsync(() -> y.copyTo(new float[N]));
            assertThatThrownBy(() -> read.get(30, TimeUnit.SECONDS)).as("y has no work of its own: it fails after the device wait")
                    .hasCauseInstanceOf(DeviceTimeoutException.class).hasMessageContaining("device-wait-timeout");
            assertThatThrownBy(() -> y.copyFrom(filled(N, 5f))).isInstanceOf(DeviceTimeoutException.class);

            open(gate);
            float[] back = new float[N];
            y.copyTo(back);
            assertThat(back).as("nothing was written behind the stuck work").containsOnly(4f);
            x.copyTo(back);
            assertThat(back).containsOnly(1f);
        } finally {
            CL.clReleaseEvent(gate);
        }
    }

    /**
     * A blocking copy waits, bounded, for the work queued before it, then copies: work another thread queues while it
     * copies (here a fill held back by a user event, queued between two of a staged copy's chunks) must not hold up the
     * rest of the copy, which would then wait for that work without a bound.
     */
    @Test
    void aBlockingCopyNeverWaitsForWorkQueuedWhileItCopies() throws Exception {
        manager.close();
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                .deviceWaitTimeout(Duration.ofMillis(500)).stagingBufferSize(4096).build();
        boolean caughtMidCopy = false;
        for (int attempt = 0; attempt < 4 && !caughtMidCopy; attempt++) {
            int bytes = (8 << 20) << attempt; // chunks of 4 KiB: a copy long enough to be caught between two of them
            byte[] data = new byte[bytes];
            Arrays.fill(data, (byte) (attempt + 1));
            MemorySegment source = MemorySegment.ofArray(data).asReadOnly(); // read-only: staged, one chunk at a time
            cl_event gate = userEvent();
            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
                 UnifiedBuffer target = manager.allocate(bytes, MemoryLocation.DEVICE)) {
                FutureTask<Void> copy = new FutureTask<>(() -> target.copyFrom(0, source), null);
                Thread copier = Thread.ofPlatform().start(copy);
                awaitChunks(copier, copy); // past its wait for the work queued before it, whatever the machine's load
                fillHeldAt(x, gate);
                caughtMidCopy = !copy.isDone();
                try {
                    assertThat(copy).as("the copy's later chunks do not wait for the fill queued meanwhile")
                            .succeedsWithin(Duration.ofSeconds(20));
                } finally {
                    open(gate);
                }
                byte[] back = new byte[bytes];
                target.copyTo(back);
                assertThat(back).isEqualTo(data);
            } finally {
                CL.clReleaseEvent(gate);
            }
        }
        assertThat(caughtMidCopy).as("a copy was under way when the fill was queued").isTrue();
    }

    /** Until {@code copier} writes its staged chunks (past its wait for earlier work), or its copy is over, within 10 s. */
    private static void awaitChunks(Thread copier, Future<?> copy) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!copy.isDone() && System.nanoTime() < deadline) {
            List<StackTraceElement> stack = List.of(copier.getStackTrace());
            boolean writing = stack.stream().anyMatch(frame -> frame.getClassName().equals(OpenClCopies.class.getName())
                    && frame.getMethodName().equals("write"));
            boolean waiting = stack.stream().anyMatch(frame -> frame.getMethodName().equals("awaitQueuedWork"));
            if (writing && !waiting) {
                return;
            }
            Thread.sleep(1);
        }
    }

    /**
     * The op set's synchronous forms wait for their kernel, which the in-order queue runs only after the stuck work: they
     * give up after the device wait too (the README's "nothing waits forever"), and the op, queued already, runs once the
     * work ahead of it ends.
     */
    @Test
    void aSynchronousOpBehindStuckWorkFailsAfterTheDeviceWaitInsteadOfHanging() throws Exception {
        reopenWithAShortDeviceWait();
        cl_event gate = userEvent();
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
             UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE)) {
            y.copyFrom(filled(N, 4f));
            fillHeldAt(x, gate);
            CompletableFuture<Void> filling = CompletableFuture.runAsync(() -> manager.ops().fill(y, 5));
            CompletableFuture<Double> summing = CompletableFuture.supplyAsync(() -> manager.ops().sum(y));
            try {
                assertThatThrownBy(() -> filling.get(5, TimeUnit.SECONDS)).as("fill behind the stuck work")
                        .hasCauseInstanceOf(DeviceTimeoutException.class).hasMessageContaining("device-wait-timeout");
                assertThatThrownBy(() -> summing.get(5, TimeUnit.SECONDS)).as("sum behind the stuck work")
                        .hasCauseInstanceOf(DeviceTimeoutException.class).hasMessageContaining("device-wait-timeout");
            } finally {
                open(gate);
            }
            float[] back = new float[N];
            y.copyTo(back);
            assertThat(back).as("the fill ran once the work ahead of it ended").containsOnly(5f);
        } finally {
            CL.clReleaseEvent(gate);
        }
    }

    @Test
    void aCloseThatFindsWorkStuckPastItsTimeoutDoesNotWaitAgainInTheBackend() throws Exception {
        manager.close();
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                .closeTimeout(Duration.ofMillis(300)).build();
        cl_event gate = userEvent();
        try (LogCapture backendLog = LogCapture.of(OpenClBackend.class.getName())) {
            UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
            try (BufferAccess access = x.deviceAccess(AccessMode.WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                fill(cl.queue(), cl, 1f, gate, null);
            }
            x.close();
            manager.close();
            assertThat(backendLog.messages(Level.WARNING)).as("the backend keeps its queue at once, its own wait not added to the close's")
                    .anyMatch(message -> message.contains("did not finish before the manager's close timeout ran out"));
        } finally {
            open(gate);
            CL.clReleaseEvent(gate);
        }
    }

    /**
     * Compaction moves a buffer only once the work queued on it has run: behind a fill held at a user event and a launch
     * queued after it, it waits (as host reads do), then moves the buffer with the launch's result.
     */
    @Test
    void compactionMovesABufferOnlyOnceTheWorkQueuedOnItHasRun() throws Exception {
        int big = 2 << 20; // 8 MiB: blocks this large can move
        ComputeKernel add = addKernel();
        List<UnifiedBuffer> before = List.of(manager.allocate(DataType.FLOAT32, big, MemoryLocation.DEVICE),
                manager.allocate(DataType.FLOAT32, big, MemoryLocation.DEVICE), manager.allocate(DataType.FLOAT32, big, MemoryLocation.DEVICE));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, big, MemoryLocation.DEVICE)) {
            before.forEach(UnifiedBuffer::close); // free space ahead of x, where compaction moves it
            cl_event gate = userEvent();
            try {
                fillHeldAt(x, gate);
                add.launch(LaunchShape.of(big), x, (long) big, 2f);
                CompletableFuture<Long> moved = CompletableFuture.supplyAsync(() -> (long) manager.compact(MemoryLocation.DEVICE).buffersMoved());
                Thread.sleep(300);
                assertThat(moved).as("waits for the held work").isNotDone();
                open(gate);
                assertThat(moved.get(10, TimeUnit.SECONDS)).isEqualTo(1L);
            } finally {
                CL.clReleaseEvent(gate);
            }
            float[] back = new float[big];
            x.copyTo(back);
            assertThat(back).as("the fill, then the launch, then the move").containsOnly(3f);
        }
    }

    /**
     * A close on a thread interrupted before it and again while it waits still waits, within its timeout, for the work
     * queued on a closed buffer, then frees the memory and releases the queue, the interrupt put back. Before, the
     * backend's wait gave up at the interrupt: the pools kept their memory and the backend its queue for good, and the
     * warnings blamed a close timeout that had not run out and a copy that was not under way.
     */
    @Test
    void aCloseOnAnInterruptedThreadStillWaitsForTheQueuedWorkAndFreesEverything() throws Exception {
        cl_event gate = userEvent();
        try (LogCapture managerLog = LogCapture.managerLog(); LogCapture backendLog = LogCapture.of(OpenClBackend.class.getName())) {
            UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
            fillHeldAt(x, gate);
            manager.ops().scaleAsync(x, 2);
            x.close();
            FutureTask<Boolean> close = new FutureTask<>(() -> {
                Thread.currentThread().interrupt();
                manager.close();
                return Thread.currentThread().isInterrupted();
            });
            Thread closing = Thread.ofPlatform().start(close);
            Thread.sleep(200);
            closing.interrupt();
            Thread.sleep(200);
            open(gate);
            assertThat(close.get(10, TimeUnit.SECONDS)).as("the interrupt is put back").isTrue();
            assertThat(managerLog.messages(Level.WARNING)).as("the memory went back").isEmpty();
            assertThat(backendLog.messages(Level.WARNING)).as("the queue was released").isEmpty();
        } finally {
            CL.clReleaseEvent(gate);
        }
    }

    private void reopenWithAShortDeviceWait() {
        manager.close();
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                .deviceWaitTimeout(Duration.ofMillis(500)).build();
    }

    /** Ones into {@code x} on the backend's queue, held back at {@code gate}, and with them everything queued behind. */
    private static void fillHeldAt(UnifiedBuffer x, cl_event gate) {
        try (BufferAccess access = x.deviceAccess(AccessMode.WRITE)) {
            OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
            fill(cl.queue(), cl, 1f, gate, null);
        }
    }

    private long pendingBlocks() {
        return manager.snapshot(MemoryLocation.DEVICE).segments().stream().flatMap(segment -> segment.blocks().stream())
                .filter(block -> block.state() == MemorySnapshot.BlockState.PENDING).count();
    }

    private cl_event userEvent() {
        int[] error = new int[1];
        cl_event event = CL.clCreateUserEvent(manager.nativeDevice(OpenClNativeDevice.class).context(), error);
        assertThat(error[0]).isEqualTo(CL_SUCCESS);
        return event;
    }

    private static void open(cl_event gate) {
        assertThat(CL.clSetUserEventStatus(gate, CL_COMPLETE)).isEqualTo(CL_SUCCESS);
    }

    /**
     * Fills {@code buffer} with {@code value} on {@code own} through a device access, after {@code gate} and the buffer's
     * earlier work (its wait list), and records that fill as the buffer's work.
     */
    private static void fillRecorded(cl_command_queue own, UnifiedBuffer buffer, float value, cl_event gate) {
        try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
            OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
            cl_event filled = new cl_event();
            fill(own, cl, value, gate, filled);
            cl.recordWork(filled);
            CL.clReleaseEvent(filled);
        }
    }

    /** Every float of the handle's bytes set to {@code value} on {@code queue}, after {@code gate} and the handle's wait list. */
    private static void fill(cl_command_queue queue, OpenClDeviceHandle cl, float value, cl_event gate, cl_event done) {
        cl_event[] waits = done == null ? new cl_event[] {gate} : new cl_event[] {gate, cl.waitList()[0]};
        int code = CL.clEnqueueFillBuffer(queue, cl.memory(), Pointer.to(new float[] {value}), Sizeof.cl_float, cl.offset(),
                cl.byteSize(), waits.length, waits, done);
        assertThat(code).isEqualTo(CL_SUCCESS);
        assertThat(CL.clFlush(queue)).isEqualTo(CL_SUCCESS);
    }

    private static float[] filled(int n, float value) {
        float[] values = new float[n];
        Arrays.fill(values, value);
        return values;
    }
}
