package dev.compute.memory.resource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What every {@link MemoryResource} must do, as RMM's {@code mr_ref_test}: each resource's test class extends this
 * and says how to build the resource over a backend of {@value #LIMIT} bytes.
 */
public abstract class MemoryResourceContract {

    protected static final long MiB = 1L << 20;
    /** The most the resource under test may hold. */
    protected static final long LIMIT = 256 * MiB;

    protected AddressSpaceBackend backend;
    protected MemoryResource resource;

    /** The resource under test over {@code upstream}, whose limit is {@link #LIMIT}. */
    protected abstract MemoryResource create(BackendResource upstream);

    /** The backend's resource every chain ends in, with the {@link #LIMIT}. */
    protected static BackendResource backendResource(AddressSpaceBackend backend) {
        return new BackendResource(backend, MemoryLocation.DEVICE, LIMIT, "the test's limit", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT,
                MemoryEventListener.NONE);
    }

    @BeforeEach
    void open() {
        backend = new AddressSpaceBackend(1L << 30);
        resource = create(backendResource(backend));
    }

    @AfterEach
    void closeResource() {
        resource.close();
    }

    @Test
    public void aBlockHasAtLeastTheBytesAskedAndSaysWhatWasAsked() {
        for (long bytes : new long[] {1, 511, 512, 513, 4096, 1_000_000, 3 * MiB + 7}) {
            Block block = resource.allocate(bytes);
            assertThat(block.size()).as("size for %d bytes", bytes).isGreaterThanOrEqualTo(bytes);
            assertThat(block.requestedSize()).isEqualTo(bytes);
            assertThat(block.offset() + block.size()).isLessThanOrEqualTo(block.segment().sizeBytes());
            resource.deallocate(block);
        }
    }

    @Test
    public void blocksLiveTogetherNeverOverlap() {
        List<Block> live = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            live.add(resource.allocate(1 + ThreadLocalRandom.current().nextLong(2 * MiB)));
        }
        assertNoOverlap(live);
        live.forEach(resource::deallocate);
    }

    @Test
    public void aSizeThatIsNotPositiveIsRefused() {
        assertThatThrownBy(() -> resource.allocate(0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> resource.allocate(-1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    public void moreThanTheLimitFailsWithOutOfMemoryAndLeavesTheResourceUsable() {
        assertThatThrownBy(() -> resource.allocate(LIMIT + 1)).isInstanceOf(DeviceOutOfMemoryException.class)
                .satisfies(e -> assertThat(((DeviceOutOfMemoryException) e).requestedBytes()).isEqualTo(LIMIT + 1))
                .satisfies(e -> assertThat(((DeviceOutOfMemoryException) e).location()).isEqualTo(MemoryLocation.DEVICE));
        List<Block> live = new ArrayList<>();
        assertThatThrownBy(() -> {
            while (true) {
                live.add(resource.allocate(16 * MiB));
            }
        }).isInstanceOf(DeviceOutOfMemoryException.class);
        assertThat(live).as("the limit was reached, not a smaller one").hasSizeGreaterThanOrEqualTo((int) (LIMIT / (16 * MiB)) - 2);
        live.forEach(resource::deallocate);
        resource.deallocate(resource.allocate(16 * MiB));
    }

    @Test
    public void aBlockGivenBackTwiceIsRefusedTheSecondTime() {
        Block block = resource.allocate(4096);
        resource.deallocate(block);
        assertThatThrownBy(() -> resource.deallocate(block)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    public void aBlockOfAnotherResourceIsRefused() {
        try (MemoryResource other = create(backendResource(backend))) {
            Block foreign = other.allocate(4096);
            assertThatThrownBy(() -> resource.deallocate(foreign)).isInstanceOf(IllegalArgumentException.class);
            other.deallocate(foreign);
        }
    }

    @Test
    public void memoryUnderDeviceWorkIsNotHandedOutBeforeTheWorkCompletes() {
        Block busy = resource.allocate(64 * 1024);
        long address = busy.segment().address() + busy.offset();
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        resource.deallocate(busy, kernel);
        List<Block> meanwhile = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            Block block = resource.allocate(64 * 1024);
            meanwhile.add(block);
            long start = block.segment().address() + block.offset();
            assertThat(start + block.size() <= address || start >= address + 64 * 1024)
                    .as("block %d does not overlap memory the kernel still uses", i).isTrue();
        }
        kernel.complete(null);
        meanwhile.forEach(resource::deallocate);
    }

    @Test
    public void threadsAllocatingAndFreeingEachOthersBlocksLeaveNothingBehind() throws InterruptedException {
        ConcurrentLinkedQueue<Block> handedOver = new ConcurrentLinkedQueue<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            threads.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    for (int i = 0; i < 2_000; i++) {
                        handedOver.add(resource.allocate(1 + ThreadLocalRandom.current().nextLong(64 * 1024)));
                        Block other = handedOver.poll();
                        if (other != null) {
                            resource.deallocate(other);
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        start.countDown();
        for (Thread thread : threads) {
            thread.join();
        }
        assertThat(failure.get()).isNull();
        assertNoOverlap(List.copyOf(handedOver));
        handedOver.forEach(resource::deallocate);
    }

    @Test
    public void afterCloseAllocationsFailAndFreesAreIgnored() {
        Block block = resource.allocate(4096);
        resource.close();
        assertThatThrownBy(() -> resource.allocate(4096)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        assertThatCode(() -> resource.deallocate(block)).doesNotThrowAnyException();
        assertThatCode(resource::close).as("closing twice is harmless").doesNotThrowAnyException();
        assertThat(backend.liveAllocations()).as("everything went back to the backend").isZero();
    }

    private static void assertNoOverlap(List<Block> blocks) {
        List<Block> ordered = new ArrayList<>(blocks);
        ordered.sort(Comparator.comparingLong(b -> b.segment().address() + b.offset()));
        for (int i = 1; i < ordered.size(); i++) {
            Block before = ordered.get(i - 1);
            Block after = ordered.get(i);
            assertThat(before.segment().address() + before.offset() + before.size())
                    .as("%s and %s do not overlap", before, after).isLessThanOrEqualTo(after.segment().address() + after.offset());
        }
    }
}
