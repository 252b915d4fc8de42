package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Level;
import org.jocl.CL;
import org.jocl.cl_event;
import org.junit.jupiter.api.Test;

/** The manager a user builds with {@code backend("opencl")}: options reach the provider, locations and ops work. */
class OpenClManagerTest {

    @Test
    void aManagerBuiltByNameRunsOnTheOpenClDevice() {
        OpenClTestSupport.requireOpenCl();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build()) {
            assertThat(manager.backendInfo().backend()).isEqualTo("opencl");
            assertThat(manager.defaultLocation()).isEqualTo(MemoryLocation.DEVICE);
            assertThat(manager.locations()).contains(MemoryLocation.DEVICE, MemoryLocation.HOST, MemoryLocation.PINNED);
            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 4096); UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 4096)) {
                assertThat(x.isHostAccessible()).isFalse();
                manager.ops().fill(x, 2);
                manager.ops().fill(y, 1);
                CompletableFuture<Void> axpy = manager.ops().axpyAsync(3, x, y);
                axpy.join();
                assertThat(y.state()).isEqualTo(BufferState.DEVICE_ONLY);
                float[] back = new float[4096];
                y.copyTo(back);
                assertThat(back).containsOnly(7f);
                assertThat(manager.ops().sum(y)).isEqualTo(7.0 * 4096);
            }
        }
    }

    /**
     * The op set reuses what it sets a kernel's arguments from (under the kernel's lock): threads filling and scaling
     * buffers of their own at once, some of them slices at an element offset and in FLOAT64, each get their own values.
     */
    @Test
    void opsOnManyThreadsAtOnceEachUseTheirOwnArguments() throws Exception {
        OpenClTestSupport.requireOpenCl();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build()) {
            boolean fp64 = manager.nativeDevice(OpenClNativeDevice.class).hasDoublePrecision();
            int threads = 6;
            List<CompletableFuture<Void>> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                workers.add(CompletableFuture.runAsync(() -> {
                    DataType type = fp64 && id % 2 == 1 ? DataType.FLOAT64 : DataType.FLOAT32;
                    try (UnifiedBuffer whole = manager.allocate(type, 1000 + id); UnifiedBuffer x = whole.slice(id, 500 + id)) {
                        for (int round = 0; round < 40; round++) {
                            manager.ops().fillAsync(whole, -1);
                            manager.ops().fillAsync(x, id + round);
                            manager.ops().scaleAsync(x, 2).join();
                            double[] back = new double[500 + id];
                            float[] backFloats = new float[500 + id];
                            if (type == DataType.FLOAT64) {
                                x.copyTo(back);
                            } else {
                                x.copyTo(backFloats);
                                for (int i = 0; i < back.length; i++) {
                                    back[i] = backFloats[i];
                                }
                            }
                            assertThat(back).as("thread %d, round %d", id, round).containsOnly(2.0 * (id + round));
                            assertThat(manager.ops().sum(whole)).isEqualTo(2.0 * (id + round) * (500 + id) - (1000 + id - (500 + id)));
                        }
                    }
                }, runnable -> Thread.ofPlatform().start(runnable)));
            }
            CompletableFuture.allOf(workers.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
        }
    }

    @Test
    void aBufferClosedWhileItsKernelRunsIsReusedOnlyAfterwards() {
        OpenClTestSupport.requireOpenCl();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build()) {
            UnifiedBuffer big = manager.allocate(DataType.FLOAT32, 1 << 22);
            CompletableFuture<Void> fill = manager.ops().fillAsync(big, 1);
            big.close();
            fill.join();
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, 1 << 22)) {
                manager.ops().fill(next, 4);
                assertThat(manager.ops().sum(next)).isEqualTo(4.0 * (1 << 22));
            }
        }
    }

    @Test
    void unifiedBuffersShareOneCopyOrAreRefusedWithTheBackendsReason() {
        OpenClTestSupport.requireOpenCl();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
             OpenClBackend probe = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings())) {
            var unified = probe.supports(MemoryLocation.UNIFIED);
            if (unified.available()) {
                assertThat(manager.locations()).contains(MemoryLocation.UNIFIED);
                try (UnifiedBuffer shared = manager.allocate(DataType.FLOAT64, 100, MemoryLocation.UNIFIED)) {
                    assertThat(shared.isHostAccessible()).isTrue();
                    shared.copyFrom(new double[] {1, 2, 3});
                    manager.ops().scale(shared, 10);
                    assertThat(shared.readOnlyHostView().getAtIndex(java.lang.foreign.ValueLayout.JAVA_DOUBLE, 2)).isEqualTo(30.0);
                }
            } else {
                assertThat(manager.locations()).doesNotContain(MemoryLocation.UNIFIED);
                assertThatThrownBy(() -> manager.allocate(64, MemoryLocation.UNIFIED)).isInstanceOf(IllegalArgumentException.class)
                        .hasMessageContaining(unified.detail());
            }
        }
    }

    @Test
    void optionsReachTheProviderAndABadPlatformFailsWithThePlatformsFound() {
        OpenClTestSupport.requireOpenCl();
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend("opencl")
                .backendOption(OpenClBackendProvider.PLATFORM_OPTION, "no-such-platform").build())
                .isInstanceOf(BackendUnavailableException.class)
                .hasMessageContaining("compute backend 'opencl' is not available")
                .hasMessageContaining("platforms found: [" + OpenClDevices.enumerate().getFirst().platformName());
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend("opencl").device(1000).build())
                .isInstanceOf(BackendUnavailableException.class).hasMessageContaining("device index 1000 is out of range");
    }

    @Test
    void aRequestAboveTheLargestSingleAllocationFailsAtOnceKeepingTheCacheAndAskingNoHandler() {
        OpenClTestSupport.requireOpenCl();
        AtomicInteger handlerCalls = new AtomicInteger();
        long largest;
        try (OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings())) {
            largest = backend.maxAllocationBytes();
        }
        // the pool's cap above the backend's limit, which a device's limit may reach or pass (PoCL: 4 GiB on a machine of
        // 24 GiB, the default cap; 37.5 GB on an H200)
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                .maxPoolSize(Math.max(4L << 30, largest + (64L << 20)))
                .outOfMemoryHandler((location, bytes, attempt, failure) -> handlerCalls.incrementAndGet() < 3).build()) {
            long tooLarge = largest + (2L << 20);
            manager.allocate(30L << 20).close();
            long cached = manager.statistics(MemoryLocation.DEVICE).cachedBytes();
            assertThat(cached).isPositive();

            assertThatThrownBy(() -> manager.allocate(tooLarge)).isInstanceOf(AllocationAboveLimitException.class)
                    .hasMessageContaining("above the backend's largest single allocation at DEVICE (" + largest + " bytes)");
            assertThatThrownBy(() -> manager.allocateAsync(tooLarge, Duration.ofMinutes(5)).get(10, TimeUnit.SECONDS))
                    .hasCauseInstanceOf(AllocationAboveLimitException.class);

            MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
            assertThat(after.cachedBytes()).as("the cache is kept").isEqualTo(cached);
            assertThat(after.oomRetries()).isZero();
            assertThat(handlerCalls).as("no handler can make room for it").hasValue(0);
            // the pool's plain segments are whole pieces of 2 MiB; an H200's largest (37,527,470,080 bytes) is not
            long largestBlock = largest - largest % (2L << 20);
            if (largestBlock < largest) {
                assertThatThrownBy(() -> manager.allocate(largest)).isInstanceOf(AllocationAboveLimitException.class)
                        .hasMessageContaining("the largest block the pool gives at DEVICE is " + largestBlock + " bytes");
            }
            try (UnifiedBuffer fits = manager.allocate(largestBlock, MemoryLocation.DEVICE)) {
                assertThat(fits.byteSize()).isEqualTo(largestBlock);
            }
        }
    }

    /** PoCL grants clCreateBuffer past the device's memory (OpenCL allocates lazily); nothing here is touched. */
    @Test
    void deviceBuffersPastTheDevicesGlobalMemoryAreRefusedWhenAskedForUnderACapAboveIt() {
        OpenClTestSupport.requireOpenCl();
        List<UnifiedBuffer> held = new ArrayList<>();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").maxPoolSize(1L << 40)
                .timelineInterval(Duration.ZERO).build()) {
            long global = manager.backendInfo().deviceTotalBytes();
            long chunk = Math.min(global / 4, 1L << 30);
            DeviceOutOfMemoryException refusal = null;
            for (int i = 0; i < 2 * global / chunk + 2 && refusal == null; i++) {
                try {
                    held.add(manager.allocate(chunk, MemoryLocation.DEVICE));
                } catch (DeviceOutOfMemoryException e) {
                    refusal = e;
                }
            }

            assertThat(refusal).as("a refusal before twice the device's memory").isNotNull();
            assertThat(refusal.reason()).isEqualTo(OutOfMemoryReason.DEVICE_MEMORY);
            assertThat(refusal.getMessage()).contains("(CL_DEVICE_GLOBAL_MEM_SIZE)");
            assertThat(held.size() * chunk).isLessThanOrEqualTo(global);
            held.forEach(UnifiedBuffer::close);
            held.clear();
            try (UnifiedBuffer after = manager.allocate(chunk, MemoryLocation.DEVICE)) {
                assertThat(after.byteSize()).as("freed buffers are counted back").isEqualTo(chunk);
            }
        } finally {
            held.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * OpenCL has no portable query for free device memory, so the backend reports it as -1; every out-of-memory message
     * said "device free -1 of 9489821696 bytes", a figure that reads as a device more than full.
     */
    @Test
    void anOutOfMemoryMessageDoesNotGiveTheFreeMemoryOpenClCannotTell() {
        OpenClTestSupport.requireOpenCl();
        long mib = 1L << 20;
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").maxPoolSize(32 * mib)
                .timelineInterval(Duration.ZERO).build();
             UnifiedBuffer first = manager.allocate(16 * mib, MemoryLocation.DEVICE);
             UnifiedBuffer second = manager.allocate(16 * mib, MemoryLocation.DEVICE)) {
            assertThat(manager.deviceMemory().freeBytes()).as("what OpenCL tells of free memory").isNegative();

            assertThatThrownBy(() -> manager.allocate(16 * mib, MemoryLocation.DEVICE))
                    .isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT))
                    .hasMessageContaining("compute.memory.pooling.max-pool-size (" + 32 * mib + " bytes)")
                    .hasMessageNotContaining("-1")
                    .hasMessageContaining("the backend does not report the device's free memory (of " + manager.backendInfo().deviceTotalBytes() + " bytes)");
        }
    }

    /**
     * A PINNED buffer's free unmaps its host memory before it releases the buffer: a release refused then leaves memory
     * the pool can neither hand out again nor call given back. It stays reserved (and no cache), the next trim tries again.
     */
    @Test
    void aPinnedSegmentWhoseReleaseIsRefusedStaysReservedUntilALaterTrimGivesItBack() {
        OpenClTestSupport.requireOpenCl();
        OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings());
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(backend).timelineInterval(Duration.ZERO).build()) {
            manager.allocate(4096, MemoryLocation.PINNED).close();
            long reserved = manager.statistics(MemoryLocation.PINNED).reservedBytes();
            assertThat(reserved).isPositive();

            backend.allocator().failNextReleaseWith = CL.CL_OUT_OF_RESOURCES;
            try (LogCapture log = LogCapture.of(BackendResource.class.getName())) {
                assertThat(manager.releaseCachedMemory()).as("nothing was given back").isZero();
                assertThat(log.messages(Level.WARNING)).singleElement().asString()
                        .contains("did not finish the free of " + reserved + " bytes", "CL_OUT_OF_RESOURCES");
            }
            MemoryStatistics refused = manager.statistics(MemoryLocation.PINNED);
            assertThat(refused.reservedBytes()).as("the buffer is still held").isEqualTo(reserved);
            assertThat(refused.cachedBytes()).as("nor can it be served again, its host memory unmapped").isZero();
            try (UnifiedBuffer again = manager.allocate(4096, MemoryLocation.PINNED)) {
                again.copyFrom(new float[1024]); // through a live mapping: the refused segment was not handed out
                assertThat(manager.statistics(MemoryLocation.PINNED).reservedBytes()).isEqualTo(2 * reserved);
            }

            assertThat(manager.releaseCachedMemory()).isEqualTo(2 * reserved);
            assertThat(manager.statistics(MemoryLocation.PINNED).reservedBytes()).isZero();
            assertThat(backend.allocator().holdsMemory()).isFalse();
        }
    }

    /**
     * A close whose timeout a view held on an idle thread spent, on a queue with no work since it was last known idle
     * (here none ever): the pools keep their memory for the view, which still reads and writes after the close, but the
     * backend releases its queue and context. Its idle check came after the timeout and waited zero for a marker queued
     * then, so the close said device work was still running and kept them as for a hung device.
     */
    @Test
    void aCloseTimedOutByAViewOnAnIdleDeviceKeepsNoQueueOrContext() throws Exception {
        OpenClTestSupport.requireOpenCl();
        UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                .closeTimeout(Duration.ofSeconds(1)).build();
        UnifiedBuffer host = manager.allocate(4096, MemoryLocation.HOST);
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        CompletableFuture<Byte> viewAfterClose = CompletableFuture.supplyAsync(() -> {
            try (BufferAccess access = host.hostAccess(AccessMode.READ_WRITE)) {
                held.countDown();
                assertThat(closed.await(30, TimeUnit.SECONDS)).isTrue();
                access.segment().set(ValueLayout.JAVA_BYTE, 4095, (byte) 7);
                return access.segment().get(ValueLayout.JAVA_BYTE, 4095);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        assertThat(held.await(30, TimeUnit.SECONDS)).isTrue();
        try (LogCapture managerLog = LogCapture.managerLog(); LogCapture backendLog = LogCapture.of(OpenClBackend.class.getName())) {
            manager.close();
            closed.countDown();
            assertThat(viewAfterClose.get(30, TimeUnit.SECONDS)).isEqualTo((byte) 7);
            assertThat(managerLog.messages(Level.WARNING)).singleElement().asString()
                    .contains("views or accesses were still open").doesNotContain("device work was still running");
            assertThat(backendLog.messages(Level.WARNING)).isEmpty();
        }
    }

    /**
     * An application's action on a device future that never ends (a user's bug: it waits for something nobody does), on
     * an idle device: the manager's close ends within what is left of its timeout (a second at least, for the backend),
     * keeping the queue and context and saying why. The backend's close waited its own bound, 10 s, whatever the close
     * timeout.
     */
    @Test
    void aCloseUnderAnActionThatNeverEndsOnAnIdleDeviceIsBoundedByTheCloseTimeout() throws Exception {
        OpenClTestSupport.requireOpenCl();
        UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                .closeTimeout(Duration.ofMillis(500)).build();
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch never = new CountDownLatch(1);
        try (LogCapture managerLog = LogCapture.managerLog(); LogCapture backendLog = LogCapture.of(OpenClBackend.class.getName())) {
            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024)) {
                int[] error = new int[1];
                cl_event gate = CL.clCreateUserEvent(manager.nativeDevice(OpenClNativeDevice.class).context(), error);
                OpenClCalls.check(error[0], "clCreateUserEvent");
                try (BufferAccess access = x.deviceAccess(AccessMode.READ_WRITE)) { // the op waits for the gate: the action is attached before it ends
                    OpenClCalls.check(CL.clEnqueueBarrierWithWaitList(access.handle(OpenClDeviceHandle.class).queue(), 1,
                            new cl_event[] {gate}, null), "clEnqueueBarrierWithWaitList");
                }
                manager.ops().scaleAsync(x, 2).thenRun(() -> {
                    inside.countDown();
                    awaitUninterruptibly(never);
                });
                CL.clSetUserEventStatus(gate, CL.CL_COMPLETE);
                CL.clReleaseEvent(gate);
                assertThat(inside.await(30, TimeUnit.SECONDS)).as("the action runs").isTrue();
            }
            long start = System.nanoTime();
            manager.close();
            long tookMillis = (System.nanoTime() - start) / 1_000_000;
            never.countDown();
            assertThat(tookMillis).as("ms the close took, its timeout 500 ms, the backend's own bound 10 s").isLessThan(5_000L);
            assertThat(managerLog.messages(Level.WARNING)).as("the manager's warnings: its memory went back").isEmpty();
            assertThat(backendLog.messages(Level.WARNING)).singleElement().asString()
                    .contains("an action that depends on finished work").contains("keeps its queue and context");
        }
    }

    /** Waits for {@code latch} through interrupts: an action that does not end. */
    private static void awaitUninterruptibly(CountDownLatch latch) {
        while (true) {
            try {
                latch.await();
                return;
            } catch (InterruptedException ignored) {
                // it does not end
            }
        }
    }
}
