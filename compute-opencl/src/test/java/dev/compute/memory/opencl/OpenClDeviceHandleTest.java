package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_kernel;
import org.jocl.cl_mem;
import org.jocl.cl_program;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A user's own kernels on pooled memory, through {@code buffer.deviceAccess(...)} and {@link OpenClDeviceHandle}:
 * compiled here with JOCL, launched on the handle's buffer or SVM pointer, checked through the buffer.
 */
class OpenClDeviceHandleTest {

    private static final String SOURCE = """
            __kernel void scale_add_index(__global float* y, ulong offset, float a, ulong n) {
                size_t i = get_global_id(0);
                if (i < n) { y[offset + i] = a * y[offset + i] + (float) i; }
            }
            __kernel void write_index(__global float* y, ulong offset, ulong n) {
                size_t i = get_global_id(0);
                if (i < n) { y[offset + i] = (float) i; }
            }
            """;
    private static final int N = 10_000;
    private static final cl_event[] NO_EVENTS = {};

    private OpenClBackend backend;
    private UnifiedMemoryManager manager;
    private cl_program program;
    private cl_kernel scaleAddIndex;
    private cl_kernel writeIndex;

    @BeforeEach
    void open() {
        backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings());
        manager = UnifiedMemoryManager.builder().backend(backend).timelineInterval(Duration.ZERO).build();
        int[] error = new int[1];
        program = CL.clCreateProgramWithSource(backend.context(), 1, new String[] {SOURCE}, null, error);
        check(error[0]);
        int built = CL.clBuildProgram(program, 1, new cl_device_id[] {backend.deviceId()}, null, null, null);
        assertThat(built).as("building the test's kernels: %s", buildLog()).isEqualTo(CL.CL_SUCCESS);
        scaleAddIndex = CL.clCreateKernel(program, "scale_add_index", error);
        check(error[0]);
        writeIndex = CL.clCreateKernel(program, "write_index", error);
        check(error[0]);
    }

    @AfterEach
    void close() {
        if (writeIndex != null) {
            CL.clReleaseKernel(writeIndex);
        }
        if (scaleAddIndex != null) {
            CL.clReleaseKernel(scaleAddIndex);
        }
        if (program != null) {
            CL.clReleaseProgram(program);
        }
        if (manager != null) {
            manager.close();
        }
    }

    // ---- where the bytes are -------------------------------------------------------------------------------------

    @Test
    void aBlockAtANonZeroAlignedOffsetGetsASubBufferOverExactlyItsBytes() {
        try (UnifiedBuffer first = manager.allocate(DataType.FLOAT32, 100); UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N)) {
            float[] values = values(N);
            y.copyFrom(values);
            try (BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                assertThat(access.offset()).as("the block's offset in its segment").isPositive();
                assertThat(access.offset() % backend.subBufferAlignment()).isZero();
                assertThat(cl.isSubBuffer()).isTrue();
                assertThat(cl.offset()).isZero();
                assertThat(cl.byteSize()).isEqualTo(4L * N);
                assertThat(memInfo(cl.memory(), CL.CL_MEM_OFFSET)).as("the sub-buffer's origin").isEqualTo(access.offset());
                assertThat(memInfo(cl.memory(), CL.CL_MEM_SIZE)).isEqualTo(4L * N);
                assertThat(memInfo(cl.memory(), CL.CL_MEM_ASSOCIATED_MEMOBJECT)).as("a sub-buffer of the pool's buffer").isNotZero();
                assertThat(cl.queue()).isEqualTo(backend.commandQueue());
                assertThat(cl.context()).isEqualTo(backend.context());
                assertThat(cl.device()).isEqualTo(backend.deviceId());
                scaleAddIndex(cl, 0, 2, N, cl.queue(), NO_EVENTS, null);
            }
            float[] back = new float[N];
            y.copyTo(back);
            for (int i = 0; i < N; i++) {
                assertThat(back[i]).as("y[%d]", i).isEqualTo(2 * values[i] + i);
            }
        }
    }

    @Test
    void aSliceAtAnOffsetNoSubBufferCanHaveGetsThePoolsBufferAndTheOffset() {
        try (UnifiedBuffer first = manager.allocate(DataType.FLOAT32, 100); UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N)) {
            float[] values = values(N);
            y.copyFrom(values);
            UnifiedBuffer inner = y.slice(1, N - 2);
            long blockOffset;
            try (BufferAccess access = inner.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                blockOffset = access.offset() - 4;
                assertThat(blockOffset).as("the buffer's block offset in its segment").isPositive();
                assertThat(access.offset() % backend.subBufferAlignment()).isNotZero();
                assertThat(cl.isSubBuffer()).isFalse();
                assertThat(cl.offset()).isEqualTo(access.offset());
                assertThat(memInfo(cl.memory(), CL.CL_MEM_ASSOCIATED_MEMOBJECT)).as("the pool's own buffer, no sub-buffer").isZero();
                assertThat(cl.byteSize()).isEqualTo(4L * (N - 2));
                scaleAddIndex(cl, cl.offset() / Sizeof.cl_float, 2, N - 2, cl.queue(), NO_EVENTS, null);
            }
            float[] back = new float[N];
            y.copyTo(back);
            assertThat(back[0]).as("the element before the slice").isEqualTo(values[0]);
            assertThat(back[N - 1]).as("the element after the slice").isEqualTo(values[N - 1]);
            for (int i = 1; i < N - 1; i++) {
                assertThat(back[i]).as("y[%d]", i).isEqualTo(2 * values[i] + (i - 1));
            }
        }
    }

    @Test
    void subBufferFlagsFollowTheAccessMode() {
        try (UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N)) {
            y.copyFrom(values(N));
            for (AccessMode mode : AccessMode.values()) {
                try (BufferAccess access = y.deviceAccess(mode)) {
                    long flags = memInfo(access.handle(OpenClDeviceHandle.class).memory(), CL.CL_MEM_FLAGS);
                    long expected = switch (mode) {
                        case READ -> CL.CL_MEM_READ_ONLY;
                        case WRITE -> CL.CL_MEM_WRITE_ONLY;
                        case READ_WRITE -> CL.CL_MEM_READ_WRITE;
                    };
                    assertThat(flags & (CL.CL_MEM_READ_ONLY | CL.CL_MEM_WRITE_ONLY | CL.CL_MEM_READ_WRITE)).as("%s", mode).isEqualTo(expected);
                }
            }
        }
    }

    @Test
    void pinnedMemoryIsABufferOverExactlyTheBytesAndTheKernelsWritesReachHostMemory() {
        try (UnifiedBuffer first = manager.allocate(DataType.FLOAT32, 100, MemoryLocation.PINNED);
             UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N, MemoryLocation.PINNED)) {
            float[] values = values(N);
            y.copyFrom(values);
            UnifiedBuffer inner = y.slice(3, N - 3);
            try (BufferAccess access = inner.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                assertThat(access.offset() % backend.subBufferAlignment()).isNotZero();
                assertThat(cl.isSubBuffer()).isFalse();
                assertThat(cl.offset()).isZero();
                assertThat(memInfo(cl.memory(), CL.CL_MEM_SIZE)).isEqualTo(4L * (N - 3));
                assertThat(memInfo(cl.memory(), CL.CL_MEM_FLAGS) & CL.CL_MEM_USE_HOST_PTR).isNotZero();
                scaleAddIndex(cl, 0, 2, N - 3, cl.queue(), NO_EVENTS, null);
            }
            float[] back = new float[N];
            y.copyTo(back);
            for (int i = 0; i < N; i++) {
                assertThat(back[i]).as("y[%d]", i).isEqualTo(i < 3 ? values[i] : 2 * values[i] + (i - 3));
            }

            // on a queue of one's own: the results are published to host memory after the recorded work
            cl_command_queue own = ownQueue();
            try (BufferAccess access = inner.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                cl_event done = new cl_event();
                scaleAddIndex(cl, 0, 1, N - 3, own, NO_EVENTS, done);
                cl.recordWork(done);
                CL.clReleaseEvent(done);
            } finally {
                CL.clReleaseCommandQueue(own);
            }
            y.copyTo(back);
            for (int i = 3; i < N; i++) {
                assertThat(back[i]).as("y[%d] after the second kernel", i).isEqualTo(2 * values[i] + 2 * (i - 3));
            }
        }
    }

    @Test
    void unifiedMemoryGivesAnSvmPointerAtTheBytesAndNoBuffer() {
        Assumptions.assumeTrue(backend.supports(MemoryLocation.UNIFIED).available(),
                () -> "UNIFIED is not offered here: " + backend.supports(MemoryLocation.UNIFIED).detail());
        try (UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N, MemoryLocation.UNIFIED)) {
            float[] values = values(N);
            y.copyFrom(values);
            UnifiedBuffer inner = y.slice(5, N - 5);
            try (BufferAccess access = inner.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                assertThat(cl.svmAddress()).isEqualTo(access.segment().address());
                assertThatThrownBy(cl::memory).isInstanceOf(IllegalStateException.class).hasMessageContaining("svmPointer()");
                assertThatThrownBy(cl::offset).isInstanceOf(IllegalStateException.class).hasMessageContaining("svmPointer()");
                scaleAddIndex(cl, 0, 2, N - 5, cl.queue(), NO_EVENTS, null);
            }
            float[] back = new float[N];
            y.copyTo(back);
            for (int i = 0; i < N; i++) {
                assertThat(back[i]).as("y[%d]", i).isEqualTo(i < 5 ? values[i] : 2 * values[i] + (i - 5));
            }
        }
    }

    @Test
    void hostMemoryIsRefusedWithWhatToUseInstead() {
        try (UnifiedBuffer host = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.HOST)) {
            assertThatThrownBy(() -> host.deviceAccess(AccessMode.READ)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("HOST memory on OpenCL is plain host memory")
                    .hasMessageContaining("allocate DEVICE (or PINNED) memory")
                    .hasMessageContaining("hostAccess");
            host.copyFrom(new float[] {1, 2, 3});
            try (BufferAccess access = host.hostAccess(AccessMode.READ)) {
                assertThat(access.segment().getAtIndex(ValueLayout.JAVA_FLOAT, 2)).isEqualTo(3f);
            }
        }
    }

    // ---- the buffer's states -------------------------------------------------------------------------------------

    @Test
    void aHostWriteBeforeTheAccessReachesTheKernelAndTheKernelsWriteReachesCopyTo() {
        try (UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N)) {
            float[] values = values(N);
            try (BufferAccess host = y.hostAccess(AccessMode.WRITE)) {
                host.segment().copyFrom(MemorySegment.ofArray(values));
            }
            float[] head = {100, 200, 300};
            y.copyFrom(0, head, 0, head.length);
            System.arraycopy(head, 0, values, 0, head.length);
            assertThat(y.state()).as("only the host copy is written").isEqualTo(BufferState.HOST_ONLY);
            try (BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                scaleAddIndex(cl, cl.offset() / Sizeof.cl_float, 2, N, cl.queue(), NO_EVENTS, null);
            }
            assertThat(y.state()).isEqualTo(BufferState.DEVICE_DIRTY);
            float[] back = new float[N];
            y.copyTo(back);
            for (int i = 0; i < N; i++) {
                assertThat(back[i]).as("y[%d]", i).isEqualTo(2 * values[i] + i);
            }
        }
    }

    @Test
    void aWriteAccessMakesTheDeviceCopyNewerAndAReadAccessLeavesTheStateAlone() {
        try (UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N)) {
            y.copyFrom(values(N));
            y.readOnlyHostView(); // a host copy, in step with the device
            assertThat(y.state()).isEqualTo(BufferState.SYNCHRONIZED);
            try (BufferAccess access = y.deviceAccess(AccessMode.READ)) {
                assertThat(access.handle(OpenClDeviceHandle.class).memory()).isNotNull();
            }
            assertThat(y.state()).isEqualTo(BufferState.SYNCHRONIZED);
            try (BufferAccess access = y.deviceAccess(AccessMode.WRITE)) {
                writeIndex(access.handle(OpenClDeviceHandle.class));
            }
            assertThat(y.state()).isEqualTo(BufferState.DEVICE_DIRTY);
            float[] back = new float[N];
            y.copyTo(back);
            for (int i = 0; i < N; i++) {
                assertThat(back[i]).as("y[%d]", i).isEqualTo((float) i);
            }
        }
    }

    // ---- work on a queue of one's own ----------------------------------------------------------------------------

    @Test
    void recordedWorkKeepsAClosedBuffersBlockFromTheNextBufferUntilItCompletes() {
        cl_command_queue own = ownQueue();
        int[] error = new int[1];
        cl_event gate = CL.clCreateUserEvent(backend.context(), error);
        check(error[0]);
        try {
            UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N);
            y.copyFrom(values(N));
            long[] closedBlock = new long[2];
            try (BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                closedBlock[0] = memInfo(cl.memory(), CL.CL_MEM_ASSOCIATED_MEMOBJECT); // the pool's buffer
                closedBlock[1] = access.offset();
                cl_event done = new cl_event();
                scaleAddIndex(cl, cl.offset() / Sizeof.cl_float, 2, N, own, new cl_event[] {gate}, done);
                cl.recordWork(done);
                CL.clReleaseEvent(done); // the handle holds its own reference
            }
            y.close();
            assertThat(backend.awaitIdle(Duration.ofMillis(50))).as("idle while recorded work waits at its gate").isFalse();

            float[] sentinel = new float[N];
            Arrays.fill(sentinel, -1);
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, N)) {
                next.copyFrom(sentinel); // the backend's own queue is not held up by the gated work
                try (BufferAccess access = next.deviceAccess(AccessMode.READ)) {
                    assertThat(new long[] {memInfo(access.handle(OpenClDeviceHandle.class).memory(), CL.CL_MEM_ASSOCIATED_MEMOBJECT), access.offset()})
                            .as("the closed buffer's block, still in use").isNotEqualTo(closedBlock);
                }
                check(CL.clSetUserEventStatus(gate, CL.CL_COMPLETE));
                check(CL.clFinish(own));
                assertThat(backend.awaitIdle(Duration.ofSeconds(10))).isTrue();
                float[] back = new float[N];
                next.copyTo(back);
                assertThat(back).as("the gated kernel wrote its own block, not the next buffer's").containsOnly(-1f);
            }
        } finally {
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE);
            CL.clReleaseEvent(gate);
            CL.clReleaseCommandQueue(own);
        }
    }

    @Test
    void aHostReadWaitsForRecordedWorkAndSeesItsResult() throws InterruptedException {
        cl_command_queue own = ownQueue();
        int[] error = new int[1];
        cl_event gate = CL.clCreateUserEvent(backend.context(), error);
        check(error[0]);
        Thread opener = Thread.ofVirtual().unstarted(() -> {
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE);
        });
        try (UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N)) {
            float[] values = values(N);
            y.copyFrom(values);
            try (BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                cl_event done = new cl_event();
                scaleAddIndex(cl, cl.offset() / Sizeof.cl_float, 2, N, own, new cl_event[] {gate}, done);
                cl.recordWork(done); // also flushes the queue: nothing else here does
                CL.clReleaseEvent(done);
            }
            opener.start();
            float[] back = new float[N];
            y.copyTo(back); // waits for the gated kernel, which starts once the gate opens
            for (int i = 0; i < N; i++) {
                assertThat(back[i]).as("y[%d]", i).isEqualTo(2 * values[i] + i);
            }
        } finally {
            opener.join();
            CL.clReleaseEvent(gate);
            CL.clReleaseCommandQueue(own);
        }
    }

    /**
     * Work recorded from a queue of one's own that never ends (behind a user event nobody sets) holds up that buffer
     * only: work recorded from another queue, on another buffer, completes when it does, so that buffer's reads and
     * its memory do not wait for the stuck queue.
     */
    @Test
    void recordedWorkThatNeverEndsHoldsUpNoOtherQueuesWork() throws Exception {
        cl_command_queue stuck = ownQueue();
        cl_command_queue other = ownQueue();
        int[] error = new int[1];
        cl_event gate = CL.clCreateUserEvent(backend.context(), error);
        check(error[0]);
        try (UnifiedBuffer held = manager.allocate(DataType.FLOAT32, N); UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N)) {
            float[] values = values(N);
            held.copyFrom(values);
            y.copyFrom(values);
            try (BufferAccess access = held.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                cl_event done = new cl_event();
                scaleAddIndex(cl, cl.offset() / Sizeof.cl_float, 2, N, stuck, new cl_event[] {gate}, done);
                cl.recordWork(done);
                CL.clReleaseEvent(done);
            }
            try (BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
                cl_event done = new cl_event();
                scaleAddIndex(cl, cl.offset() / Sizeof.cl_float, 2, N, other, cl.waitList(), done);
                cl.recordWork(done);
                CL.clReleaseEvent(done);
            }
            CompletableFuture<float[]> read = CompletableFuture.supplyAsync(() -> {
                float[] back = new float[N];
                y.copyTo(back); // waits for y's recorded work, which does not wait for the gate
                return back;
            });
            try {
                assertThat(read).as("y's read, while the other queue's work waits at its gate").succeedsWithin(Duration.ofSeconds(5))
                        .satisfies(back -> assertThat(back[N - 1]).isEqualTo(2 * values[N - 1] + (N - 1)));
            } finally {
                check(CL.clSetUserEventStatus(gate, CL.CL_COMPLETE));
                read.handle((ignored, failure) -> null).get(60, TimeUnit.SECONDS);
            }
        } finally {
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE);
            CL.clFinish(stuck);
            CL.clReleaseEvent(gate);
            CL.clReleaseCommandQueue(stuck);
            CL.clReleaseCommandQueue(other);
        }
    }

    @Test
    void anEventOfAnotherContextIsRefused() {
        int[] error = new int[1];
        cl_context other = CL.clCreateContext(null, 1, new cl_device_id[] {backend.deviceId()}, null, null, error);
        check(error[0]);
        cl_event foreign = CL.clCreateUserEvent(other, error);
        check(error[0]);
        try (UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N); BufferAccess access = y.deviceAccess(AccessMode.READ)) {
            assertThatThrownBy(() -> access.handle(OpenClDeviceHandle.class).recordWork(foreign))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("another OpenCL context");
        } finally {
            CL.clSetUserEventStatus(foreign, CL.CL_COMPLETE);
            CL.clReleaseEvent(foreign);
            CL.clReleaseContext(other);
        }
    }

    // ---- after the access ------------------------------------------------------------------------------------

    @Test
    void aHandleIsUnusableOnceItsAccessHasEnded() {
        try (UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N)) {
            BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE);
            OpenClDeviceHandle kept = access.handle(OpenClDeviceHandle.class);
            access.close();
            assertThatThrownBy(() -> access.handle(OpenClDeviceHandle.class)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("has ended");
            assertThatThrownBy(kept::memory).isInstanceOf(IllegalStateException.class).hasMessageContaining("has ended");
            assertThatThrownBy(kept::queue).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> kept.recordWork(new cl_event())).isInstanceOf(IllegalStateException.class);
            assertThat(kept.toString()).contains("ended");
        }
    }

    @Test
    void anAccessStillOpenWhenTheManagerClosesEndsHarmlesslyAfterwards() {
        UnifiedBuffer y = manager.allocate(DataType.FLOAT32, N);
        BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE);
        OpenClDeviceHandle kept = access.handle(OpenClDeviceHandle.class);
        scaleAddIndex(kept, 0, 2, N, kept.queue(), NO_EVENTS, null);
        manager.close(); // ends this thread's access itself and frees its memory: the backend keeps nothing for the handle
        assertThat(backend.queue().isReleased()).as("queue and context released").isTrue();
        assertThatThrownBy(kept::memory).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        access.close(); // nothing is enqueued on the released queue: the backend's close has finished it
        assertThat(access.isOpen()).isFalse();
    }

    @Test
    void everyLocationAndModeEndsWithAFutureThatCompletesAfterTheKernel() {
        for (MemoryLocation location : new MemoryLocation[] {MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.UNIFIED}) {
            if (!backend.supports(location).available()) {
                continue;
            }
            NativeAllocation allocation = backend.allocate(location, 64L * N);
            try {
                for (AccessMode mode : AccessMode.values()) {
                    for (long offset : new long[] {0, backend.subBufferAlignment() * 3, 12}) {
                        OpenClDeviceHandle cl = backend.openDeviceHandle(allocation, offset, 4L * N, mode);
                        if (mode.writes()) {
                            writeIndex(cl);
                        }
                        assertThat(cl.end()).as("%s %s at %d", location, mode, offset).succeedsWithin(Duration.ofSeconds(5));
                        assertThatThrownBy(cl::end).isInstanceOf(IllegalStateException.class).hasMessageContaining("ended already");
                    }
                }
                float[] back = new float[N];
                backend.copyToHost(allocation, 12, MemorySegment.ofArray(back), 4L * N);
                for (int i = 0; i < N; i++) {
                    assertThat(back[i]).as("%s [%d] written last at offset 12", location, i).isEqualTo((float) i);
                }
            } finally {
                backend.free(allocation);
            }
        }
    }

    // ---- helpers ------------------------------------------------------------------------------------------------

    /** {@code y[i] = i} over the handle's bytes, on the backend's queue. */
    private void writeIndex(OpenClDeviceHandle cl) {
        boolean svm = cl.location() == MemoryLocation.UNIFIED;
        check(svm ? CL.clSetKernelArgSVMPointer(writeIndex, 0, cl.svmPointer()) : CL.clSetKernelArg(writeIndex, 0, Sizeof.cl_mem, Pointer.to(cl.memory())));
        check(CL.clSetKernelArg(writeIndex, 1, Sizeof.cl_ulong, Pointer.to(new long[] {svm ? 0 : cl.offset() / Sizeof.cl_float})));
        check(CL.clSetKernelArg(writeIndex, 2, Sizeof.cl_ulong, Pointer.to(new long[] {cl.byteSize() / Sizeof.cl_float})));
        check(CL.clEnqueueNDRangeKernel(cl.queue(), writeIndex, 1, null, new long[] {cl.byteSize() / Sizeof.cl_float}, null, 0, null, null));
    }


    /** {@code y[offset + i] = a * y[offset + i] + i} for i below n, on the handle's buffer or SVM pointer. */
    private void scaleAddIndex(OpenClDeviceHandle cl, long elementOffset, float a, long n, cl_command_queue queue, cl_event[] after,
                               @Nullable cl_event done) {
        check(cl.location() == MemoryLocation.UNIFIED ? CL.clSetKernelArgSVMPointer(scaleAddIndex, 0, cl.svmPointer())
                : CL.clSetKernelArg(scaleAddIndex, 0, Sizeof.cl_mem, Pointer.to(cl.memory())));
        check(CL.clSetKernelArg(scaleAddIndex, 1, Sizeof.cl_ulong, Pointer.to(new long[] {elementOffset})));
        check(CL.clSetKernelArg(scaleAddIndex, 2, Sizeof.cl_float, Pointer.to(new float[] {a})));
        check(CL.clSetKernelArg(scaleAddIndex, 3, Sizeof.cl_ulong, Pointer.to(new long[] {n})));
        check(CL.clEnqueueNDRangeKernel(queue, scaleAddIndex, 1, null, new long[] {n}, null, after.length, after.length == 0 ? null : after, done));
    }

    private cl_command_queue ownQueue() {
        int[] error = new int[1];
        @SuppressWarnings("deprecation") // the OpenCL 1.x form, which every device has
        cl_command_queue own = CL.clCreateCommandQueue(backend.context(), backend.deviceId(), 0, error);
        check(error[0]);
        return own;
    }

    /** A buffer property of 8 bytes: an offset, a size, flags, or the parent's handle as a number. */
    private static long memInfo(cl_mem memory, int param) {
        long[] value = new long[1];
        check(CL.clGetMemObjectInfo(memory, param, Sizeof.cl_ulong, Pointer.to(value), null));
        return value[0];
    }

    private static float[] values(int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (i % 97) * 0.5f - 20;
        }
        return v;
    }

    private String buildLog() {
        long[] size = new long[1];
        CL.clGetProgramBuildInfo(program, backend.deviceId(), CL.CL_PROGRAM_BUILD_LOG, 0, null, size);
        byte[] log = new byte[(int) size[0]];
        CL.clGetProgramBuildInfo(program, backend.deviceId(), CL.CL_PROGRAM_BUILD_LOG, log.length, Pointer.to(log), null);
        return new String(log, StandardCharsets.UTF_8).trim();
    }

    private static void check(int code) {
        assertThat(code).as(CL.stringFor_errorCode(code)).isEqualTo(CL.CL_SUCCESS);
    }
}
