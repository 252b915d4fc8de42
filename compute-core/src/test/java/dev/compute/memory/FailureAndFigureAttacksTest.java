package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ForwardingResource;
import dev.compute.memory.testing.ManagerInvariants;
import dev.compute.memory.spi.FileMappings;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import org.assertj.core.api.SoftAssertions;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Attacks from the public API on the promises about the application's code and the figures: user code that throws
 * (even from its {@code toString()}, even the failure it was handed), a close started inside a call, budgets and
 * statistics read while buffers come and go, the registry of mapped files under churn. Each was a finding of an
 * adversarial pass.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FailureAndFigureAttacksTest {

    private static final long MiB = 1L << 20;
    private static final long BLOCK = 16 * MiB;
    private static final Duration LONG = Duration.ofSeconds(20);
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private static UnifiedMemoryManagerBuilder fourBlocks() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).maxPoolSize(4 * BLOCK)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO);
    }

    // ---- an adaptor's free that throws after giving the block back -----------------------------------------------

    /**
     * The adaptor gives the block back, then throws (an assertion in a test's adaptor, a metrics call that fails): the
     * manager treats the memory as back (it wakes the waiters, whom the pool then serves from it), but the statistics
     * count the free as undone. The buffer is counted for ever, and the waiter's buffer on top of it: more than the cap.
     */
    @Test
    void anAdaptorWhoseFreeThrowsAfterGivingTheBlockBackLeavesTheFiguresRight() throws Exception {
        AtomicInteger frees = new AtomicInteger();
        try (UnifiedMemoryManager manager = fourBlocks().resourceAdaptor((upstream, location) -> new ForwardingResource(upstream) {
            @Override
            public void deallocate(Block block, CompletableFuture<?> inFlight) {
                upstream.deallocate(block, inFlight);
                if (frees.incrementAndGet() == 1) {
                    throw new AssertionError("the adaptor's free fails after giving the block back");
                }
            }
        }).build()) {
            List<UnifiedBuffer> held = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                held.add(manager.allocate(BLOCK, DEVICE));
            }
            CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(BLOCK, DEVICE, LONG);

            assertThatThrownBy(held.removeFirst()::close).isInstanceOf(AssertionError.class);
            UnifiedBuffer served = waiting.get(LONG.toSeconds(), TimeUnit.SECONDS);

            MemoryStatistics during = manager.statistics(DEVICE);
            served.close();
            held.forEach(UnifiedBuffer::close);
            MemoryStatistics after = manager.statistics(DEVICE);
            SoftAssertions.assertSoftly(soft -> {
                soft.assertThat(during.allocatedBytesPeak()).as("the peak under a cap of four blocks").isLessThanOrEqualTo(4 * BLOCK);
                soft.assertThat(during.liveBuffers()).as("four buffers are open").isEqualTo(4);
                soft.assertThat(after.allocatedBytes()).as("nothing is open").isZero();
                soft.assertThat(after.liveBuffers()).as("nothing is open").isZero();
            });
            ManagerInvariants.checkQuiescent(manager);
        }
    }

    // ---- user code the guards themselves call --------------------------------------------------------------------

    /**
     * A handler that gives up by rethrowing the failure it was handed (a natural way to say "no"): the resource adds
     * the handler's exception to that failure as suppressed, which for the same object is {@code Throwable}'s
     * "Self-suppression not permitted". The caller gets a raw {@link IllegalArgumentException}, and
     * {@code tryAllocate}, which promises an empty result when memory runs out, throws it.
     */
    @Test
    void anOutOfMemoryHandlerThatRethrowsTheFailureItWasGivenFailsAsOutOfMemory() {
        OutOfMemoryHandler rethrowing = (location, bytes, attempt, failure) -> {
            throw failure;
        };
        try (UnifiedMemoryManager manager = fourBlocks().outOfMemoryHandler(rethrowing).build()) {
            List<UnifiedBuffer> held = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                held.add(manager.allocate(BLOCK, DEVICE));
            }
            assertThatThrownBy(() -> manager.allocate(BLOCK, DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(manager.tryAllocate(BLOCK, DEVICE)).as("out of memory, as tryAllocate says it").isEmpty();
            held.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * The listener guard logs a listener that threw by concatenating the listener into the message, which calls its
     * {@code toString()}: a listener whose {@code toString()} throws too (a proxy of a closed context, a class that
     * prints state it no longer has) takes its exception past the guard, out of the pool in the middle of an allocation.
     */
    @Test
    void aListenerWhoseToStringThrowsIsStillGuarded() {
        MemoryEventListener failing = new MemoryEventListener() {
            @Override
            public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                throw new AssertionError("allocated");
            }

            @Override
            public String toString() {
                throw new IllegalStateException("no description of this listener any more");
            }
        };
        try (UnifiedMemoryManager manager = fourBlocks().eventListener(failing).build()) {
            UnifiedBuffer buffer = manager.allocate(BLOCK, DEVICE);
            buffer.close();
            ManagerInvariants.checkQuiescent(manager);
        }
    }

    /**
     * An out-of-memory handler that shuts the application down (a Spring handler bean that closes the context, and
     * with it the manager) on the allocating thread: the close waits for the calls under way, its own thread's among
     * them, so it waits out the whole close timeout and then keeps every pool's memory ("calls were still under way")
     * for the life of the process. A close from inside a call of its own thread must not wait for that call.
     */
    @Test
    void anOutOfMemoryHandlerThatClosesTheManagerClosesItPromptlyAndFreesItsMemory() {
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        OutOfMemoryHandler shuttingDown = (location, bytes, attempt, failure) -> {
            self.get().close();
            return false;
        };
        UnifiedMemoryManager manager = fourBlocks().closeTimeout(Duration.ofSeconds(5)).outOfMemoryHandler(shuttingDown).build();
        self.set(manager);
        for (int i = 0; i < 4; i++) {
            manager.allocate(BLOCK, DEVICE);
        }
        long start = System.nanoTime();
        assertThatThrownBy(() -> manager.allocate(BLOCK, DEVICE)).isInstanceOf(RuntimeException.class);
        Duration took = Duration.ofNanos(System.nanoTime() - start);

        assertThat(manager.isClosed()).isTrue();
        assertThat(took).as("the allocation whose handler closed the manager").isLessThan(Duration.ofSeconds(2));
        assertThat(manager.statistics(DEVICE).reservedBytes()).as("the pools' memory, once the call that closed them ended").isZero();
    }

    /**
     * An out-of-memory handler that closes the manager and asks for a retry is asked again on the retry's failure, and
     * closes again: that second close, inside the same call, waited for the first, which waits for that call to end.
     * The allocation returned only after two close timeouts (10 s of a 5 s timeout), and the first close, its timeout
     * spent on the call, kept every pool's memory for the life of the process ("calls were still under way").
     */
    @Test
    void anOutOfMemoryHandlerThatClosesTheManagerOnEachRetryClosesItPromptlyAndFreesItsMemory() {
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        AtomicInteger asked = new AtomicInteger();
        OutOfMemoryHandler closingAndRetrying = (location, bytes, attempt, failure) -> {
            asked.incrementAndGet();
            self.get().close();
            return true;
        };
        UnifiedMemoryManager manager = fourBlocks().compactOnOutOfMemory(false).closeTimeout(Duration.ofSeconds(5))
                .outOfMemoryRetries(3).outOfMemoryHandler(closingAndRetrying).build();
        self.set(manager);
        for (int i = 0; i < 4; i++) {
            manager.allocate(BLOCK, DEVICE);
        }
        long start = System.nanoTime();
        assertThatThrownBy(() -> manager.allocate(BLOCK, DEVICE)).isInstanceOf(IllegalStateException.class);
        Duration took = Duration.ofNanos(System.nanoTime() - start);

        assertThat(asked).as("the handler, asked on each retry").hasValue(3);
        assertThat(took).as("the allocation whose handler closed the manager three times").isLessThan(Duration.ofSeconds(2));
        assertThat(manager.statistics(DEVICE).reservedBytes()).as("the pools' memory, once the call that closed them ended").isZero();
    }

    /**
     * The host mirror a device buffer's first host view allocates meets an out-of-memory whose handler closes the
     * manager and asks for a retry: the view failed with a DeviceOutOfMemoryException naming the pool's figures, as
     * the manager's own allocations did before they said the manager was closed. It fails as theirs do now.
     */
    @Test
    void aMirrorWhoseOutOfMemoryRecoveryClosesTheManagerFailsAsClosedNotOutOfMemory() {
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        UnifiedMemoryManager manager = fourBlocks().pinningEnabled(false).compactOnOutOfMemory(false)
                .outOfMemoryHandler((location, bytes, attempt, failure) -> {
                    self.get().close();
                    return true;
                }).build();
        self.set(manager);
        UnifiedBuffer onDevice = manager.allocate(BLOCK, DEVICE);
        for (int i = 0; i < 4; i++) {
            manager.allocate(BLOCK, MemoryLocation.HOST);
        }

        assertThatThrownBy(onDevice::hostView).isInstanceOf(IllegalStateException.class).hasMessageContaining("UnifiedMemoryManager is closed")
                .hasCauseInstanceOf(DeviceOutOfMemoryException.class);
        assertThat(manager.isClosed()).isTrue();
    }

    /**
     * An out-of-memory handler that closes the manager and asks for a retry (compaction off), or a listener that closes
     * it as the compaction an out-of-memory starts reports: the allocation then failed with a DeviceOutOfMemoryException
     * that named the pool's figures, as if memory were short, where the manager was closed under it; so did a budget's
     * allocation and a batch. Each now fails with the closed manager's IllegalStateException, the out-of-memory its cause.
     */
    @Test
    void anAllocationWhoseOutOfMemoryRecoveryClosesTheManagerFailsAsClosedNotOutOfMemory() {
        List<String> failures = new ArrayList<>();
        for (int way = 0; way < 6; way++) {
            AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
            UnifiedMemoryManagerBuilder builder = fourBlocks();
            if (way % 2 == 0) {
                builder.compactOnOutOfMemory(false).outOfMemoryHandler((location, bytes, attempt, failure) -> {
                    self.get().close();
                    return true;
                });
            } else {
                builder.eventListener(new MemoryEventListener() {
                    @Override
                    public void compacted(CompactionReport report) {
                        self.get().close();
                    }
                });
            }
            UnifiedMemoryManager manager = builder.build();
            self.set(manager);
            MemoryBudget budget = manager.budget("tenant", 8 * BLOCK);
            for (int i = 0; i < 4; i++) {
                manager.allocate(BLOCK, DEVICE);
            }
            Runnable allocation = switch (way / 2) {
                case 0 -> () -> manager.allocate(BLOCK, DEVICE);
                case 1 -> () -> budget.allocate(BLOCK, DEVICE);
                default -> () -> manager.allocateBatch(DataType.INT8, new long[] {BLOCK, BLOCK}, DEVICE);
            };
            try {
                allocation.run();
                failures.add("way " + way + ": allocated");
            } catch (RuntimeException e) {
                if (!(e instanceof IllegalStateException) || !e.getMessage().contains("UnifiedMemoryManager") || !(e.getCause() instanceof DeviceOutOfMemoryException)) {
                    failures.add("way " + way + ": " + e);
                }
            }
            assertThat(manager.isClosed()).isTrue();
        }
        assertThat(failures).isEmpty();
    }

    /**
     * {@code close()} fails every waiting request at once, on the closing thread, so a function added to such a future
     * without {@code Async} runs inside the close; one that closes the manager too (a service that shuts down when it
     * can get no memory) is a second close on the closing thread, which waited for the first to be done: for ever, the
     * first being the close it was inside of. The pools' memory was never freed nor the backend closed.
     */
    @Test
    void aWaitingRequestsFunctionThatClosesTheManagerDoesNotHangTheClose() throws Exception {
        UnifiedMemoryManager manager = fourBlocks().build();
        for (int i = 0; i < 4; i++) {
            manager.allocate(BLOCK, DEVICE);
        }
        CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(BLOCK, DEVICE, LONG);
        waiting.whenComplete((buffer, failure) -> manager.close());

        Thread closing = Thread.ofPlatform().daemon().name("closing").start(manager::close);

        assertThat(closing.join(Duration.ofSeconds(10))).as("the close whose waiter's function closed the manager again returned").isTrue();
        assertThat(waiting).isCompletedExceptionally();
        assertThat(manager.statistics(DEVICE).reservedBytes()).as("the pools' memory, freed by the close").isZero();
    }

    /**
     * A service that shuts down when a request's wait for memory times out closes the manager in a function of its
     * future, which runs on the manager's timer thread. The close stopped that timer as a pool stopped with
     * {@code shutdownNow()}: interrupting its thread, the very thread closing, whose function then went on interrupted
     * (the rest of a shutdown, whose next blocking wait fails at once).
     */
    @Test
    void aTimedOutRequestsFunctionThatClosesTheManagerIsNotLeftInterrupted() throws Exception {
        // the timeout is told to listeners before the future fails: held there until the function is added, else on a
        // slow machine the request could time out first and the function run on this thread as it is added
        CountDownLatch functionAdded = new CountDownLatch(1);
        UnifiedMemoryManager manager = fourBlocks().eventListener(new MemoryEventListener() {
            @Override
            public void allocationFailed(MemoryLocation location, long bytes, OutOfMemoryReason reason) {
                try {
                    functionAdded.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }).build();
        List<UnifiedBuffer> held = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            held.add(manager.allocate(BLOCK, DEVICE));
        }
        CompletableFuture<String> interruptedAfterClose = new CompletableFuture<>();
        manager.allocateAsync(BLOCK, DEVICE, Duration.ofMillis(200)).whenComplete((buffer, failure) -> {
            held.forEach(UnifiedBuffer::close);
            manager.close();
            interruptedAfterClose.complete(Thread.currentThread().getName() + " interrupted: " + Thread.interrupted());
        });
        functionAdded.countDown();

        assertThat(interruptedAfterClose.get(10, TimeUnit.SECONDS)).startsWith("compute-memory-waiters-").endsWith("interrupted: false");
        assertThat(manager.statistics(DEVICE).reservedBytes()).as("the pools' memory, freed by the close").isZero();
    }

    /**
     * A listener that allocates when it hears of a failure (a fallback, a smaller try) at the same location: its own
     * allocation fails too and is told to it again, inside itself, until the thread's stack overflows (635 levels
     * here, each running the pool's recovery and a compaction), the {@link StackOverflowError} thrown at whatever point
     * of the manager it struck. An allocation from inside a listener is refused, as the listener's contract says.
     */
    @Test
    void aListenerThatAllocatesWhenAnAllocationFailsIsNotReenteredWithoutEnd() {
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        AtomicInteger told = new AtomicInteger();
        List<Throwable> refused = new ArrayList<>();
        UnifiedMemoryManager manager = fourBlocks().eventListener(new MemoryEventListener() {
            @Override
            public void allocationFailed(MemoryLocation location, long bytes, OutOfMemoryReason reason) {
                told.incrementAndGet();
                try {
                    self.get().tryAllocate(bytes, location).ifPresent(UnifiedBuffer::close);
                } catch (RuntimeException e) {
                    refused.add(e);
                }
            }
        }).build();
        self.set(manager);
        List<UnifiedBuffer> held = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            held.add(manager.allocate(BLOCK, DEVICE));
        }

        assertThat(manager.tryAllocate(BLOCK, DEVICE)).isEmpty();

        assertThat(told).as("the listener, told of the failure once").hasValue(1);
        assertThat(refused).singleElement().isInstanceOf(IllegalStateException.class)
                .satisfies(e -> assertThat(e).hasMessageContaining("from within a MemoryEventListener"));
        held.forEach(UnifiedBuffer::close);
        assertThat(manager.liveBuffers()).isEmpty();
        assertThat(manager.statistics(DEVICE).allocatedBytes()).isZero();
        manager.close();
    }

    /**
     * A listener that reads a snapshot when told a snapshot was read (to keep the latest memory map, say) was told of
     * its own read, inside itself, until the thread's stack overflowed (some 670 levels). The read a listener makes is
     * told to no listener.
     */
    @Test
    void aListenerThatReadsASnapshotWhenToldOfOneIsNotReenteredWithoutEnd() {
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        AtomicInteger told = new AtomicInteger();
        List<MemorySnapshot> readByTheListener = new ArrayList<>();
        try (UnifiedMemoryManager manager = fourBlocks().eventListener(new MemoryEventListener() {
            @Override
            public void snapshotRead(MemoryLocation location, int blocks, int holds, long longestHoldNanos, long nanos) {
                told.incrementAndGet();
                readByTheListener.add(self.get().snapshot(location));
            }
        }).build()) {
            self.set(manager);
            try (UnifiedBuffer held = manager.allocate(BLOCK, DEVICE)) {
                MemorySnapshot read = manager.snapshot(DEVICE);

                assertThat(told).as("the listener, told of the read once").hasValue(1);
                assertThat(readByTheListener).singleElement().isEqualTo(read);
            }
        }
    }

    /**
     * Listeners of backend calls are told under the pool's lock. One that allocates at another location (the same one
     * is refused) takes that pool's lock while holding its own: two threads doing so the other way round, one from a
     * DEVICE backend call and one from a HOST one, each waited for the other's lock for ever.
     */
    @Test
    void listenersOfBackendCallsThatAllocateAtAnotherLocationDoNotDeadlock() throws Exception {
        List<Throwable> refused = new java.util.concurrent.CopyOnWriteArrayList<>();
        UnifiedMemoryManager manager = listenersMeetingUnderTheirPoolsLocks((self, other) -> {
            try {
                self.allocate(BLOCK, other).close();
            } catch (RuntimeException e) {
                refused.add(e);
            }
        });
        assertThat(refused).hasSize(2).allSatisfy(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("from within a MemoryEventListener"));
        assertThat(manager.liveBuffers()).isEmpty();
        manager.close();
    }

    /**
     * Reading the figures is what a metrics listener does: one told of a DEVICE backend call under that pool's lock
     * reads every location's statistics, whose largest free block takes each pool's lock in turn; one told of a HOST
     * backend call on another thread does the same the other way round.
     */
    @Test
    void listenersOfBackendCallsThatReadEveryLocationsFiguresDoNotDeadlock() throws Exception {
        List<MemoryStatistics> read = new java.util.concurrent.CopyOnWriteArrayList<>();
        UnifiedMemoryManager manager = listenersMeetingUnderTheirPoolsLocks((self, other) -> read.addAll(self.statistics().values()));
        assertThat(read).hasSize(2 * manager.locations().size());
        manager.close();
    }

    /**
     * As above with a snapshot of the other location: its blocks cannot be read without that pool's lock, so the
     * listeners may not both wait for ever. Each read waits a bounded time and, where the other's lock stayed taken,
     * fails (a listener's failure is logged): both allocations return.
     */
    @Test
    void listenersOfBackendCallsThatSnapshotTheOtherLocationDoNotDeadlock() throws Exception {
        List<String> outcomes = new java.util.concurrent.CopyOnWriteArrayList<>();
        UnifiedMemoryManager manager = listenersMeetingUnderTheirPoolsLocks((self, other) -> {
            try {
                self.snapshot(other);
                outcomes.add("read");
            } catch (IllegalStateException busy) {
                outcomes.add(busy.getMessage().contains("read snapshots outside listeners") ? "busy" : busy.getMessage());
            }
        });
        assertThat(outcomes).hasSize(2).contains("busy").allMatch(outcome -> outcome.equals("busy") || outcome.equals("read"));
        manager.close();
    }

    /**
     * A DEVICE and a HOST allocation on two threads whose listeners, told of the backend call under their pool's lock,
     * wait for each other there and then {@code read} (given the manager and the other location); asserts both
     * allocations returned, and gives the manager back to close.
     */
    private UnifiedMemoryManager listenersMeetingUnderTheirPoolsLocks(BiConsumer<UnifiedMemoryManager, MemoryLocation> read)
            throws InterruptedException {
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        CountDownLatch inDevice = new CountDownLatch(1);
        CountDownLatch inHost = new CountDownLatch(1);
        UnifiedMemoryManager manager = fourBlocks().eventListener(new MemoryEventListener() {
            @Override
            public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                if (!Thread.currentThread().getName().startsWith("allocating-")) {
                    return;
                }
                boolean device = location == DEVICE;
                (device ? inDevice : inHost).countDown();
                await(device ? inHost : inDevice); // both threads under their pool's lock
                read.accept(self.get(), device ? MemoryLocation.HOST : DEVICE);
            }
        }).build();
        self.set(manager);
        Thread toDevice = Thread.ofPlatform().daemon().name("allocating-device").start(() -> manager.allocate(BLOCK, DEVICE).close());
        Thread toHost = Thread.ofPlatform().daemon().name("allocating-host").start(() -> manager.allocate(BLOCK, MemoryLocation.HOST).close());
        assertThat(toDevice.join(Duration.ofSeconds(10))).as("the DEVICE allocation returned").isTrue();
        assertThat(toHost.join(Duration.ofSeconds(10))).as("the HOST allocation returned").isTrue();
        return manager;
    }

    // ---- the registry of mappings --------------------------------------------------------------------------------

    /**
     * Two threads mapping and closing files of one size: the system hands a new mapping the addresses an unmap has
     * just given back. {@code MappedFile.unmap} closes the arena (the unmap) and only then unregisters by address, so
     * an unmap that loses the processor between the two removes the other thread's new registration: a live mapping
     * whose views no backend knows as a mapping any more (OpenCL and CUDA hand them to the driver, whose read of a
     * truncated file ends the process).
     */
    @Test
    void everyLiveMappingStaysKnownWhileOthersAreUnmapped(@TempDir Path dir) throws Exception {
        int threads = 4;
        List<Path> files = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            files.add(Files.write(dir.resolve("file-" + t + ".bin"), new byte[1 << 16]));
        }
        AtomicInteger unknown = new AtomicInteger();
        AtomicInteger checked = new AtomicInteger();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        try (UnifiedMemoryManager manager = fourBlocks().leakDetection(LeakDetectionLevel.DISABLED).build()) {
            long end = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                Path file = files.get(t);
                workers.add(Thread.ofPlatform().start(() -> {
                    try {
                        while (System.nanoTime() < end && unknown.get() == 0) {
                            try (UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY)) {
                                MemorySegment view = mapped.readOnlyHostView();
                                for (int spin = 0; spin < 200; spin++) {
                                    Thread.onSpinWait();
                                }
                                checked.incrementAndGet();
                                if (!FileMappings.isOverMapping(view)) {
                                    unknown.incrementAndGet();
                                }
                            }
                            manager.allocate(64, MemoryLocation.HOST).close(); // a call in ends this thread's views
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            for (Thread worker : workers) {
                worker.join(30_000);
            }
        }
        assertThat(failure.get()).isNull();
        assertThat(unknown.get()).as("views of live mappings not known as over a mapping, of %d checked", checked.get()).isZero();
    }

    /**
     * The root of the race above, step by step through the registry: a file is unmapped, the system maps another one
     * at the same addresses and the manager registers it, then the first unmap's {@code unregister} runs, keyed by
     * address alone, and takes the new mapping's entry away.
     */
    @Test
    void unregisteringAnUnmappedFileLeavesTheMappingNowAtItsAddressKnown(@TempDir Path dir) throws Exception {
        Path first = Files.write(dir.resolve("first.bin"), new byte[8192]);
        Path second = Files.write(dir.resolve("second.bin"), new byte[8192]);
        try (Arena arena = Arena.ofConfined()) {
            long address = arena.allocate(8192, 4096).address(); // the addresses the system hands out twice
            MemorySegment unmapped = MemorySegment.ofAddress(address).reinterpret(8192);
            MemorySegment mappedNow = MemorySegment.ofAddress(address).reinterpret(8192);
            FileMappings.Mapping firstMapping = FileMappings.register(unmapped, first, 0);
            // MappedFile.unmap: the arena closed (the unmap) ... another thread maps second.bin there and registers it ...
            FileMappings.Mapping secondMapping = FileMappings.register(mappedNow, second, 0);
            FileMappings.unregister(firstMapping); // ... and the first unmap unregisters
            try {
                assertThat(FileMappings.find(mappedNow.asSlice(100, 10))).as("the live mapping of second.bin").isNotNull()
                        .satisfies(found -> assertThat(found.file()).isEqualTo(second));
            } finally {
                FileMappings.unregister(secondMapping);
            }
        }
    }

    /**
     * A batch that fails part way gives back the blocks it took with {@code blocks.forEach(chain.entry::deallocate)}
     * ({@code PooledMemoryManager.allocateEach}, also {@code checkedBatch} and the {@code RuntimeException | Error}
     * branch): an adaptor whose free throws once (as in UserCodeFailuresTest's adaptor) stops the loop at the first block,
     * and every block after it stays LIVE in the pool with no buffer for ever; the batch fails with the adaptor's
     * error instead of its out-of-memory. The release path was made to go on past a failing free; this one was not.
     */
    @Test
    void aBatchThatFailsGivesBackEveryBlockItTookEvenIfAFreeThrows() {
        AtomicInteger frees = new AtomicInteger();
        try (UnifiedMemoryManager manager = fourBlocks().resourceAdaptor((upstream, location) -> new ForwardingResource(upstream) {
            @Override
            public @Nullable List<Block> allocateAdjacent(long[] bytes) {
                return null; // one by one
            }

            @Override
            public void deallocate(Block block, CompletableFuture<?> inFlight) {
                upstream.deallocate(block, inFlight);
                if (frees.incrementAndGet() == 1) {
                    throw new AssertionError("the adaptor's free fails after giving the block back");
                }
            }
        }).build()) {
            UnifiedBuffer held = manager.allocate(BLOCK, DEVICE);

            assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {BLOCK, BLOCK, BLOCK, BLOCK}, DEVICE))
                    .as("the batch's own failure, the adaptor's error added to it").isInstanceOf(DeviceOutOfMemoryException.class);
            held.close();

            long liveBlocks = manager.snapshot(DEVICE).segments().stream().flatMap(segment -> segment.blocks().stream())
                    .filter(block -> block.state() == MemorySnapshot.BlockState.LIVE).count();
            assertThat(liveBlocks).as("blocks live in the pool with every buffer closed").isZero();
            List<UnifiedBuffer> whole = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                whole.add(manager.allocate(BLOCK, DEVICE));
            }
            whole.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A batch placed one by one gives back what it took when a later buffer fails, but only for a
     * {@code RuntimeException} or an {@code Error}: an out-of-memory handler in Kotlin (or with Lombok's
     * {@code @SneakyThrows}) that throws an {@code IOException} left the first buffer's block live in the pool with no
     * buffer, counted as a live buffer and allocated bytes for ever.
     */
    @Test
    void aBatchGivesBackWhatItTookWhenAHandlerThrowsACheckedException() {
        OutOfMemoryHandler kotlinHandler = (location, bytes, attempt, failure) -> {
            throw FailureAndFigureAttacksTest.<RuntimeException>sneak(new java.io.IOException("the cache to evict is on a closed disk"));
        };
        try (UnifiedMemoryManager manager = fourBlocks().outOfMemoryHandler(kotlinHandler).build()) {
            List<UnifiedBuffer> held = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                held.add(manager.allocate(BLOCK, DEVICE));
            }

            assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {BLOCK / 2, BLOCK}, DEVICE))
                    .isInstanceOf(java.io.IOException.class);
            MemoryStatistics figures = manager.statistics(DEVICE);
            assertThat(figures.liveBuffers()).as("the three buffers open").isEqualTo(3);
            assertThat(figures.allocatedBytes()).isEqualTo(3 * BLOCK);
            held.forEach(UnifiedBuffer::close);
            ManagerInvariants.checkQuiescent(manager);
        }
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> T sneak(Throwable checked) throws T {
        throw (T) checked; // what Kotlin, Groovy or Lombok's @SneakyThrows code throws where Java would not compile it
    }

    // ---- budgets: one buffer's bookkeeping in two steps ------------------------------------------------------------

    /**
     * Threads allocating and closing buffers of one size through a budget while another reads its figures: every
     * reading must be a state the budget was in, so its bytes are its live buffers times the size. A buffer is
     * registered as open (in the manager's call) before its bytes are counted (in {@code settle}), and unregistered
     * before they are taken off, each outside the budget's lock, and {@code statistics()} reads the open count outside
     * it too.
     */
    @Test
    void aBudgetsFiguresAlwaysDescribeOneState() throws Exception {
        long size = 64 << 10;
        try (UnifiedMemoryManager manager = fourBlocks().build(); MemoryBudget tenant = manager.budget("tenant", 64 * MiB)) {
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                workers.add(Thread.ofPlatform().start(() -> {
                    try {
                        while (!stop.get()) {
                            tenant.allocate(size, MemoryLocation.HOST).close();
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            List<BudgetStatistics> impossible = new ArrayList<>();
            long end = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            while (System.nanoTime() < end && impossible.size() < 5) {
                BudgetStatistics s = tenant.statistics();
                if (s.allocatedBytes() != s.liveBuffers() * size || s.allocatedBytes() < 0) {
                    impossible.add(s);
                }
            }
            stop.set(true);
            for (Thread worker : workers) {
                worker.join(10_000);
            }
            assertThat(failure.get()).isNull();
            assertThat(impossible).as("readings where the bytes are not the live buffers' (each buffer is %d bytes)", size).isEmpty();
        }
    }

    /**
     * A budget closed (a request scope ending) while an allocation through it is in the pool: the budget counts the
     * request as under way, not as allocated, so a reading as it closes is never negative; the allocation then finds
     * the budget closed, closes the buffer it got and fails, and nothing stays counted. (The same window against the
     * manager's close is {@code BudgetLedgerTest.aSettleRacingTheManagersCloseCountsNothing}.)
     */
    @Test
    void aBudgetClosedWhileAnAllocationIsUnderWayNeverReadsNegative() throws Exception {
        CountDownLatch inPool = new CountDownLatch(1);
        CountDownLatch goOn = new CountDownLatch(1);
        AtomicReference<Thread> allocating = new AtomicReference<>();
        MemoryEventListener pausing = new MemoryEventListener() {
            @Override
            public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                if (Thread.currentThread() == allocating.get()) {
                    inPool.countDown();
                    await(goOn);
                }
            }
        };
        try (UnifiedMemoryManager manager = fourBlocks().eventListener(pausing).build()) {
            MemoryBudget tenant = manager.budget("tenant", 64 * MiB);
            AtomicReference<Throwable> outcome = new AtomicReference<>();
            Thread thread = Thread.ofPlatform().unstarted(() -> {
                try {
                    tenant.allocate(BLOCK, DEVICE);
                } catch (Throwable e) {
                    outcome.set(e);
                }
            });
            allocating.set(thread);
            thread.start();
            assertThat(inPool.await(10, TimeUnit.SECONDS)).isTrue();

            tenant.close();
            BudgetStatistics whileClosing = tenant.statistics();
            goOn.countDown();
            thread.join(10_000);

            assertThat(outcome.get()).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed while the allocation was under way");
            assertThat(whileClosing.allocatedBytes()).as("allocated bytes, read as the budget closed").isZero();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            assertThat(manager.statistics(DEVICE).liveBuffers()).as("the buffer it got was closed").isZero();
        }
    }

    /**
     * A budget's buffer closed while device work on it is still in flight (a kernel of one's own recorded on its
     * access): its memory is not back (the pool keeps the block PENDING until the work ends), but the budget stops
     * counting it at the close and lends the tenant its limit again, so the tenant holds twice its limit of device
     * memory; the manager's figures likewise count the block as freed and cached ("ready for reuse") while it is not.
     * {@code PooledMemoryManager.release} told the budget and the statistics at once, not when {@code inFlight} completes.
     * The manager's figures say the buffer is closed (not live) and the memory held, not cached, until the work ends.
     */
    @Test
    void aBufferClosedWithDeviceWorkInFlightCountsUntilTheWorkEnds() {
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(backend).maxPoolSize(4 * BLOCK)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build();
             MemoryBudget tenant = manager.budget("tenant", BLOCK)) {
            CompletableFuture<Void> kernel = new CompletableFuture<>();
            UnifiedBuffer buffer = tenant.allocate(BLOCK, DEVICE);
            try (BufferAccess access = buffer.deviceAccess(AccessMode.WRITE)) {
                access.inFlightUntil(kernel);
            }
            buffer.close();

            BudgetStatistics budget = tenant.statistics();
            MemoryStatistics pool = manager.statistics(DEVICE);
            boolean lentAgain;
            try (UnifiedBuffer second = tenant.allocate(BLOCK, DEVICE)) {
                lentAgain = true;
            } catch (DeviceOutOfMemoryException refused) {
                lentAgain = false;
            }
            kernel.complete(null);
            boolean refused = !lentAgain;
            SoftAssertions.assertSoftly(soft -> {
                soft.assertThat(budget.allocatedBytes()).as("the budget, while the kernel runs on the closed buffer").isEqualTo(BLOCK);
                soft.assertThat(refused).as("a second buffer of the tenant's whole limit, while the first's memory is still in use")
                        .isTrue();
                soft.assertThat(pool.liveBuffers()).as("the manager's live buffers: the buffer is closed").isZero();
                soft.assertThat(pool.cachedBytes()).as("cached (ready for reuse), while the kernel runs").isZero();
                soft.assertThat(pool.reservedBytes()).as("what the kernel still uses stays reserved").isGreaterThanOrEqualTo(BLOCK);
            });
        }
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
