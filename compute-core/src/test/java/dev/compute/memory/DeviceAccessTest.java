package dev.compute.memory;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.simulated.SimulatedDiscreteBackend.SimulatedDeviceHandle;
import dev.compute.memory.testing.FaultInjectingBackend;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A user's own kernel on a discrete device, through a device access: the simulated device's memory stands for the
 * GPU's, written by "native code" at the access's allocation and offset, as a CUDA or OpenCL kernel would.
 */
class DeviceAccessTest {

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(device)
            .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(Duration.ZERO).build();
    private final ExecutorService other = Executors.newSingleThreadExecutor();

    @AfterEach
    void close() {
        other.shutdownNow();
        manager.close();
    }

    @Test
    void whatTheKernelWritesIsWhatCopyToReadsWithoutASync() {
        try (UnifiedBuffer padding = manager.allocate(1000, MemoryLocation.DEVICE);
             UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 64, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new float[64]);
            float[] before = new float[64];
            buffer.copyTo(before); // a host read leaves a mirror in step with the device
            try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
                assertThat(access.offset()).as("the buffer's block does not start its segment").isPositive();
                assertThatThrownBy(access::segment).isInstanceOf(IllegalStateException.class).hasMessageContaining("cannot address");
                MemorySegment kernelView = access.handle(SimulatedDeviceHandle.class).bytes();
                for (int i = 0; i < 64; i++) {
                    kernelView.setAtIndex(JAVA_FLOAT_UNALIGNED, i, i * 0.5f);
                }
            }
            assertThat(buffer.state()).isIn(BufferState.DEVICE_ONLY, BufferState.DEVICE_DIRTY);
            float[] back = new float[64];
            buffer.copyTo(back);
            assertThat(back[63]).isEqualTo(31.5f);
            try (BufferAccess host = buffer.hostAccess(AccessMode.READ)) {
                assertThat(host.segment().getAtIndex(JAVA_FLOAT_UNALIGNED, 10)).isEqualTo(5f);
            }
        }
    }

    @Test
    void aNewerHostCopyReachesTheKernelFirst() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE)) {
            buffer.hostView().setAtIndex(JAVA_FLOAT_UNALIGNED, 3, 9f);
            assertThat(buffer.state()).isEqualTo(BufferState.HOST_ONLY);
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ)) {
                MemorySegment kernelView = access.handle(SimulatedDeviceHandle.class).bytes();
                assertThat(kernelView.getAtIndex(JAVA_FLOAT_UNALIGNED, 3)).isEqualTo(9f);
            }
            assertThat(buffer.state()).as("a read leaves the copies in step").isEqualTo(BufferState.SYNCHRONIZED);
        }
    }

    @Test
    void aSliceHandsTheKernelItsOwnBytes() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 100, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new float[100]);
            UnifiedBuffer slice = buffer.slice(40, 10);
            long blockStart;
            try (BufferAccess whole = buffer.deviceAccess(AccessMode.READ)) {
                blockStart = whole.offset();
            }
            try (BufferAccess access = slice.deviceAccess(AccessMode.READ_WRITE)) {
                assertThat(access.offset()).isEqualTo(blockStart + 160);
                assertThat(access.byteSize()).isEqualTo(40);
                access.handle(SimulatedDeviceHandle.class).bytes().setAtIndex(JAVA_FLOAT_UNALIGNED, 0, 1f);
            }
            float[] back = new float[100];
            buffer.copyTo(back);
            assertThat(back[39]).isZero();
            assertThat(back[40]).isEqualTo(1f);
        }
    }

    @Test
    void workStillRunningKeepsTheMemoryAndHoldsBackHostReads() throws Exception {
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
        buffer.copyFrom(new float[1024]);
        device.queueWork(kernel);
        try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
            access.handle(SimulatedDeviceHandle.class).bytes().fill((byte) 1);
        } finally {
            device.queueWork(CompletableFuture.completedFuture(null));
        }
        Future<?> read = other.submit(() -> buffer.copyTo(new float[1]));
        assertThatThrownBy(() -> read.get(200, TimeUnit.MILLISECONDS)).as("the read waits for the kernel").isInstanceOf(TimeoutException.class);
        kernel.complete(null);
        read.get(10, TimeUnit.SECONDS);

        CompletableFuture<Void> second = new CompletableFuture<>();
        device.queueWork(second);
        long closedAt;
        try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
            closedAt = access.offset();
        } finally {
            device.queueWork(CompletableFuture.completedFuture(null));
        }
        buffer.close();
        try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
             BufferAccess access = next.deviceAccess(AccessMode.READ)) {
            assertThat(access.offset()).as("the closed buffer's block waits for its kernel").isNotEqualTo(closedAt);
        }
        second.complete(null);
    }

    /** A closed buffer's host mirror waits for its device work as its device memory does: held, not cached, until then. */
    @Test
    void aClosedBuffersMirrorWaitingForItsDeviceWorkIsHeldNotCached() {
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE);
        buffer.hostView().fill((byte) 1); // a mirror at PINNED
        device.queueWork(kernel);
        try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
            assertThat(access.isDeviceAccess()).isTrue();
        } finally {
            device.queueWork(CompletableFuture.completedFuture(null));
        }
        buffer.close();
        for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED)) {
            MemoryStatistics waiting = manager.statistics(location);
            assertThat(waiting.heldBuffers()).as("%s", location).isEqualTo(1);
            assertThat(waiting.heldBytes()).as("%s", location).isEqualTo(4096);
            assertThat(waiting.cachedBytes()).as("%s: nothing can be served from it yet", location)
                    .isEqualTo(waiting.reservedBytes() - 4096);
        }
        kernel.complete(null);
        for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED)) {
            MemoryStatistics done = manager.statistics(location);
            assertThat(done.heldBytes()).as("%s", location).isZero();
            assertThat(done.cachedBytes()).as("%s", location).isEqualTo(done.reservedBytes());
        }
    }

    @Test
    void workRecordedByHandOnAnotherStreamCountsToo() throws Exception {
        CompletableFuture<Void> own = new CompletableFuture<>();
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new float[16]);
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                access.inFlightUntil(own);
            }
            Future<?> read = other.submit(() -> buffer.copyTo(new float[1]));
            assertThatThrownBy(() -> read.get(200, TimeUnit.MILLISECONDS)).isInstanceOf(TimeoutException.class);
            own.complete(null);
            read.get(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void failedDeviceWorkFailsItsLauncherNotLaterReaders() throws Exception {
        FaultInjectingBackend faulty = new FaultInjectingBackend(new SimulatedDiscreteBackend(), 1);
        try (UnifiedMemoryManager own = UnifiedMemoryManager.builder().backend(faulty).timelineInterval(Duration.ZERO).build();
             UnifiedBuffer buffer = own.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new float[] {1, 2, 3});
            CompletableFuture<Void> kernelFaults = new CompletableFuture<>();
            faulty.failNextKernelWhen(kernelFaults);
            CompletableFuture<Void> launched = own.ops().scaleAsync(buffer, 2.0);
            assertThat(launched).as("the kernel is still running").isNotDone();
            Future<?> reader = other.submit(() -> buffer.copyTo(new float[1])); // waits for the kernel
            Thread.sleep(50);
            kernelFaults.complete(null);

            assertThat(launched).as("the launcher hears of the failure").failsWithin(Duration.ofSeconds(10))
                    .withThrowableOfType(ExecutionException.class).withCauseInstanceOf(FaultInjectingBackend.InjectedFault.class);
            reader.get(10, TimeUnit.SECONDS); // the reader that waited for it does not
            float[] back = new float[3];
            buffer.copyTo(back);
            assertThat(back).as("and reads the buffer as the failed kernel left it").hasSize(3);
        }
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new float[16]);
            CompletableFuture<Void> failsWhileWaitedFor = new CompletableFuture<>();
            try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
                access.inFlightUntil(failsWhileWaitedFor);
            }
            Future<?> read = other.submit(() -> buffer.copyTo(new float[1]));
            Thread.sleep(50);
            failsWhileWaitedFor.completeExceptionally(new IllegalStateException("kernel failed"));
            read.get(10, TimeUnit.SECONDS);

            try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
                access.inFlightUntil(CompletableFuture.failedFuture(new IllegalStateException("failed at once")));
            }
            buffer.copyTo(new float[1]);
        }
    }

    /**
     * A close on an interrupted thread (a container's shutdown after its executors were interrupted) still waits, within
     * its timeout, for the device work a closed buffer's memory waits for, and frees everything; the interrupt is put back.
     * Before, the first wait that saw the interrupt gave up: the pools kept all their memory for good, and the warning
     * said the close timeout had run out.
     */
    @Test
    void aCloseOnAnInterruptedThreadStillWaitsForDeviceWorkAndFreesEverything() throws Exception {
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
        device.queueWork(kernel);
        try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
            assertThat(access.isDeviceAccess()).isTrue();
        } finally {
            device.queueWork(CompletableFuture.completedFuture(null));
        }
        buffer.close();
        other.submit(() -> {
            Thread.sleep(200);
            return kernel.complete(null);
        });
        Thread.currentThread().interrupt();
        try {
            manager.close();
            assertThat(Thread.currentThread().isInterrupted()).as("the interrupt is put back").isTrue();
        } finally {
            Thread.interrupted();
        }
        assertThat(kernel).as("the close waited for the kernel").isDone();
        assertThat(device.liveAllocations()).as("the pools' memory went back").isZero();
    }

    @Test
    void aReadBehindWorkThatNeverFinishesFailsInTimeAndTheBufferStaysUsable() throws Exception {
        try (UnifiedMemoryManager bounded = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .deviceWaitTimeout(Duration.ofMillis(300)).timelineInterval(Duration.ZERO).build()) {
            UnifiedBuffer buffer = bounded.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE);
            buffer.copyFrom(new float[16]);
            CompletableFuture<Void> stuck = new CompletableFuture<>();
            try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
                access.inFlightUntil(stuck);
            }
            assertThatThrownBy(() -> buffer.copyTo(new float[1])).isInstanceOf(DeviceTimeoutException.class)
                    .hasMessageContaining("did not finish within 300 ms").hasMessageContaining("UnifiedBuffer[DEVICE, 64 bytes");
            Future<?> closing = other.submit(buffer::close);
            closing.get(10, TimeUnit.SECONDS); // close does not wait for the stuck work (a slow machine may take a moment to run it)
            assertThat(buffer.isClosed()).isTrue();
            assertThat(bounded.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
            stuck.complete(null);
        }
    }

    @Test
    void theHandleOfAnotherBackendIsRefusedClearly() {
        try (UnifiedBuffer buffer = manager.allocate(64, MemoryLocation.DEVICE);
             BufferAccess access = buffer.deviceAccess(AccessMode.READ)) {
            interface OtherHandle extends dev.compute.memory.spi.DeviceHandle {}
            assertThatThrownBy(() -> access.handle(OtherHandle.class)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("simulated backend has no OtherHandle").hasMessageContaining("SimulatedDeviceHandle");
        }
    }
    @Test
    void aDeviceAccessWhoseThreadDiedOpenKeepsItsMemoryUntilTheWorkItQueuedIsDone() throws Exception {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        device.queueWork(kernel); // what the dying thread's access queues: a kernel still running
        long[] at = new long[1];
        Thread dying = Thread.ofPlatform().start(() -> {
            BufferAccess access = buffer.deviceAccess(AccessMode.WRITE); // never ended: its thread dies with it open
            at[0] = access.offset();
        });
        dying.join();
        device.queueWork(CompletableFuture.completedFuture(null));
        buffer.close();

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2); // the sweeper looks every 200 ms
        while (System.nanoTime() < deadline) {
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 BufferAccess access = next.deviceAccess(AccessMode.READ)) {
                assertThat(access.offset()).as("a block still written by the dead thread's kernel is lent again").isNotEqualTo(at[0]);
            }
            Thread.sleep(50);
        }
        kernel.complete(null);
        boolean reused = false;
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!reused && System.nanoTime() < deadline) {
            try (UnifiedBuffer again = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 BufferAccess access = again.deviceAccess(AccessMode.READ)) {
                reused = access.offset() == at[0];
            }
        }
        assertThat(reused).as("once the kernel is done, the block goes back to the pool").isTrue();
    }

    /**
     * An access left open by a thread that lives on past its buffer's close, then ends without calling in again: the
     * closed buffer's memory comes back once the sweeper sees the thread ended, as it does for views, not only at
     * the manager's next sweep for another reason.
     */
    @Test
    void anAccessWhoseThreadDiesOpenAfterItsBufferClosedGivesTheMemoryBack() throws Exception {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
        CountDownLatch opened = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        Thread dying = Thread.ofPlatform().start(() -> {
            buffer.deviceAccess(AccessMode.WRITE); // never ended: its thread dies with it open
            opened.countDown();
            try {
                closed.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertThat(opened.await(10, TimeUnit.SECONDS)).isTrue();
        buffer.close();
        assertThat(manager.statistics(MemoryLocation.DEVICE).heldBuffers()).as("held by the open access").isOne();
        closed.countDown();
        dying.join();

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5); // the sweeper looks every 200 ms
        while (manager.statistics(MemoryLocation.DEVICE).heldBuffers() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(20); // reading figures is no call in
        }
        assertThat(manager.statistics(MemoryLocation.DEVICE).heldBuffers()).as("back once the thread ended").isZero();
    }

    @Test
    void aSharedWritingHostAccessOnAnotherThreadRefusesDeviceWritesUntilItEndsAndADeadThreadsAccessRefusesNothing()
            throws Exception {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new float[16]);
            BufferAccess shared = other.submit(() -> buffer.sharedHostAccess(AccessMode.WRITE)).get(30, TimeUnit.SECONDS);
            assertThatThrownBy(() -> buffer.deviceAccess(AccessMode.READ_WRITE)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("while a WRITE host access to it is open (shared)");
            shared.segment().setAtIndex(JAVA_FLOAT_UNALIGNED, 2, 4f);
            shared.close();
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                MemorySegment kernelView = access.handle(SimulatedDeviceHandle.class).bytes();
                kernelView.setAtIndex(JAVA_FLOAT_UNALIGNED, 2, kernelView.getAtIndex(JAVA_FLOAT_UNALIGNED, 2) * 2);
            }

            Thread leaking = Thread.ofPlatform().start(() -> buffer.hostAccess(AccessMode.WRITE)); // never ended
            leaking.join(30_000);
            assertThat(leaking.isAlive()).isFalse();
            try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
                assertThat(access.isOpen()).as("a dead thread's access ends nothing any more").isTrue();
            }
            float[] back = new float[16];
            buffer.copyTo(back);
            assertThat(back[2]).as("the shared access's write, then the device's").isEqualTo(8f);
        }
    }
}
