package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.FreeUnfinishedException;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.cl_event;
import org.jocl.cl_mem;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Memory at the four locations on the device the backend would choose (PoCL here), through an allocator of its own
 * over a queue of its own; where a limit matters, the device's properties are given smaller limits than it has:
 * sizes rounded up to the alignment, each location's handle, DEVICE addresses never reused, DEVICE bytes counted
 * against the global memory, the largest single allocation, sub-buffers and host-memory buffers, and frees before and
 * after the queue is released.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OpenClAllocatorTest {

    private OpenClDevice device;
    private OpenClDeviceProperties properties;
    private OpenClQueue queue;
    private OpenClAllocator allocator;
    private final List<NativeAllocation> allocations = new ArrayList<>();

    @BeforeEach
    void open() {
        OpenClTestSupport.requireOpenCl();
        device = OpenClDevices.choose(OpenClTestSupport.defaultSettings()).device();
        properties = OpenClDeviceProperties.read(device);
        queue = new OpenClQueue(device, properties.markersTakeWaitLists(), BackendSettings.DEFAULT_DEVICE_WAIT_TIMEOUT);
        allocator = new OpenClAllocator(properties, queue);
    }

    @AfterEach
    void close() {
        allocations.forEach(allocator::free);
        if (queue != null) {
            queue.close(Duration.ofSeconds(10), () -> { });
        }
    }

    private NativeAllocation allocate(OpenClAllocator from, MemoryLocation location, long bytes) {
        NativeAllocation allocation = from.allocate(location, bytes);
        allocations.add(allocation);
        return allocation;
    }

    /** The device's properties with other limits: memory and the largest allocation. */
    private OpenClDeviceProperties limited(long globalMemory, long maxAllocation) {
        return new OpenClDeviceProperties(properties.device(), properties.alignment(), maxAllocation, globalMemory,
                properties.computeUnits(), properties.svmCapabilities(), properties.doublePrecision(), properties.markersTakeWaitLists());
    }

    private void write(cl_mem memory, long offset, byte[] bytes) {
        OpenClCalls.check(CL.clEnqueueWriteBuffer(queue.commandQueue(), memory, CL.CL_TRUE, offset, bytes.length, Pointer.to(bytes), 0, null, null),
                "clEnqueueWriteBuffer");
    }

    private byte[] read(cl_mem memory, long offset, int length) {
        byte[] bytes = new byte[length];
        OpenClCalls.check(CL.clEnqueueReadBuffer(queue.commandQueue(), memory, CL.CL_TRUE, offset, length, Pointer.to(bytes), 0, null, null),
                "clEnqueueReadBuffer");
        return bytes;
    }

    @Test
    void sizesAreRoundedUpToTheAlignmentAndEachLocationHasItsHandle() {
        long alignment = properties.alignment();

        NativeAllocation device = allocate(allocator, MemoryLocation.DEVICE, 1);
        assertThat(device.sizeBytes()).isEqualTo(alignment);
        assertThat(device.handle()).isInstanceOf(cl_mem.class);
        assertThat(device.hostSegment()).isNull();

        NativeAllocation pinned = allocate(allocator, MemoryLocation.PINNED, alignment + 1);
        assertThat(pinned.sizeBytes()).isEqualTo(2 * alignment);
        assertThat(pinned.handle()).isInstanceOfSatisfying(OpenClBackend.PinnedBuffer.class,
                buffer -> assertThat(OpenClCalls.addressOf(buffer.mapping())).isEqualTo(pinned.address()));
        pinned.hostSegment().fill((byte) 5);
        assertThat(pinned.hostSegment().get(ValueLayout.JAVA_BYTE, pinned.sizeBytes() - 1)).as("mapped for its whole size").isEqualTo((byte) 5);

        NativeAllocation host = allocate(allocator, MemoryLocation.HOST, 3);
        assertThat(host.sizeBytes()).isEqualTo(alignment);
        assertThat(host.handle()).isInstanceOf(Arena.class);
        assertThat(host.address() % Math.max(alignment, 64)).isZero();

        BackendAvailability unified = properties.unifiedSupport();
        if (unified.available()) {
            NativeAllocation svm = allocate(allocator, MemoryLocation.UNIFIED, 100);
            assertThat(svm.handle()).isInstanceOfSatisfying(OpenClBackend.SharedVirtualMemory.class,
                    shared -> assertThat(shared.address()).isEqualTo(svm.address()));
            svm.hostSegment().set(ValueLayout.JAVA_INT, 0, 42);
            assertThat(svm.hostSegment().get(ValueLayout.JAVA_INT, 0)).isEqualTo(42);
        } else {
            assertThatThrownBy(() -> allocator.allocate(MemoryLocation.UNIFIED, 100)).isInstanceOf(IllegalStateException.class)
                    .hasMessage(unified.detail());
        }
        assertThatThrownBy(() -> allocator.allocate(MemoryLocation.DEVICE, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("must be positive");
    }

    @Test
    void deviceAddressesComeFromARangeThatIsNeverReused() {
        NativeAllocation first = allocator.allocate(MemoryLocation.DEVICE, 3 * properties.alignment());
        assertThat(first.address()).as("never 0: the first range starts at the alignment").isEqualTo(properties.alignment());
        allocator.free(first);
        NativeAllocation second = allocate(allocator, MemoryLocation.DEVICE, properties.alignment());
        assertThat(second.address()).isGreaterThanOrEqualTo(first.address() + first.sizeBytes());
    }

    @Test
    void deviceBuffersAreCountedAgainstTheGlobalMemory() {
        long alignment = properties.alignment();
        OpenClAllocator small = new OpenClAllocator(limited(4 * alignment, properties.maxAllocation()), queue);
        NativeAllocation held = small.allocate(MemoryLocation.DEVICE, 3 * alignment);
        assertThatThrownBy(() -> small.allocate(MemoryLocation.DEVICE, 2 * alignment)).isInstanceOf(BackendOutOfMemoryException.class)
                .hasMessageContaining("the " + 3 * alignment + " bytes of DEVICE buffers this backend holds")
                .hasMessageContaining("CL_DEVICE_GLOBAL_MEM_SIZE");
        allocate(small, MemoryLocation.PINNED, 2 * alignment); // PINNED is host memory: not counted
        small.free(held);
        allocate(small, MemoryLocation.DEVICE, 4 * alignment);
    }

    @Test
    void aRequestAboveTheLargestAllocationIsRefusedUpFrontExceptOnTheHost() {
        long alignment = properties.alignment();
        OpenClAllocator capped = new OpenClAllocator(limited(properties.globalMemory(), 2 * alignment), queue);
        for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
            assertThatThrownBy(() -> capped.allocate(location, 2 * alignment + 1)).as("%s", location)
                    .isInstanceOf(BackendOutOfMemoryException.class).hasMessageContaining("CL_DEVICE_MAX_MEM_ALLOC_SIZE");
        }
        assertThat(allocate(capped, MemoryLocation.HOST, 2 * alignment + 1).sizeBytes()).isEqualTo(3 * alignment);
    }

    @Test
    void subBuffersNeedAnAlignedOriginInsideTheAllocation() {
        long alignment = properties.alignment();
        NativeAllocation device = allocate(allocator, MemoryLocation.DEVICE, 4 * alignment);
        cl_mem sub = allocator.subBuffer(device, alignment, alignment, CL.CL_MEM_READ_WRITE);
        try {
            write(sub, 0, new byte[] {1, 2, 3});
            assertThat(read(OpenClBackend.memObject(device), alignment, 3)).as("a view of the allocation's bytes").containsExactly(1, 2, 3);
        } finally {
            CL.clReleaseMemObject(sub);
        }
        assertThatThrownBy(() -> allocator.subBuffer(device, alignment + 4, 64, CL.CL_MEM_READ_WRITE))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("multiple of " + alignment);
        assertThatThrownBy(() -> allocator.subBuffer(device, 2 * alignment, 3 * alignment, CL.CL_MEM_READ_WRITE))
                .isInstanceOf(IndexOutOfBoundsException.class);
        NativeAllocation host = allocate(allocator, MemoryLocation.HOST, alignment);
        assertThatThrownBy(() -> allocator.subBuffer(host, 0, alignment, CL.CL_MEM_READ_WRITE))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no cl_mem buffer");
    }

    @Test
    void hostMemoryBuffersWrapHostMemoryInPlace() {
        NativeAllocation host = allocate(allocator, MemoryLocation.HOST, 256);
        MemorySegment.copy(new byte[] {9, 8, 7}, 0, host.hostSegment(), ValueLayout.JAVA_BYTE, 10, 3);
        cl_mem wrapper = allocator.hostMemoryBuffer(host, 10, 3, CL.CL_MEM_READ_WRITE);
        try {
            assertThat(read(wrapper, 0, 3)).containsExactly(9, 8, 7);
        } finally {
            CL.clReleaseMemObject(wrapper);
        }
        NativeAllocation device = allocate(allocator, MemoryLocation.DEVICE, 256);
        assertThatThrownBy(() -> allocator.hostMemoryBuffer(device, 0, 16, CL.CL_MEM_READ_WRITE))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not host memory");
        // past the allocation's end, which a device may have rounded up (NVIDIA's OpenCL: 256 bytes are more)
        assertThatThrownBy(() -> allocator.hostMemoryBuffer(host, host.sizeBytes() - 6, 16, CL.CL_MEM_READ_WRITE))
                .isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void rangesMustLieInsideTheirAllocation() {
        NativeAllocation allocation = new NativeAllocation(MemoryLocation.HOST, 0, 100, null, null);
        OpenClAllocator.checkRange(allocation, 0, 100);
        OpenClAllocator.checkRange(allocation, 100, 0);
        assertThatThrownBy(() -> OpenClAllocator.checkRange(allocation, 1, 100)).isInstanceOf(IndexOutOfBoundsException.class)
                .hasMessage("range [1, 1 + 100) is outside the 100-byte HOST allocation");
        assertThatThrownBy(() -> OpenClAllocator.checkRange(allocation, -1, 1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> OpenClAllocator.checkRange(allocation, 0, -1)).isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void anSvmFreeWaitingForTheQueueHoldsUpNoOtherThreadsWork() throws Exception {
        assumeTrue(properties.unifiedSupport().available(), "no shared virtual memory on " + properties.device().describe());
        queue.close(Duration.ofSeconds(10), () -> { });
        queue = new OpenClQueue(device, properties.markersTakeWaitLists(), Duration.ofSeconds(40));
        allocator = new OpenClAllocator(properties, queue);
        NativeAllocation svm = allocator.allocate(MemoryLocation.UNIFIED, 1024);
        int[] error = new int[1];
        cl_event gate = CL.clCreateUserEvent(queue.context(), error);
        OpenClCalls.check(error[0], "clCreateUserEvent");
        OpenClCalls.check(CL.clEnqueueBarrierWithWaitList(queue.commandQueue(), 1, new cl_event[] {gate}, null), "clEnqueueBarrierWithWaitList");
        OpenClCalls.check(CL.clFlush(queue.commandQueue()), "clFlush");
        Thread freeing = Thread.ofPlatform().name("svm-free").start(() -> allocator.free(svm));
        try {
            while (Arrays.stream(freeing.getStackTrace()).noneMatch(frame -> frame.getMethodName().equals("endsWithin"))) {
                assertThat(freeing.isAlive()).as("the free waits for the held queue").isTrue();
                Thread.onSpinWait();
            }
            // another thread's marker is queued while the free waits, not once the free's wait has ended
            CompletableFuture<CompletableFuture<Void>> marked = CompletableFuture.supplyAsync(queue::marker);
            assertThat(marked.get(20, TimeUnit.SECONDS)).isNotDone();
        } finally {
            OpenClCalls.check(CL.clSetUserEventStatus(gate, CL.CL_COMPLETE), "clSetUserEventStatus");
            CL.clReleaseEvent(gate);
            freeing.join();
        }
    }

    @Test
    void aFreeAfterTheQueueIsReleasedReleasesWhatIsLeft() {
        NativeAllocation foreign = new NativeAllocation(MemoryLocation.HOST, 0, 1, null, "not a handle");
        assertThatThrownBy(() -> allocator.free(foreign)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not an allocation of this backend");

        List<NativeAllocation> kept = new ArrayList<>();
        for (MemoryLocation location : MemoryLocation.values()) {
            if (location != MemoryLocation.UNIFIED || properties.unifiedSupport().available()) {
                kept.add(allocator.allocate(location, 1024));
            }
        }
        queue.close(Duration.ofSeconds(10), () -> { });
        queue = null;
        assertThatThrownBy(() -> allocator.subBuffer(kept.getFirst(), 0, 64, CL.CL_MEM_READ_WRITE))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        kept.forEach(allocator::free); // no unmap, finish or SVM free on the released queue and context
    }

    @Test
    void aDeviceBufferWhoseReleaseIsRefusedStaysLiveAndIsFreedLater() {
        NativeAllocation buffer = allocator.allocate(MemoryLocation.DEVICE, 1024);
        allocator.failNextReleaseWith = CL.CL_OUT_OF_RESOURCES;
        assertThatThrownBy(() -> allocator.free(buffer)).isInstanceOf(BackendOutOfMemoryException.class);
        // the buffer is still in the context: the backend's close must not release the context under it
        assertThat(allocator.holdsMemory()).as("a buffer the implementation kept is still live").isTrue();
        allocator.free(buffer);
        assertThat(allocator.holdsMemory()).isFalse();
    }

    @Test
    void aPinnedBufferWhoseReleaseIsRefusedAfterItsUnmapIsHeldOutOfUseAndReleasedLater() {
        NativeAllocation pinned = allocator.allocate(MemoryLocation.PINNED, 4096);
        allocator.failNextReleaseWith = CL.CL_OUT_OF_RESOURCES;
        // unmapped, so no plain refusal, which would leave it its caller's to reuse through a dead mapping
        assertThatThrownBy(() -> allocator.free(pinned)).isInstanceOf(FreeUnfinishedException.class)
                .hasMessageContaining("CL_OUT_OF_RESOURCES");
        assertThat(allocator.holdsMemory()).as("the buffer is still in the context").isTrue();
        allocator.free(pinned); // released, not unmapped a second time (which OpenCL would refuse)
        assertThat(allocator.holdsMemory()).isFalse();
    }

    @Test
    void anSvmFreeKeptForStuckWorkIsRefusedAndStaysLive() {
        assumeTrue(properties.unifiedSupport().available(), "no shared virtual memory on " + properties.device().describe());
        queue.close(Duration.ofSeconds(10), () -> { });
        queue = new OpenClQueue(device, properties.markersTakeWaitLists(), Duration.ofMillis(100));
        allocator = new OpenClAllocator(properties, queue);
        NativeAllocation svm = allocator.allocate(MemoryLocation.UNIFIED, 1024);
        int[] error = new int[1];
        cl_event gate = CL.clCreateUserEvent(queue.context(), error);
        OpenClCalls.check(error[0], "clCreateUserEvent");
        try {
            OpenClCalls.check(CL.clEnqueueBarrierWithWaitList(queue.commandQueue(), 1, new cl_event[] {gate}, null), "clEnqueueBarrierWithWaitList");
            OpenClCalls.check(CL.clFlush(queue.commandQueue()), "clFlush");
            // kept rather than freed under the work: the caller must not count it given back, nor the close think it gone
            assertThatThrownBy(() -> allocator.free(svm)).hasMessageContaining("shared virtual memory");
            assertThat(allocator.holdsMemory()).isTrue();
        } finally {
            OpenClCalls.check(CL.clSetUserEventStatus(gate, CL.CL_COMPLETE), "clSetUserEventStatus");
            CL.clReleaseEvent(gate);
        }
        allocator.free(svm); // the work has ended: now it goes
        assertThat(allocator.holdsMemory()).isFalse();
    }
}
