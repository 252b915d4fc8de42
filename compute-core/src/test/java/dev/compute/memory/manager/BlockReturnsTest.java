package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where a closed buffer's blocks go: its budget lets go first, then its chain takes the block back, the mirror goes to
 * the mirror location's chain, a mapped file is unmapped, and the requests waiting at each location hear of it; device
 * work the blocks still wait for is remembered for the close, and once the pools are freed nothing goes back.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BlockReturnsTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;
    private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

    /** An application's adaptor that fails to free the DEVICE blocks the test names, and notes whether a call was counted in. */
    private final List<Block> refuse = new CopyOnWriteArrayList<>();
    private final List<Block> breakOn = new CopyOnWriteArrayList<>();
    private final List<Boolean> freedInsideACall = new CopyOnWriteArrayList<>();
    private @Nullable ManagerParts partsForAdaptor;

    private final ManagerParts parts = ManagerParts.on(new SimulatedDiscreteBackend())
            .settings(set -> set.maxPoolSize(64 * MiB))
            .build();

    @TempDir
    Path dir;

    @AfterEach
    void close() {
        parts.close();
        if (partsForAdaptor != null) {
            partsForAdaptor.close();
        }
    }

    private long live(MemoryLocation location) {
        return parts.figures.statistics(location).liveBuffers();
    }

    /**
     * The budget's books let go of the block only once its chain has it back: a tenant whose books allow a new buffer is
     * never lent one the pool has not had back, out of another tenant's reservation.
     */
    @Test
    void aBudgetLetsGoOfABlockOnlyOnceItsChainHasItBack() {
        Block block = parts.block(DEVICE, 4 * MiB);
        List<Long> liveWhenTheBudgetHeard = new CopyOnWriteArrayList<>();
        BlockReturns returns = new BlockReturns(parts.chains, parts.gate, parts.compactor, parts.mappedFiles, parts.waiters,
                released -> liveWhenTheBudgetHeard.add(live(DEVICE)));

        returns.release(DEVICE, block, null, DONE, "its budget's count");

        assertThat(liveWhenTheBudgetHeard).as("told once the pool has the block back").containsExactly(0L);
        assertThat(live(DEVICE)).isZero();
        assertThat(parts.gate.awaitCalls(System.nanoTime())).as("counted out").isTrue();
    }

    @Test
    void aMirrorGoesBackToTheMirrorLocationsChain() {
        Block block = parts.block(DEVICE, 4096);
        Block mirror = parts.block(parts.chains.mirrorLocation(), 4096);
        assertThat(parts.chains.mirrorLocation()).isEqualTo(MemoryLocation.PINNED);

        parts.returns.release(DEVICE, block, mirror, DONE, "its budget's count");

        assertThat(live(DEVICE)).isZero();
        assertThat(live(MemoryLocation.PINNED)).isZero();
        assertThat(parts.budgetReleases).as("a mirror is no budget's").containsExactly("its budget's count");
    }

    @Test
    void deviceWorkTheBlocksWaitForIsRememberedUntilItIsDone() {
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        parts.returns.release(DEVICE, parts.block(DEVICE, 4096), null, kernel, null);
        parts.returns.release(DEVICE, parts.block(DEVICE, 4096), null, DONE, null);

        long start = System.nanoTime();
        assertThat(parts.returns.awaitReleasedWork(start + TimeUnit.MILLISECONDS.toNanos(100))).isFalse();
        assertThat(System.nanoTime() - start).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(90));

        kernel.complete(null);
        assertThat(parts.returns.awaitReleasedWork(System.nanoTime())).isTrue();
    }

    @Test
    void aRequestWaitingForMemoryAtTheLocationHearsOfIt() {
        List<Block> full = List.of(parts.block(DEVICE, 32 * MiB), parts.block(DEVICE, 32 * MiB));
        CompletableFuture<Block> waiting = parts.waiters.request(DataType.INT8, DEVICE, 32 * MiB, 64 * MiB, Duration.ofSeconds(20));
        assertThat(waiting).isNotDone();

        parts.returns.release(DEVICE, full.getFirst(), null, DONE, null);

        assertThat(waiting).succeedsWithin(Duration.ofSeconds(20)).satisfies(block -> assertThat(block.requestedSize()).isEqualTo(32 * MiB));
    }

    @Test
    void onceThePoolsAreFreedNothingGoesBack() {
        Block block = parts.block(DEVICE, 4096);

        parts.returns.poolsFreed();
        parts.returns.release(DEVICE, block, null, DONE, "its budget's count");

        assertThat(live(DEVICE)).as("nothing to give back to").isEqualTo(1);
        assertThat(parts.budgetReleases).isEmpty();
    }

    @Test
    void aMappedFileIsUnmappedAndNotGivenToAnyChain() throws Exception {
        Path file = Files.write(dir.resolve("weights.bin"), new byte[8192]);
        MappedFile mapping = parts.mappedFiles.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null);
        assertThat(parts.mappedFiles.statistics().openMappings()).isEqualTo(1);
        long hostFrees = parts.figures.statistics(MemoryLocation.HOST).frees();

        parts.returns.release(MemoryLocation.HOST, mapping, null, DONE, "the mapping's count");

        assertThat(parts.mappedFiles.statistics().openMappings()).isZero();
        assertThat(parts.figures.statistics(MemoryLocation.HOST).frees()).isEqualTo(hostFrees);
        assertThat(parts.budgetReleases).as("its budget, if any, counts it no more").containsExactly("the mapping's count");
    }

    @Test
    void anAdaptorThatFailsToFreeStillLetsTheMirrorGoBackAndTheWaitersHearThenTheCallerGetsItsFailure() {
        partsForAdaptor = ManagerParts.on(new SimulatedDiscreteBackend())
                .settings(set -> set.maxPoolSize(64 * MiB))
                .adaptor((upstream, location) -> new MemoryResource() {
                    @Override
                    public Block allocate(long bytes) {
                        return upstream.allocate(bytes);
                    }

                    @Override
                    public void deallocate(Block block, CompletableFuture<?> inFlight) {
                        freedInsideACall.add(!partsForAdaptor.gate.awaitCalls(System.nanoTime()));
                        if (refuse.remove(block)) {
                            throw new IllegalStateException("the adaptor refused " + location);
                        }
                        if (breakOn.remove(block)) {
                            throw new AssertionError("an adaptor's assertion");
                        }
                        upstream.deallocate(block, inFlight);
                    }

                    @Override
                    public void close() {
                        upstream.close();
                    }
                })
                .build();
        ManagerParts composed = partsForAdaptor;
        List<Block> full = List.of(composed.block(DEVICE, 32 * MiB), composed.block(DEVICE, 32 * MiB));
        Block mirror = composed.block(MemoryLocation.PINNED, 4096);
        CompletableFuture<Block> waiting = composed.waiters.request(DataType.INT8, DEVICE, 32 * MiB, 64 * MiB, Duration.ofSeconds(20));
        refuse.add(full.getFirst());

        assertThatThrownBy(() -> composed.returns.release(DEVICE, full.getFirst(), mirror, DONE, null)).isInstanceOf(IllegalStateException.class)
                .hasMessage("the adaptor refused DEVICE");

        assertThat(composed.figures.statistics(MemoryLocation.PINNED).liveBuffers()).as("the mirror went back").isZero();
        assertThat(freedInsideACall).as("each free counted in as a call").containsExactly(true, true);
        assertThat(composed.gate.awaitCalls(System.nanoTime())).isTrue();
        composed.returns.release(DEVICE, full.get(1), null, DONE, null);
        assertThat(waiting).succeedsWithin(Duration.ofSeconds(20));

        Block another = composed.block(MemoryLocation.HOST, 4096);
        breakOn.add(another);
        assertThatThrownBy(() -> composed.returns.release(MemoryLocation.HOST, another, null, DONE, null)).isInstanceOf(AssertionError.class)
                .hasMessage("an adaptor's assertion");
        assertThat(composed.gate.awaitCalls(System.nanoTime())).isTrue();
    }
}
