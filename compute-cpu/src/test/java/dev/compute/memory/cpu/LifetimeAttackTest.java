package dev.compute.memory.cpu;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.testing.ChildJvm;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Attacks on the lifetime rule with cases the contract tests leave out: races of close with every other use,
 * closes inside accesses, slices of slices, ranges that overflow, work in flight that never ends, threads that end
 * without calling back, two closers of the manager at once. Whatever could crash the JVM runs in a child JVM
 * ({@link LifetimeAttackScenarios}); everything that waits is bounded here, so a hang fails instead of stalling.
 */
class LifetimeAttackTest {

    private static final Duration BOUND = Duration.ofSeconds(3);

    private UnifiedMemoryManager manager = withoutMaintenance(UnifiedMemoryManager.builder());

    /** Trims and timeline samples off: no maintenance thread that could hide what the calls themselves leave behind. */
    private static UnifiedMemoryManager withoutMaintenance(UnifiedMemoryManagerBuilder builder) {
        return builder.backend("cpu").leakDetection(LeakDetectionLevel.PARANOID).closeTimeout(Duration.ofSeconds(1))
                .trimInterval(Duration.ZERO).timelineInterval(Duration.ZERO).build();
    }

    @AfterEach
    void closeManager() {
        manager.close();
    }

    // ---- in child JVMs ------------------------------------------------------------------------------------------

    @ParameterizedTest
    @ValueSource(strings = {
            "everyUseRacesCloseTrimAndLeaks",
            "sharedAccessEndedUnderItsReaders",
            "leakedBuffersWithDroppedAccessesAndLiveSlices",
            "managerClosedInsideADeviceAccessOfASlice"})
    void theRuleHoldsAndTheJvmSurvives(String scenario) throws Exception {
        assertScenarioHolds(scenario);
    }

    @Test
    void aViewOrAccessOpenedWhileTheManagerClosesNeverOutlivesItsMemory() throws Exception {
        assertScenarioHolds("viewsAndAccessesOpenedWhileTheManagerCloses");
    }

