package dev.compute.memory.recording;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.tuple;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.MemoryResourceContract;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.channels.ClosedByInterruptException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The recording adaptor passes the shared contract while it records, and keeps what passed in one consistent order. */
class RecordingResourceTest extends MemoryResourceContract {

    @Override
    protected MemoryResource create(BackendResource upstream) {
        AllocationRecorder recorder = new AllocationRecorder();
        recorder.start(RecordingOptions.defaults(), "the contract");
        return new RecordingResource(upstream, MemoryLocation.DEVICE, recorder);
    }

    /** A recording adaptor over a pool of its own, for the tests below; the contract's resource stays unused. */
    private RecordingResource overPool(AllocationRecorder recorder, MemoryLocation location) {
        return new RecordingResource(new CachingPoolResource(backendResource(new AddressSpaceBackend(1L << 30)),
                PoolSettings.expandable(), MemoryEventListener.NONE), location, recorder);
    }

    @Test
    void eachAllocationAndFreeIsKeptWithWhatWasAskedItsThreadAndTime() {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.HOST)) {
            recorder.start(RecordingOptions.defaults(), "test");
            Block first = resource.allocate(1000);
            Block second = resource.allocate(3 * MiB + 1);
            resource.deallocate(first);
            Block third = resource.allocate(1000); // very likely the same Block object again: it gets an id of its own
            resource.deallocate(third);
            resource.deallocate(second);
            AllocationTrace trace = recorder.stop();

            assertThat(trace.events()).extracting(TraceEvent::kind, TraceEvent::id, TraceEvent::bytes).containsExactly(
                    tuple(TraceEvent.Kind.ALLOCATION, 1L, 1000L),
                    tuple(TraceEvent.Kind.ALLOCATION, 2L, 3 * MiB + 1),
                    tuple(TraceEvent.Kind.FREE, 1L, 1000L),
                    tuple(TraceEvent.Kind.ALLOCATION, 3L, 1000L),
                    tuple(TraceEvent.Kind.FREE, 3L, 1000L),
                    tuple(TraceEvent.Kind.FREE, 2L, 3 * MiB + 1));
            assertThat(trace.events()).allSatisfy(event -> {
                assertThat(event.location()).isEqualTo(MemoryLocation.HOST);
                assertThat(event.threadId()).isEqualTo(Thread.currentThread().threadId());
                assertThat(event.earlierBlock()).isFalse();
                assertThat(event.callSite()).as("none asked for").isNull();
            });
            assertThat(trace.events()).extracting(TraceEvent::nanos).isSorted();
            assertThat(trace.threadNames()).containsEntry(Thread.currentThread().threadId(), Thread.currentThread().getName());
            assertThat(trace.allocations()).isEqualTo(3);
            assertThat(trace.frees()).isEqualTo(3);
            assertThat(trace.truncated()).isFalse();
            assertThat(trace.events().get(1).line()).matches("a,2,3145729,0,HOST," + Thread.currentThread().threadId() + ",\\d+");
            assertThat(trace.events().get(2).line()).matches("f,1," + Thread.currentThread().threadId() + ",\\d+");
        }
    }

    @Test
    void aBatchPlacedTogetherIsRecordedBlockByBlock() {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.DEVICE)) {
            resource.deallocate(resource.allocate(MiB)); // memory for the batch to be placed in
            recorder.start(RecordingOptions.defaults(), "test");
            List<Block> batch = resource.allocateAdjacent(new long[] {1000, 2000});
            assertThat(batch).as("the pool placed them together").isNotNull().hasSize(2);
            batch.forEach(resource::deallocate);
            AllocationTrace trace = recorder.stop();

            assertThat(trace.events()).extracting(TraceEvent::kind, TraceEvent::bytes).containsExactly(
                    tuple(TraceEvent.Kind.ALLOCATION, 1000L), tuple(TraceEvent.Kind.ALLOCATION, 2000L),
                    tuple(TraceEvent.Kind.FREE, 1000L), tuple(TraceEvent.Kind.FREE, 2000L));
        }
    }

    @Test
    void aBlockAllocatedBeforeTheRecordingIsFreedUnderAnIdNoAllocationHas() {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.DEVICE)) {
            Block earlier = resource.allocate(4096);
            recorder.start(RecordingOptions.defaults(), "test");
            Block during = resource.allocate(512);
            resource.deallocate(earlier);
            resource.deallocate(during);
            AllocationTrace trace = recorder.stop();

            assertThat(trace.earlierBlockFrees()).isEqualTo(1);
            assertThat(trace.frees()).isEqualTo(2);
            TraceEvent free = trace.events().get(1);
            assertThat(free.kind()).isEqualTo(TraceEvent.Kind.FREE);
            assertThat(free.earlierBlock()).isTrue();
            assertThat(free.bytes()).isEqualTo(4096);
            assertThat(trace.events()).filteredOn(e -> e.kind() == TraceEvent.Kind.ALLOCATION).extracting(TraceEvent::id)
                    .doesNotContain(free.id());
            assertThat(trace.lines()).contains("# earlier-block-frees=1: frees of blocks allocated before the recording started;"
                    + " no allocation in this trace has their ids");
        }
    }

    @Test
    void aRecordingStopsTakingEventsAtItsBoundAndSaysItWasTruncated() {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.DEVICE)) {
            recorder.start(new RecordingOptions(5, 0), "test");
            for (int i = 0; i < 10; i++) {
                resource.deallocate(resource.allocate(4096));
            }
            assertThat(recorder.isRecording()).as("until stopped").isTrue();
            AllocationTrace trace = recorder.stop();

            assertThat(trace.events()).hasSize(5);
            assertThat(trace.truncated()).isTrue();
            assertThat(trace.allocations()).isEqualTo(3);
            assertThat(trace.frees()).isEqualTo(2);
            assertThat(trace.lines().filter(line -> line.startsWith("# started="))).singleElement().asString()
                    .contains("events=5").contains("max-events=5").contains("truncated=true");
        }
    }

    @Test
    void exactlyTheBoundIsNotTruncation() {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.DEVICE)) {
            recorder.start(new RecordingOptions(2, 0), "test");
            resource.deallocate(resource.allocate(4096));
            assertThat(recorder.stop().truncated()).isFalse();
        }
    }

    @Test
    void oneRecordingAtATimeAndStoppingNeedsOne() {
        AllocationRecorder recorder = new AllocationRecorder();
        assertThat(recorder.isRecording()).isFalse();
        assertThatThrownBy(recorder::stop).isInstanceOf(IllegalStateException.class).hasMessageContaining("no recording is under way");
        recorder.start(RecordingOptions.defaults(), "test");
        assertThatThrownBy(() -> recorder.start(RecordingOptions.defaults(), "again")).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("under way already");
        recorder.stop();
        assertThat(recorder.isRecording()).isFalse();
        recorder.start(RecordingOptions.defaults(), "a second one after the first stopped");
        assertThat(recorder.stop().events()).isEmpty();
    }

    @Test
    void eventsAfterTheStopAreNotRecordedAnywhere() {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.DEVICE)) {
            recorder.start(RecordingOptions.defaults(), "test");
            Block block = resource.allocate(4096);
            AllocationTrace trace = recorder.stop();
            resource.deallocate(block);
            resource.deallocate(resource.allocate(4096));

            assertThat(trace.events()).hasSize(1);
        }
    }

    @Test
    void optionsOutOfRangeAreRefused() {
        assertThatThrownBy(() -> new RecordingOptions(0, 0)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxEvents");
        assertThatThrownBy(() -> new RecordingOptions(RecordingOptions.MAX_EVENTS + 1, 0)).hasMessageContaining("maxEvents");
        assertThatThrownBy(() -> new RecordingOptions(10, -1)).hasMessageContaining("callSiteFrames");
        assertThatThrownBy(() -> new RecordingOptions(10, RecordingOptions.MAX_CALL_SITE_FRAMES + 1)).hasMessageContaining("callSiteFrames");
    }

    @Test
    void callSitesStartAtTheCallerAndAreCutShort() {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.DEVICE)) {
            recorder.start(new RecordingOptions(100, 2), "test");
            resource.deallocate(resource.allocate(4096));
            AllocationTrace trace = recorder.stop();

            String site = trace.events().getFirst().callSite();
            assertThat(site).startsWith(RecordingResourceTest.class.getName() + ".callSitesStartAtTheCallerAndAreCutShort(")
                    .doesNotContain(",").doesNotContain(RecordingResource.class.getName() + ".");
            assertThat(site.split(";")).hasSize(2);
            assertThat(trace.events().get(1).callSite()).as("frees carry none").isNull();
            assertThat(trace.events().getFirst().line()).endsWith("," + site);
        }
    }

    /**
     * Threads allocate, hand blocks to each other and free them while the recording runs: every free in the trace
     * comes after its allocation, no id is allocated twice, and nothing is lost.
     */
    @Test
    void threadsAllocatingAndFreeingEachOthersBlocksLeaveAConsistentTrace() throws InterruptedException {
        AllocationRecorder recorder = new AllocationRecorder();
        int threads = 4;
        int pairsEach = 5_000;
        try (RecordingResource resource = overPool(recorder, MemoryLocation.DEVICE)) {
            recorder.start(RecordingOptions.defaults(), "test");
            BlockingQueue<Block> handedOver = new ArrayBlockingQueue<>(threads * pairsEach);
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                workers.add(Thread.ofPlatform().name("recording-worker-" + t).start(() -> {
                    try {
                        start.await();
                        for (int i = 0; i < pairsEach; i++) {
                            handedOver.put(resource.allocate(1 + ThreadLocalRandom.current().nextLong(64 * 1024)));
                            Block other = handedOver.poll(10, TimeUnit.SECONDS);
                            if (other != null) {
                                resource.deallocate(other);
                            }
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }));
            }
            start.countDown();
            for (Thread worker : workers) {
                worker.join(TimeUnit.SECONDS.toMillis(60));
            }
            for (Block left; (left = handedOver.poll()) != null; ) {
                resource.deallocate(left);
            }
            AllocationTrace trace = recorder.stop();

            assertThat(trace.allocations()).isEqualTo((long) threads * pairsEach);
            assertThat(trace.frees()).isEqualTo(trace.allocations());
            assertThat(trace.earlierBlockFrees()).isZero();
            Set<Long> allocated = new HashSet<>();
            Set<Long> live = new HashSet<>();
            long previousNanos = -1;
            for (TraceEvent event : trace.events()) {
                if (event.kind() == TraceEvent.Kind.ALLOCATION) {
                    assertThat(allocated.add(event.id())).as("id %d allocated once", event.id()).isTrue();
                    live.add(event.id());
                } else {
                    assertThat(live.remove(event.id())).as("free of %d after its allocation", event.id()).isTrue();
                }
                assertThat(event.nanos()).isGreaterThanOrEqualTo(previousNanos);
                previousNanos = event.nanos();
            }
            assertThat(live).isEmpty();
            assertThat(trace.threadNames().values()).contains("recording-worker-0", "recording-worker-3");
        }
    }

    /**
     * A file that opens but refuses the writes (a full disk; here a /proc file that takes a number) failed with the
     * system's words alone ("Invalid argument"), naming no file. The failure names it, and the trace is still there to
     * write elsewhere.
     */
    @Test
    void aFileThatRefusesTheWritesIsNamedAndTheTraceStaysToWriteElsewhere(@TempDir Path dir) throws IOException {
        Path takesANumber = Path.of("/proc/self/oom_score_adj");
        assumeTrue(Files.isRegularFile(takesANumber) && Files.isWritable(takesANumber), "no /proc file that refuses text here");
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.PINNED)) {
            recorder.start(RecordingOptions.defaults(), "the test");
            resource.deallocate(resource.allocate(123));
            AllocationTrace trace = recorder.stop();

            assertThatThrownBy(() -> trace.writeTo(takesANumber)).isInstanceOf(IOException.class)
                    .hasMessageStartingWith("cannot write the trace to " + takesANumber + ": ");

            Path elsewhere = dir.resolve("trace.csv");
            trace.writeTo(elsewhere);
            assertThat(Files.readAllLines(elsewhere)).isEqualTo(trace.lines().toList()).hasSizeGreaterThan(2);
        }
    }

    /**
     * A trace written on a thread whose interrupt flag is set (a cancelled task's) met the file channel's
     * ClosedByInterruptException, which has no message: the failure read "cannot write the trace to ...: null". It says
     * why now, and the interrupt stays set.
     */
    @Test
    void aTraceWrittenOnAnInterruptedThreadSaysSoAndKeepsTheInterrupt(@TempDir Path dir) throws IOException {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.PINNED)) {
            recorder.start(RecordingOptions.defaults(), "the test");
            resource.deallocate(resource.allocate(123));
            AllocationTrace trace = recorder.stop();
            Path file = dir.resolve("trace.csv");
            Thread.currentThread().interrupt();
            try {
                assertThatThrownBy(() -> trace.writeTo(file)).isInstanceOf(ClosedByInterruptException.class)
                        .hasMessage("cannot write the trace to " + file + ": the thread was interrupted, which closes a file channel as"
                                + " it is used (its interrupt flag is still set; clear it with Thread.interrupted() to write on this thread)");
                assertThat(Thread.currentThread().isInterrupted()).as("the interrupt, kept").isTrue();
            } finally {
                Thread.interrupted();
            }
        }
    }

    @Test
    void theTraceWritesAsTheReplayerReadsItGzipByName(@TempDir Path dir) throws IOException {
        AllocationRecorder recorder = new AllocationRecorder();
        try (RecordingResource resource = overPool(recorder, MemoryLocation.PINNED)) {
            recorder.start(RecordingOptions.defaults(), "settings of\nthe test");
            resource.deallocate(resource.allocate(123));
            AllocationTrace trace = recorder.stop();
            Path file = dir.resolve("trace.csv.gz");
            trace.writeTo(file);

            List<String> lines;
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(new GZIPInputStream(Files.newInputStream(file)),
                    StandardCharsets.UTF_8))) {
                lines = reader.lines().toList();
            }
            assertThat(lines).isEqualTo(trace.lines().toList());
            assertThat(lines).contains("# recorded with: settings of the test", "# format: " + AllocationTrace.FORMAT);
            assertThat(lines).contains("# thread," + Thread.currentThread().threadId() + "," + Thread.currentThread().getName());
            List<String> events = lines.stream().filter(line -> !line.startsWith("#")).toList();
            assertThat(events).hasSize(2);
            Map<String, String> first = new HashMap<>();
            String[] fields = events.getFirst().split(",");
            first.put("kind", fields[0]);
            first.put("bytes", fields[2]);
            first.put("stream", fields[3]);
            first.put("location", fields[4]);
            assertThat(first).containsEntry("kind", "a").containsEntry("bytes", "123").containsEntry("stream", "0")
                    .containsEntry("location", "PINNED");
            assertThat(events.get(1)).startsWith("f," + fields[1] + ",");
        }
    }
}
