package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.NativeAllocation;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_mem;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The sub-buffers device accesses keep (PoCL here): one per range and mode, shared by later accesses to the same bytes,
 * counted so that one dropped while an access uses it lives until the access ends, bounded, and dropped before their
 * parent is released.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SubBuffersTest {

    private OpenClQueue queue;
    private OpenClAllocator allocator;
    private NativeAllocation parent;
    private long alignment;

    @BeforeEach
    void open() {
        OpenClTestSupport.requireOpenCl();
        OpenClDevice device = OpenClDevices.choose(OpenClTestSupport.defaultSettings()).device();
        OpenClDeviceProperties properties = OpenClDeviceProperties.read(device);
        queue = new OpenClQueue(device, properties.markersTakeWaitLists(), BackendSettings.DEFAULT_DEVICE_WAIT_TIMEOUT);
        allocator = new OpenClAllocator(properties, queue);
        alignment = properties.alignment();
        parent = allocator.allocate(MemoryLocation.DEVICE, 4 * alignment);
    }

    @AfterEach
    void close() {
        if (queue != null) {
            if (parent != null) {
                allocator.free(parent);
            }
            queue.close(Duration.ofSeconds(10), allocator::dropKeptSubBuffers);
        }
    }

    private static int references(cl_mem memory) {
        int[] count = new int[1];
        OpenClCalls.check(CL.clGetMemObjectInfo(memory, CL.CL_MEM_REFERENCE_COUNT, Sizeof.cl_uint, Pointer.to(count), null),
                "clGetMemObjectInfo(CL_MEM_REFERENCE_COUNT)");
        return count[0];
    }

    @Test
    void aRangeAndModeGetsOneSubBufferThatLaterAccessesShare() {
        SubBuffers.Shared first = allocator.keptSubBuffer(parent, alignment, alignment, CL.CL_MEM_READ_WRITE);
        first.release();
        SubBuffers.Shared again = allocator.keptSubBuffer(parent, alignment, alignment, CL.CL_MEM_READ_WRITE);
        SubBuffers.Shared readOnly = allocator.keptSubBuffer(parent, alignment, alignment, CL.CL_MEM_READ_ONLY);
        SubBuffers.Shared elsewhere = allocator.keptSubBuffer(parent, 2 * alignment, alignment, CL.CL_MEM_READ_WRITE);
        assertThat(again.memory().getNativePointer()).isEqualTo(first.memory().getNativePointer());
        assertThat(readOnly.memory().getNativePointer()).isNotEqualTo(first.memory().getNativePointer());
        assertThat(elsewhere.memory().getNativePointer()).isNotEqualTo(first.memory().getNativePointer());
        assertThat(allocator.keptSubBuffers()).isEqualTo(3);
        again.release();
        readOnly.release();
        elsewhere.release();
        assertThat(references(again.memory())).as("only the cache's reference is left").isEqualTo(1);
    }

    @Test
    void aSubBufferDroppedWhileAnAccessUsesItLivesUntilTheAccessEnds() {
        SubBuffers.Shared inUse = allocator.keptSubBuffer(parent, 0, alignment, CL.CL_MEM_READ_WRITE);
        cl_mem memory = inUse.memory();
        CL.clRetainMemObject(memory); // a reference of the test's own, to read the count after the release
        allocator.dropKeptSubBuffers();
        assertThat(allocator.keptSubBuffers()).isZero();
        assertThat(references(memory)).as("the access's reference and the test's").isEqualTo(2);
        byte[] bytes = {1, 2, 3, 4};
        OpenClCalls.check(CL.clEnqueueWriteBuffer(queue.commandQueue(), memory, CL.CL_TRUE, 0, 4, Pointer.to(bytes), 0, null, null),
                "clEnqueueWriteBuffer on a dropped sub-buffer still in use");
        inUse.release();
        assertThat(references(memory)).as("released by the access's end").isEqualTo(1);
        CL.clReleaseMemObject(memory);
        SubBuffers.Shared fresh = allocator.keptSubBuffer(parent, 0, alignment, CL.CL_MEM_READ_WRITE);
        assertThat(references(fresh.memory())).isEqualTo(1);
        fresh.release();
    }

    @Test
    void freeingTheParentDropsItsSubBuffersAndNoOthers() {
        NativeAllocation other = allocator.allocate(MemoryLocation.DEVICE, 2 * alignment);
        try {
            allocator.keptSubBuffer(parent, 0, alignment, CL.CL_MEM_READ_WRITE).release();
            allocator.keptSubBuffer(parent, alignment, alignment, CL.CL_MEM_READ_ONLY).release();
            SubBuffers.Shared others = allocator.keptSubBuffer(other, 0, alignment, CL.CL_MEM_READ_WRITE);
            others.release();
            allocator.free(parent);
            parent = null;
            assertThat(allocator.keptSubBuffers()).isEqualTo(1);
            assertThat(references(others.memory())).isEqualTo(1);
        } finally {
            allocator.free(other);
        }
        assertThat(allocator.keptSubBuffers()).isZero();
    }

    @Test
    void theCacheStaysWithinItsCapacity() {
        NativeAllocation large = allocator.allocate(MemoryLocation.DEVICE, (SubBuffers.CAPACITY + 64) * alignment);
        try {
            List<SubBuffers.Shared> held = new ArrayList<>();
            for (int i = 0; i < SubBuffers.CAPACITY + 64; i++) {
                SubBuffers.Shared shared = allocator.keptSubBuffer(large, i * alignment, alignment, CL.CL_MEM_READ_WRITE);
                if (i < 8) {
                    held.add(shared); // in use across the drops: still usable
                } else {
                    shared.release();
                }
                assertThat(allocator.keptSubBuffers()).isLessThanOrEqualTo(SubBuffers.CAPACITY);
            }
            for (SubBuffers.Shared shared : held) {
                assertThat(references(shared.memory())).isBetween(1, 2);
                shared.release();
            }
        } finally {
            allocator.free(large);
        }
    }

    @Test
    void threadsSharingOneRangeWhileItIsDroppedReleaseEachSubBufferOnceAndOnlyWhenUnused() throws Exception {
        shareOneRangeWhileItIsDropped(false);
    }

    /** As above, each thread first trying the entry last found ({@link SubBuffers#recent}), as a device access does. */
    @Test
    void threadsReusingTheLastEntryWhileItIsDroppedReleaseEachSubBufferOnceAndOnlyWhenUnused() throws Exception {
        shareOneRangeWhileItIsDropped(true);
    }

    private void shareOneRangeWhileItIsDropped(boolean lastFirst) throws Exception {
        AtomicInteger created = new AtomicInteger();
        Set<cl_mem> released = Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>())); // addresses are reused
        AtomicInteger releasedTwice = new AtomicInteger();
        SubBuffers subBuffers = new SubBuffers(memory -> {
            if (!released.add(memory)) {
                releasedTwice.incrementAndGet();
            }
            CL.clReleaseMemObject(memory);
        });
        cl_mem parentMemory = OpenClBackend.memObject(parent);
        int threads = 4;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            CountDownLatch start = new CountDownLatch(1);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int thread = t;
                done.add(pool.submit(() -> {
                    start.await();
                    for (int i = 0; i < 2_000; i++) {
                        SubBuffers.Shared last = lastFirst ? subBuffers.recent(parentMemory, 0, alignment, CL.CL_MEM_READ_WRITE) : null;
                        SubBuffers.Shared shared = last != null ? last : subBuffers.acquire(parentMemory, 0, alignment, CL.CL_MEM_READ_WRITE, () -> {
                            created.incrementAndGet();
                            return allocator.subBuffer(parent, 0, alignment, CL.CL_MEM_READ_WRITE);
                        });
                        assertThat(released.contains(shared.memory())).as("in use, so not released").isFalse();
                        assertThat(shared.references()).isGreaterThanOrEqualTo(1);
                        shared.release();
                        if (thread == 0 && i % 100 == 0) {
                            subBuffers.dropAll(parentMemory); // drops race acquires
                        }
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> each : done) {
                each.get(30, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(releasedTwice).hasValue(0);
        assertThat(released).hasSize(created.get() - subBuffers.size());
        subBuffers.dropAll();
        assertThat(released).as("each sub-buffer made, released once").hasSize(created.get());
    }

    @Test
    void accessesOfABufferReuseOneSubBufferAndATrimDropsIt() throws InterruptedException {
        OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings());
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(backend).timelineInterval(Duration.ZERO).build()) {
            UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            long first;
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                first = access.handle(OpenClDeviceHandle.class).memory().getNativePointer();
            }
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                assertThat(access.handle(OpenClDeviceHandle.class).memory().getNativePointer()).isEqualTo(first);
            }
            assertThat(backend.allocator().keptSubBuffers()).isEqualTo(1);
            buffer.close();
            assertThat(backend.awaitIdle(Duration.ofSeconds(10))).isTrue();
            // the block goes back once its access's work is known done, on a thread of the backend's: trim until then
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            do {
                manager.releaseCachedMemory();
                Thread.sleep(5);
            } while (manager.statistics(MemoryLocation.DEVICE).reservedBytes() > 0 && System.nanoTime() < deadline);
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).as("the pool released the block's segment").isZero();
            assertThat(backend.allocator().keptSubBuffers()).isZero();
        }
    }
}
