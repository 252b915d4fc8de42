package dev.compute.memory.contract;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The lifetime rule, on every backend: no view, access, op, copy or slice reaches memory after it went back to
 * the pool, and every use after close fails with a clear {@link IllegalStateException} naming the buffer. The
 * tests recognise memory by the bytes written into it: a pool hands a freed block of the same size to the next
 * buffer, so a stale view that reached freed memory would read the next buffer's bytes.
 */
public abstract class BufferLifetimeContractTest {

    private static final int SIZE = 4096;

    protected UnifiedMemoryManager manager;
    private final ExecutorService other = Executors.newSingleThreadExecutor(Thread.ofPlatform().name("other-thread").factory());

    /** A fresh manager on the backend under test, with leak detection paranoid. */
    protected abstract UnifiedMemoryManager newManager();

    @BeforeEach
    void openManager() {
        manager = newManager();
    }

    @AfterEach
    void closeManager() {
        other.shutdownNow();
        if (manager != null) {
            manager.close();
        }
    }

    @Test
    void aViewOfAClosedBufferFailsAndNeverReadsTheNextBuffer() {
        for (MemoryLocation location : manager.locations()) {
            UnifiedBuffer first = manager.allocate(SIZE, location);
            MemorySegment stale = first.hostView();
            stale.fill((byte) 1);
            first.close();
            try (UnifiedBuffer next = manager.allocate(SIZE, location)) {
                next.copyFrom(filled(SIZE, (byte) 2));
                assertThatThrownBy(() -> stale.get(JAVA_BYTE, 0)).as("%s", location).isInstanceOf(IllegalStateException.class);
                assertThatThrownBy(() -> stale.set(JAVA_BYTE, 0, (byte) 3)).isInstanceOf(IllegalStateException.class);
                assertThat(readAll(next)).as("%s: the next buffer is untouched", location).containsOnly(2);
            }
        }
    }

