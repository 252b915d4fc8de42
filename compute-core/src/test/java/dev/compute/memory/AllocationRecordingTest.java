package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.tuple;

import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import dev.compute.memory.recording.TraceEvent;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Recording allocations through the manager: what the chains see, mirrors included, and when it cannot start. */
class AllocationRecordingTest {

    private static UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO);
    }

    @Test
    void aTraceHoldsEveryLocationsAllocationsAndFreesMirrorsIncluded() {
        try (UnifiedMemoryManager manager = builder().build()) {
            UnifiedBuffer earlier = manager.allocate(2048, MemoryLocation.HOST);
            manager.startRecording(RecordingOptions.defaults());
            assertThat(manager.isRecording()).isTrue();
            try (UnifiedBuffer device = manager.allocate(DataType.FLOAT32, 1000, MemoryLocation.DEVICE)) {
                device.hostView(); // the host mirror: an allocation at PINNED, where pinning is on
            }
            earlier.close();
            AllocationTrace trace = manager.stopRecording();

            assertThat(manager.isRecording()).isFalse();
            assertThat(trace.events()).extracting(TraceEvent::kind, TraceEvent::bytes, TraceEvent::location, TraceEvent::earlierBlock)
                    .containsExactly(
                            tuple(TraceEvent.Kind.ALLOCATION, 4000L, MemoryLocation.DEVICE, false),
                            tuple(TraceEvent.Kind.ALLOCATION, 4000L, MemoryLocation.PINNED, false),
                            tuple(TraceEvent.Kind.FREE, 4000L, MemoryLocation.DEVICE, false),
                            tuple(TraceEvent.Kind.FREE, 4000L, MemoryLocation.PINNED, false),
                            tuple(TraceEvent.Kind.FREE, 2048L, MemoryLocation.HOST, true));
            assertThat(trace.earlierBlockFrees()).isEqualTo(1);
            assertThat(trace.lines()).anySatisfy(line -> assertThat(line).startsWith("# recorded with: ManagerSettings[name=default, backend=simulated")
                    .contains("maxPoolSize=" + UnifiedMemoryManagerBuilder.DEFAULT_MAX_POOL_SIZE));
        }
    }

    /** The README's promise for a recording the manager's close finds under way: kept, returned, the buffers left live. */
    @Test
    void aRecordingAcrossTheManagersCloseIsKeptUntilStoppedWithTheBuffersItLeftLive() {
        UnifiedMemoryManager manager = builder().closeTimeout(Duration.ofMillis(200)).build();
        manager.startRecording(RecordingOptions.defaults());
        manager.allocate(4096, MemoryLocation.HOST); // left open: the close frees it with its pool
        manager.close();

        assertThat(manager.isRecording()).isTrue();
        AllocationTrace trace = manager.stopRecording();
        assertThat(manager.isRecording()).isFalse();
        assertThat(trace.events()).extracting(TraceEvent::kind, TraceEvent::bytes).containsExactly(tuple(TraceEvent.Kind.ALLOCATION, 4096L));
        assertThatThrownBy(() -> manager.startRecording(RecordingOptions.defaults())).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aBatchIsRecordedBufferByBuffer() {
        try (UnifiedMemoryManager manager = builder().build()) {
            manager.startRecording(RecordingOptions.defaults());
            manager.allocateBatch(DataType.INT8, new long[] {100, 200, 300}, MemoryLocation.HOST).forEach(UnifiedBuffer::close);
            AllocationTrace trace = manager.stopRecording();

            assertThat(trace.events()).filteredOn(e -> e.kind() == TraceEvent.Kind.ALLOCATION).extracting(TraceEvent::bytes)
                    .containsExactly(100L, 200L, 300L);
            assertThat(trace.frees()).isEqualTo(3);
        }
    }

    /**
     * A request that waits for memory is served later on the waiters' thread, when another thread frees some: its
     * call site in the trace, and its allocation site for leak detection, are still where it was asked for, not the
     * frames of the thread that happened to serve it.
     */
    @Test
    void aRequestServedAfterAWaitCarriesTheSiteThatAskedForIt() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64L << 20).compactOnOutOfMemory(false)
                .leakDetection(LeakDetectionLevel.PARANOID).build()) {
            UnifiedBuffer filling = manager.allocate(48L << 20, MemoryLocation.DEVICE);
            manager.startRecording(new RecordingOptions(100, 4));
            CompletableFuture<UnifiedBuffer> waiting = askWhileFull(manager);
            servedOnceAnotherThreadFrees(manager, filling, waiting);
        }
    }

    /**
     * An out-of-memory handler that allocates while a waiting request is tried on the waiters' thread: its buffer was
     * asked for by the handler, not by the waiting request, and carries the handler's own site.
     */
    @Test
    void aHandlerAllocatingWhileAWaitingRequestIsTriedHasItsOwnSite() throws Exception {
        Map<String, UnifiedBuffer> byHandlerThread = new ConcurrentHashMap<>();
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        String mainThread = Thread.currentThread().getName();
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64L << 20).compactOnOutOfMemory(false)
                .leakDetection(LeakDetectionLevel.PARANOID).outOfMemoryHandler((location, bytes, attempt, failure) -> {
                    byHandlerThread.computeIfAbsent(Thread.currentThread().getName(), thread -> self.get().allocate(thread.equals(mainThread) ? 1024 : 2048, MemoryLocation.HOST));
                    return false;
                }).build()) {
            self.set(manager);
            UnifiedBuffer staying = manager.allocate(40L << 20, MemoryLocation.DEVICE);
            UnifiedBuffer going = manager.allocate(20L << 20, MemoryLocation.DEVICE);
            CompletableFuture<UnifiedBuffer> waiting = askWhileFull(manager);
            going.close(); // not room enough: the request is tried again on the waiters' thread, and fails there
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (byHandlerThread.keySet().stream().allMatch(mainThread::equals) && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertThat(byHandlerThread.keySet()).as("the handler ran on the waiters' thread").anyMatch(thread -> !thread.equals(mainThread));

            assertThat(manager.liveBuffers()).filteredOn(buffer -> buffer.sizeBytes() == 2048).singleElement()
                    .extracting(LiveBufferReport::allocationSite).asString().isNotEmpty().doesNotContain("askWhileFull");
            waiting.cancel(false);
            staying.close();
            byHandlerThread.values().forEach(UnifiedBuffer::close);
        }
    }

    /** The same where the wait is for a budget's room: let in once another thread frees, on a thread of the budget's. */
    @Test
    void aBudgetRequestLetInAfterAWaitCarriesTheSiteThatAskedForIt() throws Exception {
        try (UnifiedMemoryManager manager = builder().leakDetection(LeakDetectionLevel.PARANOID).build();
             MemoryBudget budget = manager.budget("tenant", 64L << 20)) {
            UnifiedBuffer filling = budget.allocate(48L << 20, MemoryLocation.DEVICE);
            manager.startRecording(new RecordingOptions(100, 4));
            CompletableFuture<UnifiedBuffer> waiting = askWhileFull(budget);
            servedOnceAnotherThreadFrees(manager, filling, waiting);
        }
    }

    /**
     * Frees {@code filling} on another thread; {@code waiting}, served then on a thread of the library's, carries the
     * site of the code that asked for it, in its leak site and in the trace's call site.
     */
    private static void servedOnceAnotherThreadFrees(UnifiedMemoryManager manager, UnifiedBuffer filling,
                                                     CompletableFuture<UnifiedBuffer> waiting) throws Exception {
        assertThat(waiting).isNotDone();
        Thread.ofPlatform().name("freeing").start(filling::close).join();
        try (UnifiedBuffer served = waiting.get(10, TimeUnit.SECONDS)) {
            assertThat(manager.liveBuffers()).singleElement().extracting(LiveBufferReport::allocationSite).asString()
                    .contains("askWhileFull");
        }
        AllocationTrace trace = manager.stopRecording();

        assertThat(trace.events()).filteredOn(e -> e.kind() == TraceEvent.Kind.ALLOCATION).singleElement()
                .extracting(TraceEvent::callSite).asString().startsWith(AllocationRecordingTest.class.getName() + ".askWhileFull(");
    }

    private static CompletableFuture<UnifiedBuffer> askWhileFull(MemoryBudget budget) {
        return budget.allocateAsync(48L << 20, MemoryLocation.DEVICE, Duration.ofSeconds(10));
    }

    private static CompletableFuture<UnifiedBuffer> askWhileFull(UnifiedMemoryManager manager) {
        return manager.allocateAsync(48L << 20, MemoryLocation.DEVICE, Duration.ofSeconds(10));
    }

    @Test
    void withRecordingOffTheChainsHaveNoRecorderAndStartingSaysWhy() {
        try (UnifiedMemoryManager manager = builder().allocationRecording(false).build()) {
            assertThat(manager.settings().allocationRecording()).isFalse();
            assertThatThrownBy(() -> manager.startRecording(RecordingOptions.defaults())).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("compute.memory.recording.enabled=false");
            assertThatThrownBy(manager::stopRecording).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("compute.memory.recording.enabled=false");
            assertThat(manager.isRecording()).isFalse();
            manager.allocate(4096).close();
        }
    }

    @Test
    void noOptionsIsRefusedNamingThemAndStartsNothing() {
        try (UnifiedMemoryManager manager = builder().build()) {
            assertThatThrownBy(() -> manager.startRecording(null)).isInstanceOf(NullPointerException.class).hasMessage("options");
            assertThat(manager.isRecording()).isFalse();
        }
    }

    @Test
    void aClosedManagerStartsNoRecordingButGivesBackTheOneUnderWay() {
        UnifiedMemoryManager manager = builder().build();
        assertThat(manager.settings().allocationRecording()).as("on by default").isTrue();
        manager.startRecording(RecordingOptions.defaults());
        manager.allocate(4096, MemoryLocation.HOST).close();
        manager.close();

        assertThat(manager.stopRecording().allocations()).isEqualTo(1);
        assertThatThrownBy(() -> manager.startRecording(RecordingOptions.defaults())).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
    }
}
