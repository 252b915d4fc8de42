package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.ViewScope;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The holds of ops and copies on a {@link TestHost} over the simulated discrete device: where a kernel's memory is,
 * synced first; a hold keeps the memory past a close; its end records the kernel's work and gives the memory back
 * exactly once, however it races the close.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HoldsTest {

    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final TestHost host = new TestHost();

    private BufferCore floats(int count) {
        return host.buffer(DEVICE, DataType.FLOAT32, count);
    }

    @Test
    void aHoldKeepsTheMemoryPastCloseAndItsReleaseGivesItBackWithTheKernelsWork() {
        BufferCore root = floats(16);
        BufferCore slice = root.slice(4, 8);
        Block block = root.ownBlock();

        Region region = Holds.deviceRegion(slice, AccessMode.WRITE);
        assertThat(region.allocation()).isSameAs(block.segment());
        assertThat(region.offset()).isEqualTo(block.offset() + 16);
        assertThat(region.count()).isEqualTo(8);
        assertThat(region.type()).isEqualTo(DataType.FLOAT32);
        assertThat(root.state()).as("a writing hold makes the device copy newer").isEqualTo(BufferState.DEVICE_ONLY);
        assertThat(TestHost.unheld(root)).isFalse();

        root.close();
        assertThat(host.released).as("held by the kernel").isEmpty();

        CompletableFuture<Void> kernel = new CompletableFuture<>();
        Holds.release(slice, AccessMode.WRITE, kernel);
        assertThat(host.released).singleElement().satisfies(released -> assertThat(released.inFlight()).isSameAs(kernel));
        kernel.complete(null);
    }

    /**
     * A kernel's hold and another thread's view (in its view scope) hold a closed device buffer: as the hold ends, the
     * device memory goes back, which the view never reaches; the mirror waits for the view's scope.
     */
    @Test
    void asTheLastHoldEndsTheDeviceMemoryGoesBackAndTheMirrorWaitsForViews() throws Exception {
        BufferCore root = floats(16);
        BufferViews.view(root, AccessMode.WRITE).fill((byte) 1); // the mirror
        Holds.deviceRegion(root, AccessMode.READ);
        CountDownLatch viewed = new CountDownLatch(1);
        CountDownLatch scopeEnds = new CountDownLatch(1);
        Thread viewer = Thread.ofPlatform().start(() -> {
            try (ViewScope scope = ViewScope.open()) {
                BufferViews.view(root, AccessMode.READ);
                viewed.countDown();
                scopeEnds.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertThat(viewed.await(10, TimeUnit.SECONDS)).isTrue();
        root.close();
        assertThat(host.released).as("held by the kernel").isEmpty();

        Holds.release(root, null, BufferCore.DONE);

        assertThat(host.released).as("the device memory").singleElement().satisfies(released -> assertThat(released.mirror()).isNull());
        assertThat(host.releasedMirrors).as("the mirror waits for the view").isEmpty();
        scopeEnds.countDown();
        viewer.join(10_000);
        assertThat(host.releasedMirrors).hasSize(1);
    }

    @Test
    void aHoldForAKernelSyncsANewerHostCopyToTheDeviceFirst() {
        BufferCore root = floats(4);
        MemorySegment view = BufferViews.view(root, AccessMode.WRITE);
        view.set(ValueLayout.JAVA_FLOAT, 4, 2.5f);

        Region region = Holds.deviceRegion(root.slice(1, 2), AccessMode.READ);

        assertThat(root.state()).isEqualTo(BufferState.SYNCHRONIZED);
        assertThat(host.transferred(BufferHost.Transfer.HOST_TO_DEVICE)).as("the whole mirror").isEqualTo(16);
        MemorySegment onTheDevice = MemorySegment.ofArray(new float[2]);
        host.backend.copyToHost(region.allocation(), region.offset(), onTheDevice, 8);
        assertThat(onTheDevice.getAtIndex(ValueLayout.JAVA_FLOAT, 0)).isEqualTo(2.5f);
        Holds.release(root, null, BufferCore.DONE);
        host.scopes.endAllOfCurrentThread();
    }

    @Test
    void aReadingHoldChangesNoStateAndHoldsAdd() {
        BufferCore root = floats(4);

        Holds.deviceRegion(root, AccessMode.READ);
        Holds.deviceRegion(root, AccessMode.READ);
        Holds.release(root, null, BufferCore.DONE);
        assertThat(TestHost.unheld(root)).as("one hold still out").isFalse();
        Holds.release(root, null, BufferCore.DONE);

        assertThat(TestHost.unheld(root)).isTrue();
        assertThat(root.state()).isEqualTo(BufferState.UNINITIALIZED);
    }

    @Test
    void whenCloseRacesTheLastHoldTheBlockGoesBackExactlyOnce() throws Exception {
        for (int round = 0; round < 200; round++) {
            TestHost racing = new TestHost();
            BufferCore root = racing.buffer(DEVICE, DataType.INT8, 64);
            Holds.deviceRegion(root, AccessMode.READ);
            CyclicBarrier start = new CyclicBarrier(2);
            Thread closer = Thread.ofPlatform().start(() -> {
                await(start);
                root.close();
            });
            Thread releaser = Thread.ofPlatform().start(() -> {
                await(start);
                Holds.release(root, null, BufferCore.DONE);
            });
            closer.join(10_000);
            releaser.join(10_000);
            assertThat(closer.isAlive() || releaser.isAlive()).isFalse();
            assertThat(racing.released).as("round %d", round).hasSize(1);
        }
    }

    private static void await(CyclicBarrier barrier) {
        try {
            barrier.await(10, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }
}
