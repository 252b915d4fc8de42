package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.AccessMode;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import dev.compute.memory.testing.Breakpoint;
import dev.compute.memory.testing.ChildJvm;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.cl_command_queue;
import org.jocl.cl_mem;
import org.junit.jupiter.api.Test;

/**
 * A close that begins while a call is inside the backend: the manager closes its backend when the device is idle even
 * where calls did not end within its close timeout, and a blocking copy staged chunk by chunk runs on the backend's
 * transfer queue, which the device's idleness does not cover. In a JVM of its own: an enqueue on a released queue ends
 * the process.
 */
class OpenClCloseUnderACallTest {

    @Test
    void closeWaitsForAStagedCopyUnderWayBeforeItReleasesTheQueue() throws Exception {
        OpenClTestSupport.requireOpenCl();
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(120), CloseUnderAStagedCopy.class);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("the copy ended before the close returned: true");
    }

    @Test
    void closeWaitsForAnOpBuildingItsProgramBeforeItReleasesTheContext() throws Exception {
        OpenClTestSupport.requireOpenCl();
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(120), CloseUnderAnOpsBuild.class);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("the op ended before the close returned: true");
    }

    @Test
    void closeWaitsForAnAllocationUnderWayBeforeItReleasesTheContext() throws Exception {
        OpenClTestSupport.requireOpenCl();
        ChildJvm.Result result = ChildJvm.runDebuggable(Duration.ofSeconds(120), CloseUnderAnAllocation.class);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe())
                .contains("DEVICE: the close returned under the allocation: false")
                .contains("PINNED: the close returned under the allocation: false")
                .contains("UNIFIED: the close returned under the allocation: false");
    }

    @Test
    void closeKeepsTheQueueAndContextWhileADeviceHandleIsOpen() throws Exception {
        OpenClTestSupport.requireOpenCl();
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(120), CloseUnderAnOpenHandle.class);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe())
                .contains("queue and context released under the open handle: false")
                .contains("the holder's write after the close: CL_SUCCESS");
    }

    /** Waits until {@code thread} is inside {@code method} of {@code type}; fails if it ended first. */
    private static void awaitInside(Thread thread, Class<?> type, String method, AtomicReference<Throwable> failure) {
        while (Arrays.stream(thread.getStackTrace()).noneMatch(frame -> frame.getClassName().equals(type.getName())
                && frame.getMethodName().equals(method))) {
            if (!thread.isAlive()) {
                throw new AssertionError(thread.getName() + " ended before the close began", failure.get());
            }
            Thread.onSpinWait();
        }
    }

    static final class CloseUnderAnOpsBuild {
        public static void main(String[] args) throws Exception {
            OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings());
            NativeAllocation x = backend.allocate(MemoryLocation.DEVICE, 4096);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicReference<CompletableFuture<Double>> sum = new AtomicReference<>();
            Thread summing = Thread.ofPlatform().name("summing").start(() -> {
                try {
                    sum.set(backend.ops().sum(new Region(x, 0, 1024, DataType.FLOAT32))); // the first op builds the program
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            awaitInside(summing, OpenClKernelOps.class, "build", failure);
            backend.close();
            System.out.println("the op ended before the close returned: " + !summing.isAlive());
            summing.join();
            // built, the op either was queued before the close began or finds the backend closed
            if (failure.get() != null && !(failure.get() instanceof IllegalStateException closed && closed.getMessage().endsWith("is closed"))) {
                throw new AssertionError("the op failed", failure.get());
            }
            if (sum.get() != null) {
                sum.get().join();
            }
        }
    }

    /**
     * An allocation held, as by a debugger, past the backend's open check and before its first OpenCL call, while another
     * thread closes the backend; then let go.
     */
    static final class CloseUnderAnAllocation {
        public static void main(String[] args) throws Exception {
            for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
                OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings());
                AtomicReference<NativeAllocation> allocation = new AtomicReference<>();
                AtomicReference<Throwable> failure = new AtomicReference<>();
                try (Breakpoint breakpoint = Breakpoint.at(OpenClAllocator.class, "allocate", 1, "allocating")) {
                    Thread allocating = Thread.ofPlatform().name("allocating").start(() -> {
                        try {
                            allocation.set(backend.allocate(location, 1 << 20));
                        } catch (Throwable t) {
                            failure.set(t);
                        }
                    });
                    breakpoint.awaitHit(60);
                    Thread closing = Thread.ofPlatform().name("closing").start(backend::close);
                    // until the close waits for the calls under way, or has returned
                    while (closing.isAlive() && !(closing.getState() == Thread.State.TIMED_WAITING && Arrays.stream(closing.getStackTrace())
                            .anyMatch(frame -> frame.getClassName().equals(OpenClQueue.class.getName()) && frame.getMethodName().equals("callsEnded")))) {
                        Thread.onSpinWait();
                    }
                    System.out.println(location + ": the close returned under the allocation: " + !closing.isAlive());
                    breakpoint.release();
                    allocating.join();
                    closing.join();
                }
                // made before the close released the context, or refused as the backend closed
                if (failure.get() != null && !(failure.get() instanceof IllegalStateException closed && closed.getMessage().endsWith("is closed"))) {
                    throw new AssertionError(location + " allocation failed", failure.get());
                }
                if (allocation.get() != null) {
                    backend.free(allocation.get());
                }
            }
        }
    }

    /**
     * A thread holds a device handle open, with the queue and buffer it gave, while another closes the backend (as a
     * manager does once its close timeout has passed); the holder then queues its own work on what the handle gave.
     */
    static final class CloseUnderAnOpenHandle {
        public static void main(String[] args) throws Exception {
            OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings());
            NativeAllocation allocation = backend.allocate(MemoryLocation.DEVICE, 4096);
            CountDownLatch handleTaken = new CountDownLatch(1);
            CountDownLatch backendClosed = new CountDownLatch(1);
            AtomicReference<Object> written = new AtomicReference<>();
            Thread holder = Thread.ofPlatform().name("holder").start(() -> {
                try {
                    OpenClDeviceHandle cl = backend.openDeviceHandle(allocation, 0, 4096, AccessMode.WRITE);
                    cl_command_queue queue = cl.queue();
                    cl_mem memory = cl.memory();
                    handleTaken.countDown();
                    backendClosed.await();
                    byte[] sevens = new byte[4096];
                    Arrays.fill(sevens, (byte) 7);
                    written.set(CL.stringFor_errorCode(CL.clEnqueueWriteBuffer(queue, memory, true, 0, sevens.length, Pointer.to(sevens),
                            0, null, null)));
                    cl.end();
                } catch (Throwable t) {
                    written.set(t);
                }
            });
            handleTaken.await();
            backend.close();
            System.out.println("queue and context released under the open handle: " + backend.queue().isReleased());
            backendClosed.countDown();
            holder.join();
            System.out.println("the holder's write after the close: " + written.get());
        }
    }

    static final class CloseUnderAStagedCopy {
        public static void main(String[] args) throws Exception {
            // 4 KiB staging buffers: a read-only heap segment of 64 MiB goes in 16384 blocking writes
            OpenClBackend backend = OpenClTestSupport.openBackend(new BackendSettings(0, true, 4096, Map.of()));
            long bytes = 64L << 20;
            NativeAllocation target = backend.allocate(MemoryLocation.DEVICE, bytes);
            MemorySegment source = MemorySegment.ofArray(new byte[(int) bytes]).asReadOnly();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread copying = Thread.ofPlatform().start(() -> {
                try {
                    backend.copyToDevice(source, target, 0, bytes);
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            while (Arrays.stream(copying.getStackTrace()).noneMatch(frame -> frame.getClassName().equals(OpenClCopies.class.getName())
                    && frame.getMethodName().equals("write"))) {
                if (!copying.isAlive()) {
                    throw new AssertionError("the copy ended before the close began", failure.get());
                }
                Thread.onSpinWait();
            }
            backend.close();
            System.out.println("the copy ended before the close returned: " + !copying.isAlive());
            copying.join();
            if (failure.get() != null) {
                throw new AssertionError("the copy failed", failure.get());
            }
        }
    }
}