    @Test
    void aViewReturnedOutOfTryWithResourcesFailsClearly() {
        MemorySegment escaped;
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 64)) {
            escaped = buffer.readOnlyHostView();
        }
        manager.releaseCachedMemory();
        assertThatThrownBy(() -> escaped.getAtIndex(JAVA_FLOAT_UNALIGNED, 0)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aBufferClosedOnAnotherThreadKeepsItsMemoryUntilTheViewsThreadLetsGo() throws Exception {
        UnifiedBuffer buffer = manager.allocate(SIZE, manager.defaultLocation());
        MemorySegment view = buffer.hostView();
        view.fill((byte) 5);
        other.submit(buffer::close).get(10, TimeUnit.SECONDS);
        assertThat(buffer.isClosed()).isTrue();
        other.submit(manager::releaseCachedMemory).get(10, TimeUnit.SECONDS);
        // a same-size buffer made elsewhere meanwhile gets other memory: the view still reads its own bytes
        UnifiedBuffer next = other.submit(() -> {
            UnifiedBuffer b = manager.allocate(SIZE, manager.defaultLocation());
            b.copyFrom(filled(SIZE, (byte) 6));
            return b;
        }).get(10, TimeUnit.SECONDS);
        assertThat(view.get(JAVA_BYTE, SIZE - 1)).isEqualTo((byte) 5);
        // reading figures is no use of memory (meters read them from any thread): the view is left alone
        manager.statistics();
        manager.statistics(manager.defaultLocation());
        assertThat(view.get(JAVA_BYTE, 0)).isEqualTo((byte) 5);
        // this thread's next use of the manager's memory (a failing one too) ends the view
        assertThatThrownBy(() -> buffer.copyTo(new byte[1])).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("UnifiedBuffer[").hasMessageContaining("is closed");
        assertThatThrownBy(() -> view.get(JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThat(readAll(next)).containsOnly(6);
        next.close();
        assertThat(manager.statistics(manager.defaultLocation()).liveBuffers()).isZero();
    }

    /**
     * A view on the thread that allocated the buffer, while no other thread has used it, is confined to that thread (no
     * handshake to end it); a view another thread takes is shared, so that closing the buffer anywhere ends it at once.
     */
    @Test
    void aViewOnTheAllocatingThreadIsItsOwnAndOneTakenElsewhereIsShared() throws Exception {
        UnifiedBuffer buffer = manager.allocate(SIZE, manager.defaultLocation());
        buffer.copyFrom(filled(SIZE, (byte) 3));
        MemorySegment view = buffer.hostView();
        Future<?> elsewhere = other.submit(() -> view.get(JAVA_BYTE, 0));
        assertThatThrownBy(elsewhere::get).hasCauseInstanceOf(WrongThreadException.class);

        MemorySegment theirs = other.submit(buffer::readOnlyHostView).get(10, TimeUnit.SECONDS);
        assertThat(theirs.get(JAVA_BYTE, 0)).as("a shared view reads on any thread").isEqualTo((byte) 3);
        buffer.close();
        assertThatThrownBy(() -> theirs.get(JAVA_BYTE, 0)).as("ended with its buffer, whoever closed it").isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> view.get(JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThat(manager.statistics(manager.defaultLocation()).heldBuffers()).isZero();
    }

    /**
     * Another thread's view of a buffer, idle ever after (a pool's worker that never calls in again): closing the buffer
     * gives its memory back at once, and no figure counts it.
     */
    @Test
    void aBufferViewedByAnIdleThreadGivesItsMemoryBackWhenClosed() throws Exception {
        MemoryLocation location = manager.defaultLocation();
        UnifiedBuffer buffer = manager.allocate(SIZE, location);
        buffer.copyFrom(filled(SIZE, (byte) 4));
        CountDownLatch viewing = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        MemorySegment[] kept = new MemorySegment[1];
        Thread idle = Thread.ofPlatform().daemon().start(() -> {
            kept[0] = buffer.readOnlyHostView();
            viewing.countDown();
            awaitQuietly(done); // idle, holding its view, never calling in
        });
        try {
            viewing.await();
            buffer.close();
            MemoryStatistics after = manager.statistics(location);
            assertThat(after.liveBuffers()).isZero();
            assertThat(after.heldBuffers()).as("nothing waits for the idle thread").isZero();
            assertThat(after.allocatedBytes()).isZero();
            assertThatThrownBy(() -> kept[0].get(JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        } finally {
            done.countDown();
            idle.join(10_000);
        }
    }

    /**
     * This thread's own view, taken outside any scope, of a HOST buffer closed on another thread, past
     * {@code held-memory-warning} (1 s by default) while this thread does not call in: the memory's pages go back to the
     * operating system (the view reads zeros), the range at this thread's next call.
     */
    @Test
    void aViewOnAnIdleThreadHoldsOnlyTheRangePastTheBound() throws Exception {
        int bytes = 64 * SIZE;
        UnifiedBuffer buffer = manager.allocate(bytes, MemoryLocation.HOST);
        MemorySegment view = buffer.hostView();
        view.fill((byte) 5);
        other.submit(buffer::close).get(10, TimeUnit.SECONDS);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (view.get(JAVA_BYTE, bytes / 2) != 0 && System.nanoTime() < deadline) {
            Thread.sleep(20); // reading the view and sleeping are no calls into the manager
        }
        assertThat(view.get(JAVA_BYTE, bytes / 2)).as("its pages went back").isZero();
        assertThat(manager.statistics(MemoryLocation.HOST).heldBytes()).as("the range waits for this thread").isPositive();
        assertThatThrownBy(() -> buffer.copyTo(new byte[1])).isInstanceOf(IllegalStateException.class); // ends the view
        assertThat(manager.statistics(MemoryLocation.HOST).heldBytes()).isZero();
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void anAccessHoldsTheMemoryAcrossCloseAndEndsClearly() {
        for (MemoryLocation location : manager.locations()) {
            UnifiedBuffer buffer = manager.allocate(SIZE, location);
            buffer.copyFrom(filled(SIZE, (byte) 7));
            BufferAccess access = buffer.hostAccess(AccessMode.READ);
            MemorySegment bytes = access.segment();
            buffer.close();
            assertThat(buffer.isClosed()).isTrue();
            assertThatThrownBy(() -> buffer.hostAccess(AccessMode.READ)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("is closed");
            assertThat(manager.statistics(location).liveBuffers()).as("%s: closed, no live buffer", location).isZero();
            assertThat(manager.statistics(location).heldBuffers()).as("%s: held by the access", location).isEqualTo(1);
            manager.releaseCachedMemory();
            try (UnifiedBuffer next = manager.allocate(SIZE, location)) {
                next.copyFrom(filled(SIZE, (byte) 8));
                assertThat(bytes.get(JAVA_BYTE, SIZE / 2)).as("%s", location).isEqualTo((byte) 7);
                access.close();
                assertThatThrownBy(() -> bytes.get(JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
                assertThatThrownBy(access::segment).isInstanceOf(IllegalStateException.class).hasMessageContaining("has ended");
                assertThat(readAll(next)).containsOnly(8);
            }
            assertThat(manager.statistics(location).liveBuffers()).as("%s: released once the access ended", location).isZero();
        }
    }

    /**
     * A closed buffer that an access or another thread's view still holds is no live buffer at any location: its host
     * mirror (a device buffer's host copy, allocated at the mirror's location) is held with it, not live there. A view
     * reaches only the mirror: a device buffer that views alone hold has its device memory back at the close.
     */
    @Test
    void aHeldBuffersHostMirrorIsHeldNotLive() throws Exception {
        for (MemoryLocation location : manager.locations()) {
            UnifiedBuffer accessed = manager.allocate(SIZE, location);
            BufferAccess access = accessed.hostAccess(AccessMode.WRITE);
            accessed.close();
            UnifiedBuffer viewed = manager.allocate(SIZE, location);
            viewed.hostView().fill((byte) 1);
            other.submit(viewed::close).get(10, TimeUnit.SECONDS);

            assertThat(manager.liveBuffers()).as("%s: both closed", location).isEmpty();
            for (MemoryLocation at : manager.locations()) {
                MemoryStatistics figures = manager.statistics(at);
                assertThat(figures.liveBuffers()).as("%s buffers, at %s", location, at).isZero();
                assertThat(figures.allocatedBytes()).as("%s buffers, at %s", location, at).isZero();
            }
            long heldBytes = manager.locations().stream().mapToLong(at -> manager.statistics(at).heldBytes()).sum();
            assertThat(heldBytes).as("%s: each buffer's memory, and its mirror where it has one, but the viewed one's device memory", location)
                    .isEqualTo(accessed.isHostAccessible() ? 2L * SIZE : 3L * SIZE);

            access.close();
            assertThatThrownBy(() -> viewed.copyTo(new byte[1])).isInstanceOf(IllegalStateException.class); // ends the view
            for (MemoryLocation at : manager.locations()) {
                assertThat(manager.statistics(at).heldBytes()).as("%s buffers, at %s, let go", location, at).isZero();
            }
        }
    }

    @Test
    void accessModesShapeTheSegmentAndTheState() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 256)) {
            try (BufferAccess write = buffer.hostAccess(AccessMode.WRITE)) {
                for (int i = 0; i < 256; i++) {
                    write.segment().setAtIndex(JAVA_FLOAT_UNALIGNED, i, 1f);
                }
            }
            assertThat(manager.ops().sum(buffer)).as("a host write is seen by the device").isEqualTo(256.0);
            manager.ops().scale(buffer, 3);
            try (BufferAccess read = buffer.hostAccess(AccessMode.READ)) {
                assertThat(read.segment().isReadOnly()).isTrue();
                assertThat(read.segment().getAtIndex(JAVA_FLOAT_UNALIGNED, 255)).as("a device write is seen by the host").isEqualTo(3f);
                assertThatThrownBy(read::offset).isInstanceOf(IllegalStateException.class);
            }
            if (!buffer.isHostAccessible()) {
                assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
            }
        }
    }

    @Test
    void aDeviceAccessSaysWhereTheBytesAreAndItsWritesWin() {
        for (MemoryLocation location : manager.locations()) {
            try (UnifiedBuffer padding = manager.allocate(1000, location);
                 UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 100, location)) {
                buffer.copyFrom(new float[100]);
                BufferAccess access;
                try {
                    access = buffer.deviceAccess(AccessMode.READ_WRITE);
                } catch (IllegalArgumentException kernelsCannotReachIt) {
                    assertThat(kernelsCannotReachIt).hasMessageContaining(location.name());
                    continue;
                }
                try (access) {
                    assertThat(access.isDeviceAccess()).isTrue();
                    assertThat(access.offset()).isNotNegative();
                    assertThat(access.byteSize()).isEqualTo(400);
                    if (buffer.isHostAccessible()) {
                        access.segment().setAtIndex(JAVA_FLOAT_UNALIGNED, 99, 4f);
                    }
                }
                if (buffer.isHostAccessible()) {
                    float[] back = new float[100];
                    buffer.copyTo(back);
                    assertThat(back[99]).as("%s", location).isEqualTo(4f);
                } else {
                    assertThat(buffer.state()).isIn(BufferState.DEVICE_ONLY, BufferState.DEVICE_DIRTY);
                }
            }
        }
    }

    @Test
    void aConfinedAccessEndsOnlyOnItsThreadAndASharedOneAnywhere() throws Exception {
        try (UnifiedBuffer buffer = manager.allocate(SIZE, manager.defaultLocation())) {
            BufferAccess confined = buffer.hostAccess(AccessMode.READ);
            assertThat(confined.isShared()).isFalse();
            assertThatThrownBy(() -> other.submit(confined::close).get()).hasCauseInstanceOf(WrongThreadException.class);
            assertThat(confined.isOpen()).isTrue();
            confined.close();

            BufferAccess shared = buffer.sharedHostAccess(AccessMode.WRITE);
            assertThat(shared.isShared()).isTrue();
            MemorySegment bytes = shared.segment();
            other.submit(() -> bytes.fill((byte) 9)).get(10, TimeUnit.SECONDS);
            other.submit(shared::close).get(10, TimeUnit.SECONDS);
            assertThatThrownBy(() -> bytes.get(JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
            assertThat(readAll(buffer)).containsOnly(9);
        }
    }

    @Test
    void opsAndCopiesOfAClosedBufferFailNamingIt() {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT64, 32);
        UnifiedBuffer live = manager.allocate(DataType.FLOAT64, 32);
        buffer.close();
        String named = "UnifiedBuffer[" + buffer.location() + ", 256 bytes, FLOAT64] is closed";
        assertThatThrownBy(() -> manager.ops().fill(buffer, 1)).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
        assertThatThrownBy(() -> manager.ops().axpy(1, live, buffer)).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
        assertThatThrownBy(() -> manager.ops().axpy(1, buffer, live)).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
        assertThatThrownBy(() -> live.copyFrom(buffer, 0, 0, 8)).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
        assertThatThrownBy(() -> buffer.copyFrom(live, 0, 0, 8)).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
        assertThatThrownBy(() -> buffer.deviceAccess(AccessMode.READ)).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
        assertThatThrownBy(() -> buffer.slice(0, 1)).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
        assertThatThrownBy(buffer::markDeviceDirty).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
        live.close();
        assertThat(manager.statistics(buffer.location()).liveBuffers()).as("nothing held after failed uses").isZero();
    }

    @Test
    void slicesShareTheMemoryAndDieWithTheirBuffer() {
        for (MemoryLocation location : manager.locations()) {
            UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1000, location);
            buffer.copyFrom(new float[1000]);
            UnifiedBuffer middle = buffer.slice(100, 50);
            assertThat(middle.isSlice()).isTrue();
            assertThat(middle.elementCount()).isEqualTo(50);
            assertThat(middle.byteOffset()).isEqualTo(400);
            manager.ops().fill(middle, 2);
            UnifiedBuffer inner = middle.slice(10, 5);
            assertThat(inner.byteOffset()).isEqualTo(440);
            inner.copyFrom(new float[] {7, 7, 7, 7, 7});
            float[] all = new float[1000];
            buffer.copyTo(all);
            assertThat(all[99]).isZero();
            assertThat(all[100]).isEqualTo(2f);
            assertThat(all[110]).isEqualTo(7f);
            assertThat(all[115]).isEqualTo(2f);
            assertThat(all[150]).isZero();
            assertThat(manager.ops().sum(middle)).as("%s", location).isEqualTo(45 * 2.0 + 5 * 7.0);
            try (BufferAccess access = inner.hostAccess(AccessMode.READ)) {
                assertThat(access.segment().byteSize()).isEqualTo(20);
                assertThat(access.segment().getAtIndex(JAVA_FLOAT_UNALIGNED, 4)).isEqualTo(7f);
            }
            UnifiedBuffer other = manager.allocate(DataType.FLOAT32, 5, location);
            other.copyFrom(inner, 0, 0, 20);
            float[] copied = new float[5];
            other.copyTo(copied);
            assertThat(copied).containsOnly(7f);
            other.close();

            inner.close();
            assertThat(inner.isClosed()).isTrue();
            assertThat(middle.isClosed()).as("closing a slice ends only the slice").isFalse();
            assertThatThrownBy(() -> inner.copyTo(new float[1])).isInstanceOf(IllegalStateException.class);
            buffer.close();
            assertThat(middle.isClosed()).isTrue();
            assertThatThrownBy(() -> manager.ops().sum(middle)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("the buffer it is a slice of was closed");
            assertThat(manager.statistics(location).liveBuffers()).isZero();
        }
    }

    @Test
    void slicesOutsideTheBufferAreRefused() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT64, 10)) {
            assertThatThrownBy(() -> buffer.slice(-1, 2)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.slice(5, 6)).isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("outside");
            assertThatThrownBy(() -> buffer.slice(0, 0)).isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("at least one");
            assertThatThrownBy(() -> buffer.slice(Long.MAX_VALUE, 1)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.slice(2, 3).copyFrom(new double[4])).isInstanceOf(IndexOutOfBoundsException.class);
        }
    }

    @Test
    void closingASliceEndsItAndItsSlicesWhileViewsTakenOfThemLastAsTheBuffersViews() {
        for (MemoryLocation location : manager.locations()) {
            MemorySegment ofSlice;
            try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 64, location)) {
                UnifiedBuffer slice = buffer.slice(8, 16);
                UnifiedBuffer inner = slice.slice(4, 4);
                MemorySegment whole = buffer.hostView();
                ofSlice = slice.hostView();
                MemorySegment ofInner = inner.readOnlyHostView();
                ofSlice.setAtIndex(JAVA_FLOAT_UNALIGNED, 4, 3.5f);
                assertThat(ofInner.getAtIndex(JAVA_FLOAT_UNALIGNED, 0)).isEqualTo(3.5f);

                slice.close();

                assertThatThrownBy(slice::hostView).as("%s: the slice", location).isInstanceOf(IllegalStateException.class);
                assertThatThrownBy(inner::readOnlyHostView).as("%s: a slice cut from it", location).isInstanceOf(IllegalStateException.class);
                assertThat(ofSlice.getAtIndex(JAVA_FLOAT_UNALIGNED, 4)).as("%s: the slice's view, a range of the buffer's", location).isEqualTo(3.5f);
                assertThat(ofInner.getAtIndex(JAVA_FLOAT_UNALIGNED, 0)).as("%s: the view of a slice cut from it", location).isEqualTo(3.5f);
                assertThat(whole.getAtIndex(JAVA_FLOAT_UNALIGNED, 12)).as("%s: the buffer's own view works on", location).isEqualTo(3.5f);
                assertThat(buffer.isClosed()).isFalse();
            }
            assertThatThrownBy(() -> ofSlice.getAtIndex(JAVA_FLOAT_UNALIGNED, 0)).as("%s: ended with the buffer", location)
                    .isInstanceOf(IllegalStateException.class);
            assertThat(manager.statistics(location).liveBuffers()).as("%s", location).isZero();
        }
    }

    @Test
    void aSliceViewAndAccessOutliveNothing() {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 64);
        UnifiedBuffer slice = buffer.slice(8, 8);
        MemorySegment view = slice.hostView();
        view.setAtIndex(JAVA_FLOAT_UNALIGNED, 0, 1.5f);
        float[] back = new float[64];
        buffer.copyTo(back);
        assertThat(back[8]).isEqualTo(1.5f);
        buffer.close();
        assertThatThrownBy(() -> view.getAtIndex(JAVA_FLOAT_UNALIGNED, 0)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void theDirtyMarksMoveTheNewerCopy() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16)) {
            buffer.copyFrom(new float[16]);
            buffer.markDeviceDirty();
            if (buffer.isHostAccessible()) {
                assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
                buffer.markHostDirty();
                assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
            } else {
                assertThat(buffer.state()).isIn(BufferState.DEVICE_ONLY, BufferState.DEVICE_DIRTY);
                assertThatThrownBy(buffer::markHostDirty).isInstanceOf(IllegalStateException.class).hasMessageContaining("no host copy");
                buffer.readOnlyHostView();
                buffer.markHostDirty();
                assertThat(buffer.state()).isEqualTo(BufferState.HOST_DIRTY);
            }
        }
    }

    @Test
    void closingTheManagerEndsThisThreadsViewsAndAccessesBeforeFreeing() {
        UnifiedMemoryManager own = newManager();
        UnifiedBuffer buffer = own.allocate(SIZE, own.defaultLocation());
        MemorySegment view = buffer.hostView();
        BufferAccess access = buffer.hostAccess(AccessMode.READ_WRITE);
        MemorySegment bytes = access.segment();
        own.close();
        assertThatThrownBy(() -> view.get(JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> bytes.get(JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThat(access.isOpen()).isFalse();
        access.close();
        assertThatThrownBy(buffer::hostView).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("because its UnifiedMemoryManager was closed");
        buffer.close();
    }

    @Test
    void closingTheManagerWaitsForAnotherThreadToLetGoOfItsView() throws Exception {
        UnifiedMemoryManager own = newManager();
        UnifiedBuffer buffer = own.allocate(SIZE, own.defaultLocation());
        CountDownLatch viewing = new CountDownLatch(1);
        AtomicReference<Throwable> seen = new AtomicReference<>();
        Future<?> worker = other.submit(() -> {
            MemorySegment view = buffer.hostView();
            viewing.countDown();
            try {
                while (true) {
                    view.set(JAVA_BYTE, 0, (byte) 1);
                    buffer.copyTo(new byte[1]); // a call into the manager: after close it fails and ends the view
                }
            } catch (IllegalStateException closed) {
                // the view is shared (another thread's buffer, no scope): the closing thread ends it, maybe a moment later
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (seen.get() == null && System.nanoTime() < deadline) {
                    try {
                        view.get(JAVA_BYTE, 0);
                        Thread.onSpinWait();
                    } catch (IllegalStateException ended) {
                        seen.set(ended);
                    }
                }
            }
            return null;
        });
        viewing.await();
        own.close();
        worker.get(10, TimeUnit.SECONDS);
        assertThat(seen.get()).as("the worker's view ended with the manager").isNotNull();
    }

    @Test
    void opsQueuedOnABufferThenClosedNeverReachTheNextBuffer() throws Exception {
        List<CompletableFuture<Void>> fills = new ArrayList<>();
        List<UnifiedBuffer> next = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            UnifiedBuffer doomed = manager.allocate(DataType.FLOAT32, 1 << 16);
            fills.add(manager.ops().fillAsync(doomed, 1.0));
            doomed.close();
            UnifiedBuffer fresh = manager.allocate(DataType.FLOAT32, 1 << 16);
            fresh.copyFrom(new float[1 << 16]);
            next.add(fresh);
        }
        CompletableFuture.allOf(fills.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
        for (UnifiedBuffer fresh : next) {
            assertThat(manager.ops().sum(fresh)).isZero();
            fresh.close();
        }
    }

    private static byte[] filled(int size, byte value) {
        byte[] bytes = new byte[size];
        java.util.Arrays.fill(bytes, value);
        return bytes;
    }

    private static byte[] readAll(UnifiedBuffer buffer) {
        byte[] back = new byte[(int) buffer.byteSize()];
        buffer.copyTo(back);
        return back;
    }
}
