package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jocl.CL.CL_COMPLETE;
import static org.jocl.CL.CL_SUCCESS;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.testing.ChildJvm;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.jocl.CL;
import org.jocl.cl_event;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The caller's memory in copies to and from DEVICE memory: whatever the caller does with the arena of a segment it
 * passed (closes it before a queued copy reaches it, closes it from another thread during a copy, passes one already
 * closed or confined to another thread), the driver never reads or writes memory the arena has freed. The scenarios
 * that freed memory under the driver run in a JVM of their own: on PoCL they ended the process (SIGSEGV).
 */
class OpenClCallerMemoryTest {

    /** 64 MiB: the C library maps an allocation this large on its own, and unmaps it when the arena frees it. */
    private static final int FLOATS = 16 << 20;

    private UnifiedMemoryManager manager;

    @BeforeEach
    void open() {
        OpenClTestSupport.requireOpenCl();
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                .deviceWaitTimeout(Duration.ofSeconds(10)).build();
    }

    @AfterEach
    void close() {
        if (manager != null) {
            manager.close();
        }
    }

    @Test
    void anArenaClosedWhileItsQueuedCopyWaitsIsNeverReachedByTheDriver() throws Exception {
        ChildJvm.Result child = ChildJvm.run(Duration.ofMinutes(2), ArenaClosedUnderQueuedCopies.class);
        assertThat(child.crashed()).as(child.describe()).isFalse();
        assertThat(child.exitCode()).as(child.describe()).isZero();
        assertThat(child.output()).as(child.describe()).contains(
                "shared write: 2.0 2.0", "confined write: 3.0 3.0", "shared read: IllegalStateException");
    }