    private static void assertScenarioHolds(String scenario) throws Exception {
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(90), LifetimeAttackScenarios.class, scenario);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("OK " + scenario);
    }

    // ---- reaching other buffers' memory -------------------------------------------------------------------------

    @Test
    void aDeviceAccessReachesOnlyItsOwnBuffersBytes() {
        try (UnifiedBuffer mine = manager.allocate(1024, MemoryLocation.HOST);
             UnifiedBuffer neighbour = manager.allocate(1024, MemoryLocation.HOST)) {
            neighbour.copyFrom(filled(1024, (byte) 0x5A));
            try (BufferAccess access = mine.deviceAccess(AccessMode.READ)) {
                MemorySegment bytes = access.segment();
                assertThat(bytes.byteSize()).isEqualTo(1024);
                assertThatThrownBy(() -> bytes.get(JAVA_BYTE, 1024)).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> bytes.asSlice(0, 2048)).isInstanceOf(IndexOutOfBoundsException.class);
            }
        }
    }

    /**
     * What reaches memory in the public API comes through a scope: no public method hands out the pool's or the
     * backend's own objects, whose segments and buffers span other buffers' memory and outlive this one.
     */
    @Test
    void noPublicMethodHandsOutUnscopedMemory() {
        List<Class<?>> unscoped = List.of(dev.compute.memory.spi.NativeAllocation.class, dev.compute.memory.resource.Block.class,
                dev.compute.memory.spi.Region.class, java.lang.foreign.Arena.class, java.nio.ByteBuffer.class);
        for (Class<?> api : List.of(UnifiedBuffer.class, BufferAccess.class, UnifiedMemoryManager.class, dev.compute.memory.ComputeOps.class)) {
            for (java.lang.reflect.Method method : api.getMethods()) {
                assertThat(unscoped).as("%s.%s returns %s", api.getSimpleName(), method.getName(), method.getReturnType().getSimpleName())
                        .noneMatch(type -> type.isAssignableFrom(method.getReturnType()));
            }
        }
    }

    // ---- waits that must be bounded -----------------------------------------------------------------------------

    @Test
    void aReaderWaitingForWorkNeverDeadlocksWithTheThreadThatCompletesIt() throws Exception {
        UnifiedBuffer buffer = manager.allocate(4096);
        CompletableFuture<Void> work = recordedWork(buffer);
        try {
            Thread reader = Thread.ofPlatform().daemon().start(() -> buffer.copyTo(new byte[8]));
            awaitBlocked(reader);
            Thread completer = Thread.ofPlatform().daemon().start(() -> {
                System.out.println("kernel done on " + buffer); // a log line names the buffer
                work.complete(null);
            });
            completer.join(BOUND.toMillis());
            reader.join(BOUND.toMillis());
            assertThat(completer.isAlive() || reader.isAlive()).as("the completer or the reader is stuck").isFalse();
        } finally {
            work.complete(null);
        }
    }

    @Test
    void closeIsAtOnceWhileAnotherThreadWaitsForWorkInFlight() throws Exception {
        UnifiedBuffer buffer = manager.allocate(4096);
        CompletableFuture<Void> work = recordedWork(buffer);
        try {
            Thread reader = Thread.ofPlatform().daemon().start(() -> buffer.copyTo(new byte[8]));
            awaitBlocked(reader);
            // a bound far below forever, and far above what a loaded machine takes: the work never ends
            within(Duration.ofSeconds(5), () -> {
                buffer.close();
                return null;
            });
            assertThat(within(Duration.ofSeconds(5), buffer::isClosed)).isTrue();
        } finally {
            work.complete(null);
        }
    }

    @Test
    void anAllocationUnderPressureWaitsBoundedlyForWorkInFlight() throws Exception {
        UnifiedMemoryManager capped = withoutMaintenance(UnifiedMemoryManager.builder().maxPoolSize(8L << 20).releaseThreshold(0)
                .deviceWaitTimeout(Duration.ofSeconds(1)));
        CompletableFuture<Void> work = new CompletableFuture<>();
        try {
            UnifiedBuffer busy = capped.allocate(6L << 20);
            try (BufferAccess access = busy.deviceAccess(AccessMode.WRITE)) {
                access.inFlightUntil(work); // a kernel of one's own that never ends
            }
            busy.close();
            // 6 + 6 MiB do not fit under the 8 MiB cap: only the busy buffer's memory could serve it, and the device still uses it
            Throwable outcome = catchThrowable(() -> within(Duration.ofSeconds(10), () -> capped.allocate(6L << 20)).close());
            assertThat(outcome).as("the allocation says it has no memory, within its bound; it neither hangs nor takes memory in use")
                    .isInstanceOfSatisfying(DeviceOutOfMemoryException.class,
                            e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.DEVICE_WORK_STUCK))
                    .hasMessageContaining("did not finish within 1000 ms").hasMessageContaining("may be stuck");
        } finally {
            work.complete(null);
            capped.close();
        }
    }

    @Test
    void managerCloseKeepsToItsTimeoutWithWorkStillInFlight() throws Exception {
        UnifiedMemoryManager own = withoutMaintenance(UnifiedMemoryManager.builder());
        CompletableFuture<Void> work = new CompletableFuture<>();
        try {
            UnifiedBuffer busy = own.allocate(6L << 20);
            try (BufferAccess access = busy.deviceAccess(AccessMode.WRITE)) {
                access.inFlightUntil(work);
            }
            busy.close();
            within(BOUND, () -> {
                own.close(); // close timeout 1 s
                return null;
            });
        } finally {
            work.complete(null);
        }
    }

    // ---- work in flight -----------------------------------------------------------------------------------------

    @Test
    void aHostAccessKeepsTheWorkItWasToldIsInFlight() throws Exception {
        UnifiedBuffer buffer = manager.allocate(4096);
        CompletableFuture<Void> work = new CompletableFuture<>();
        try {
            try (BufferAccess access = buffer.hostAccess(AccessMode.WRITE)) {
                access.inFlightUntil(work); // refusing it would do as well; accepting it must mean something
            }
            CompletableFuture<Void> read = CompletableFuture.runAsync(() -> buffer.copyTo(new byte[8]));
            assertThatThrownBy(() -> read.get(300, TimeUnit.MILLISECONDS)).as("a host read waits for the work in flight")
                    .isInstanceOf(TimeoutException.class);
            work.complete(null);
            read.get(BOUND.toMillis(), TimeUnit.MILLISECONDS);
        } finally {
            work.complete(null);
            buffer.close();
        }
    }

    // ---- threads that never call back ----------------------------------------------------------------------------

    @Test
    void aViewHandedToAThreadThatEndsLetsGoWithoutAMaintenanceThread() throws Exception {
        UnifiedBuffer buffer = manager.allocate(4096);
        CountDownLatch viewing = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        Thread viewer = Thread.ofPlatform().start(() -> {
            buffer.hostView();
            viewing.countDown();
            awaitQuietly(closed);
        });
        viewing.await();
        buffer.close(); // on another thread than the view's: handed to the viewer
        closed.countDown();
        viewer.join();
        assertEventuallyNothingLive();
    }

    @Test
    void anAccessOfAThreadThatEndedLetsGoWhenItsBufferCloses() throws Exception {
        UnifiedBuffer buffer = manager.allocate(4096);
        Thread.ofVirtual().start(() -> buffer.hostAccess(AccessMode.READ)).join(); // ends without closing its access
        buffer.close();
        assertEventuallyNothingLive();
    }

    @Test
    void twoThreadsClosingTheManagerAtOnceEachEndTheirOwnViews() throws Exception {
        // a close that waited for the other thread's view would take the close timeout: far above the bound below
        UnifiedMemoryManager own = withoutMaintenance(UnifiedMemoryManager.builder().closeTimeout(Duration.ofSeconds(20)));
        CyclicBarrier together = new CyclicBarrier(2);
        Callable<Long> closeWithAView = () -> {
            MemorySegment view = own.allocate(4096).hostView();
            together.await();
            long started = System.nanoTime();
            own.close();
            long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
            assertThatThrownBy(() -> view.get(JAVA_BYTE, 0)).as("my view once my close() returned").isInstanceOf(IllegalStateException.class);
            return took;
        };
        FutureTask<Long> first = new FutureTask<>(closeWithAView);
        FutureTask<Long> second = new FutureTask<>(closeWithAView);
        Thread.ofPlatform().daemon().start(first);
        Thread.ofPlatform().daemon().start(second);
        assertThat(first.get(30, TimeUnit.SECONDS)).as("ms the first close took").isLessThan(5_000);
        assertThat(second.get(30, TimeUnit.SECONDS)).as("ms the second close took").isLessThan(5_000);
    }

    // ---- slices -------------------------------------------------------------------------------------------------

    @Test
    void aViewOfAClosedSliceLastsAsTheBuffersViewsAndEndsWithTheBuffer() {
        MemorySegment view;
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 100)) {
            UnifiedBuffer slice = buffer.slice(10, 20);
            view = slice.hostView();
            slice.close();
            assertThatThrownBy(slice::hostView).isInstanceOf(IllegalStateException.class);
            view.setAtIndex(JAVA_FLOAT_UNALIGNED, 0, 2.5f); // a range of the buffer's view, still open
            float[] back = new float[100];
            buffer.copyTo(back);
            assertThat(back[10]).isEqualTo(2.5f);
        }
        assertThatThrownBy(() -> view.getAtIndex(JAVA_FLOAT_UNALIGNED, 0)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aSliceOfAClosedSliceIsClosed() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 100)) {
            UnifiedBuffer slice = buffer.slice(10, 20);
            UnifiedBuffer inner = slice.slice(0, 5);
            slice.close();
            assertThat(inner.isClosed()).isTrue();
            assertThatThrownBy(() -> inner.copyFrom(new float[5])).isInstanceOf(IllegalStateException.class).hasMessageContaining("is closed");
        }
    }

    @Test
    void rangesThatOverflowAreRefusedAndHoldNothing() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT64, 16);
             UnifiedBuffer other = manager.allocate(DataType.FLOAT64, 16)) {
            UnifiedBuffer slice = buffer.slice(4, 8);
            long[] offsets = {-1, Long.MIN_VALUE, Long.MAX_VALUE, Long.MAX_VALUE - 7, 121, 64};
            for (long offset : offsets) {
                assertThatThrownBy(() -> slice.copyFrom(offset, new byte[8], 0, 8)).as("write at %d", offset).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> slice.copyTo(offset, new byte[8], 0, 8)).as("read at %d", offset).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> other.copyFrom(slice, offset, 0, 8)).as("copy from %d", offset).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> slice.copyFrom(other, 0, offset, 8)).as("copy to %d", offset).isInstanceOf(IndexOutOfBoundsException.class);
            }
            for (long bytes : new long[] {-1, Long.MIN_VALUE, Long.MAX_VALUE, 65}) {
                assertThatThrownBy(() -> other.copyFrom(slice, 0, 0, bytes)).as("%d bytes", bytes).isInstanceOf(IndexOutOfBoundsException.class);
            }
            assertThatThrownBy(() -> slice.copyFrom(0, new byte[8], Integer.MAX_VALUE, 2)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.copyFrom(0, new double[8], 4, Integer.MIN_VALUE)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.copyFrom(new double[9])).as("one element past the slice").isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.slice(1, 8)).as("past the slice, inside its buffer").isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.slice(Long.MAX_VALUE, Long.MAX_VALUE)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.slice(Long.MIN_VALUE, 1)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> slice.slice(0, -1)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThat(slice.slice(7, 1).byteOffset()).as("the last element of the slice").isEqualTo(88);
        }
        assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).as("refused calls hold nothing").isZero();
        assertThat(manager.statistics(MemoryLocation.HOST).allocatedBytes()).isZero();
    }

    @Test
    void overlappingCopiesAndOpsStayInsideTheirRanges() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 32)) {
            float[] values = new float[32];
            for (int i = 0; i < 32; i++) {
                values[i] = i;
            }
            buffer.copyFrom(values);
            buffer.copyFrom(buffer, 4 * 4, 8 * 4, 16 * 4); // forwards over itself: as memmove
            float[] back = new float[32];
            buffer.copyTo(back);
            for (int i = 0; i < 32; i++) {
                assertThat(back[i]).as("element %d", i).isEqualTo(i >= 8 && i < 24 ? i - 4 : i);
            }
            buffer.copyFrom(values);
            UnifiedBuffer low = buffer.slice(8, 8);
            UnifiedBuffer high = buffer.slice(12, 8); // overlaps low by four elements
            assertThatThrownBy(() -> manager.ops().axpy(1, low, high)).as("what it computes would depend on the order of its loop")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("elements [8, 16) and y elements [12, 20)");
            manager.ops().scale(buffer.slice(8, 12), 1);
            buffer.copyTo(back);
            for (int i = 0; i < 32; i++) {
                if (i < 12 || i >= 20) {
                    assertThat(back[i]).as("element %d, outside the slice written", i).isEqualTo(i);
                }
            }
            manager.ops().fill(high, 0);
            assertThat(manager.ops().sum(buffer)).isEqualTo((0 + 11) * 12 / 2.0 + (20 + 31) * 12 / 2.0);
        }
        assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
    }

    // ---- accesses and closes on the wrong thread or twice ---------------------------------------------------------

    @Test
    void accessesEndOnceAndOnlyOnTheirThreadWhateverClosedFirst() throws Exception {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 64, MemoryLocation.DEVICE);
        BufferAccess device = buffer.deviceAccess(AccessMode.READ_WRITE);
        BufferAccess shared = buffer.sharedHostAccess(AccessMode.READ);
        Throwable elsewhere = CompletableFuture.supplyAsync(() -> catchThrowable(device::close), Thread::startVirtualThread).get(10, TimeUnit.SECONDS);
        assertThat(elsewhere).isInstanceOf(WrongThreadException.class).hasMessageContaining("only it may end it");
        assertThat(device.isOpen()).isTrue();
        buffer.close();
        assertThatThrownBy(() -> buffer.deviceAccess(AccessMode.READ)).isInstanceOf(IllegalStateException.class).hasMessageContaining("is closed");
        device.segment().setAtIndex(JAVA_FLOAT_UNALIGNED, 63, 1f); // still open: the memory waits for it
        CompletableFuture.runAsync(shared::close, Thread::startVirtualThread).get(10, TimeUnit.SECONDS);
        shared.close();
        assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).as("closed: not live").isZero();
        assertThat(manager.statistics(MemoryLocation.DEVICE).heldBuffers()).as("held by the device access").isEqualTo(1);
        device.close();
        device.close();
        assertThatThrownBy(device::segment).isInstanceOf(IllegalStateException.class).hasMessageContaining("has ended");
        assertThatThrownBy(() -> device.inFlightUntil(new CompletableFuture<>())).isInstanceOf(IllegalStateException.class);
        assertThat(manager.statistics(MemoryLocation.DEVICE).heldBuffers()).isZero();
        assertThat(manager.statistics(MemoryLocation.DEVICE).allocatedBytes()).isZero();
        buffer.close();
    }

    @Test
    void aBufferClosedInsideItsOwnAccessesOnEveryLocationWaitsForTheLastOne() {
        for (MemoryLocation location : manager.locations()) {
            UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, location);
            UnifiedBuffer slice = buffer.slice(512, 512);
            MemorySegment view = buffer.hostView();
            BufferAccess device = slice.deviceAccess(AccessMode.WRITE);
            BufferAccess host = buffer.hostAccess(AccessMode.READ);
            assertThat(device.segment().byteSize()).as("%s: the slice's bytes, no more", location).isEqualTo(2048);
            device.segment().setAtIndex(JAVA_FLOAT_UNALIGNED, 0, 5f);
            buffer.close();
            assertThatThrownBy(() -> view.get(JAVA_BYTE, 0)).as("%s: this thread's view ends with the close", location)
                    .isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> slice.hostAccess(AccessMode.READ)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("the buffer it is a slice of was closed");
            manager.releaseCachedMemory();
            device.close();
            assertThat(host.segment().getAtIndex(JAVA_FLOAT_UNALIGNED, 512)).as("%s: the host access still reads the buffer", location).isEqualTo(5f);
            assertThat(manager.statistics(location).liveBuffers()).as("%s: closed, so not live", location).isZero();
            assertThat(manager.statistics(location).heldBuffers()).as("%s: held by the host access", location).isEqualTo(1);
            host.close();
            assertThat(manager.statistics(location).heldBuffers()).as("%s", location).isZero();
        }
    }

    // ---- helpers ------------------------------------------------------------------------------------------------

    /** Device work recorded on the buffer through a device access, not complete until the test completes it. */
    private static CompletableFuture<Void> recordedWork(UnifiedBuffer buffer) {
        CompletableFuture<Void> work = new CompletableFuture<>();
        try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
            access.inFlightUntil(work);
        }
        return work;
    }

    /** Waits until {@code thread} is parked or blocked (here: waiting, with its bound, for work in flight). */
    private static void awaitBlocked(Thread thread) throws InterruptedException {
        List<Thread.State> stopped = List.of(Thread.State.WAITING, Thread.State.TIMED_WAITING, Thread.State.BLOCKED);
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (!stopped.contains(thread.getState()) && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(thread.getState()).isIn(stopped);
    }

    /** Runs {@code call} on a daemon thread and fails if it has not returned within {@code bound}: a hang fails the test. */
    private static <T> T within(Duration bound, Callable<T> call) throws Exception {
        FutureTask<T> task = new FutureTask<>(call);
        Thread.ofPlatform().daemon().name("bounded-call").start(task);
        try {
            return task.get(bound.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException hung) {
            throw new AssertionError("did not return within " + bound, hung);
        } catch (ExecutionException failed) {
            throw failed.getCause() instanceof Exception e ? e : failed;
        }
    }

    private void assertEventuallyNothingLive() throws InterruptedException {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (manager.statistics(MemoryLocation.HOST).liveBuffers() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).as("live buffers once the holder's thread ended").isZero();
        assertThat(manager.statistics(MemoryLocation.HOST).allocatedBytes()).isZero();
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static byte[] filled(int size, byte value) {
        byte[] bytes = new byte[size];
        Arrays.fill(bytes, value);
        return bytes;
    }
}