    /** The child of {@link #anArenaClosedWhileItsQueuedCopyWaitsIsNeverReachedByTheDriver}. */
    static final class ArenaClosedUnderQueuedCopies {
        public static void main(String[] args) throws Exception {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO)
                    .deviceWaitTimeout(Duration.ofSeconds(20)).build();
                 UnifiedBuffer x = manager.allocate(DataType.FLOAT32, FLOATS, MemoryLocation.DEVICE);
                 UnifiedBuffer holder = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.DEVICE)) {
                x.copyFrom(0, new float[] {1f}, 0, 1);
                for (Arena arena : new Arena[] {Arena.ofShared(), Arena.ofConfined()}) {
                    float value = arena.allocate(1).isAccessibleBy(new Thread(() -> {})) ? 2f : 3f;
                    MemorySegment source = filled(arena, value);
                    queuedThenClosed(manager, holder, arena, () -> x.copyFromAsync(0, source)).get(20, TimeUnit.SECONDS);
                    float[] back = new float[FLOATS];
                    x.copyTo(back);
                    System.out.println((value == 2f ? "shared" : "confined") + " write: " + back[0] + " " + back[FLOATS - 1]);
                }

                Arena shared = Arena.ofShared();
                MemorySegment destination = shared.allocate((long) FLOATS * 4, 64);
                CompletableFuture<Void> read = queuedThenClosed(manager, holder, shared, () -> x.copyToAsync(0, destination));
                try {
                    read.get(20, TimeUnit.SECONDS);
                    System.out.println("shared read: landed in a closed arena");
                } catch (ExecutionException e) {
                    System.out.println("shared read: " + e.getCause().getClass().getSimpleName());
                }
            }
        }
    }

    @Test
    void anArenaClosedByAnotherThreadDuringACopyFailsTheCopyAndNothingElse() throws Exception {
        ChildJvm.Result child = ChildJvm.run(Duration.ofMinutes(3), ArenaClosedDuringCopies.class);
        assertThat(child.crashed()).as(child.describe()).isFalse();
        assertThat(child.exitCode()).as(child.describe()).isZero();
        assertThat(child.output()).as(child.describe()).contains("copies: 24", "unexpected: 0");
    }

    /** The child of {@link #anArenaClosedByAnotherThreadDuringACopyFailsTheCopyAndNothingElse}. */
    static final class ArenaClosedDuringCopies {
        public static void main(String[] args) throws Exception {
            int copies = 0;
            int unexpected = 0;
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
                 UnifiedBuffer x = manager.allocate(DataType.FLOAT32, FLOATS, MemoryLocation.DEVICE)) {
                for (int i = 0; i < 24; i++) {
                    Arena arena = Arena.ofShared();
                    MemorySegment segment = filled(arena, 1f);
                    CountDownLatch started = new CountDownLatch(1);
                    int pauseNanos = (i % 8) * 250_000;
                    Thread closer = Thread.ofPlatform().start(() -> {
                        try {
                            started.await();
                            Thread.sleep(Duration.ofNanos(pauseNanos));
                            arena.close();
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    });
                    started.countDown();
                    try {
                        if (i % 2 == 0) {
                            x.copyFrom(0, segment);
                        } else {
                            x.copyTo(0, segment);
                        }
                    } catch (IllegalStateException closed) {
                        // the arena closed during the copy: the copy fails, as Java's own copies do; the JDK also sets
                        // the interrupt status of a thread whose access a shared arena's close stopped
                        Thread.interrupted();
                    } catch (RuntimeException e) {
                        unexpected++;
                        e.printStackTrace(System.out);
                    }
                    closer.join();
                    copies++;
                }
            }
            System.out.println("copies: " + copies);
            System.out.println("unexpected: " + unexpected);
        }
    }

    @Test
    void aSegmentAlreadyClosedOrConfinedToAnotherThreadIsRefusedAsJavaRefusesIt() throws Exception {
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
            Arena closed = Arena.ofShared();
            MemorySegment gone = closed.allocate(4096);
            closed.close();
            assertThatThrownBy(() -> x.copyFrom(0, gone)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
            assertThatThrownBy(() -> x.copyTo(0, gone)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
            assertThatThrownBy(() -> x.copyFromAsync(0, gone)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> x.copyToAsync(0, gone)).isInstanceOf(IllegalStateException.class);

            MemorySegment[] othersOwn = new MemorySegment[1];
            Arena[] othersArena = new Arena[1];
            Thread.ofPlatform().start(() -> {
                othersArena[0] = Arena.ofConfined();
                othersOwn[0] = othersArena[0].allocate(4096);
            }).join();
            assertThatThrownBy(() -> x.copyFrom(0, othersOwn[0])).isInstanceOf(WrongThreadException.class);
            assertThatThrownBy(() -> x.copyToAsync(0, othersOwn[0])).isInstanceOf(WrongThreadException.class);
        }
    }

    @Test
    void aQueuedReadIntoTheCallersOwnConfinedArenaHasLandedWhenTheCallReturns() throws Exception {
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
             Arena arena = Arena.ofConfined()) {
            x.copyFrom(0, filled(arena, 1024, 6f));
            MemorySegment destination = arena.allocate(4096, 64);
            CompletableFuture<Void> read = x.copyToAsync(0, destination);
            assertThat(read).as("only this thread may write the segment: read before the call returns").isDone();
            assertThat(destination.getAtIndex(ValueLayout.JAVA_FLOAT, 1023)).isEqualTo(6f);
        }
    }

    private static MemorySegment filled(Arena arena, float value) {
        return filled(arena, FLOATS, value);
    }

    private static MemorySegment filled(Arena arena, int floats, float value) {
        MemorySegment segment = arena.allocate((long) floats * 4, 64);
        for (int i = 0; i < floats; i++) {
            segment.setAtIndex(ValueLayout.JAVA_FLOAT, i, value);
        }
        return segment;
    }

    /** {@code copy} queued behind a held queue, and {@code arena} closed before the queue moves on to it. */
    private static CompletableFuture<Void> queuedThenClosed(UnifiedMemoryManager manager, UnifiedBuffer holder, Arena arena,
            Supplier<CompletableFuture<Void>> copy) {
        cl_event gate = heldQueue(manager, holder);
        try {
            CompletableFuture<Void> queued = copy.get();
            arena.close();
            return queued;
        } finally {
            release(gate);
        }
    }

    /** The backend's queue held behind a user event until {@link #release}: every command queued meanwhile waits. */
    private static cl_event heldQueue(UnifiedMemoryManager manager, UnifiedBuffer holder) {
        int[] error = new int[1];
        cl_event gate = CL.clCreateUserEvent(manager.nativeDevice(OpenClNativeDevice.class).context(), error);
        check(error[0]);
        try (BufferAccess access = holder.deviceAccess(AccessMode.WRITE)) {
            OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
            check(CL.clEnqueueMarkerWithWaitList(cl.queue(), 1, new cl_event[] {gate}, null));
        }
        return gate;
    }

    private static void release(cl_event gate) {
        check(CL.clSetUserEventStatus(gate, CL_COMPLETE));
        CL.clReleaseEvent(gate);
    }

    private static void check(int code) {
        if (code != CL_SUCCESS) {
            throw new IllegalStateException("OpenCL error " + code);
        }
    }
}
