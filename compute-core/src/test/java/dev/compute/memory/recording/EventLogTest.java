package dev.compute.memory.recording;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.recording.TraceEvent.Kind;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.NativeAllocation;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A recording under way: blocks named by identity (a block handed out again gets a new id), frees of blocks allocated
 * before it named apart, one order that agrees with every thread's, a full log truncated rather than grown, call sites
 * kept once, and nothing recorded once it is finished.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class EventLogTest {

    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    /** A block that is equal to any other of its size and place: the log must tell them apart by identity. */
    private record SameLooking(NativeAllocation segment, long offset, long size, long requestedSize) implements Block {}

    private static final NativeAllocation SEGMENT = new NativeAllocation(DEVICE, 1L << 40, 1 << 20, null, null);

    private static Block block(long requested) {
        return new SameLooking(SEGMENT, 0, 4096, requested);
    }

    private static EventLog log(int maxEvents, int callSiteFrames) {
        return new EventLog(new RecordingOptions(maxEvents, callSiteFrames), "the test's settings");
    }

    @Test
    void aFreeCarriesTheIdOfItsAllocationAndABlockHandedOutAgainGetsANewOne() {
        EventLog log = log(100, 0);
        Block first = block(1000);
        Block equalButOther = block(1000);
        assertThat(equalButOther).isEqualTo(first);

        log.allocated(DEVICE, first, null);
        log.allocated(MemoryLocation.HOST, equalButOther, null);
        log.freed(DEVICE, first);
        log.allocated(DEVICE, first, null); // the pool lends the same block again
        log.freed(DEVICE, first);
        log.freed(MemoryLocation.HOST, equalButOther);
        AllocationTrace trace = log.finish();

        assertThat(trace.events()).extracting(TraceEvent::kind, TraceEvent::id, TraceEvent::location).containsExactly(
                org.assertj.core.groups.Tuple.tuple(Kind.ALLOCATION, 1L, DEVICE),
                org.assertj.core.groups.Tuple.tuple(Kind.ALLOCATION, 2L, MemoryLocation.HOST),
                org.assertj.core.groups.Tuple.tuple(Kind.FREE, 1L, DEVICE),
                org.assertj.core.groups.Tuple.tuple(Kind.ALLOCATION, 3L, DEVICE),
                org.assertj.core.groups.Tuple.tuple(Kind.FREE, 3L, DEVICE),
                org.assertj.core.groups.Tuple.tuple(Kind.FREE, 2L, MemoryLocation.HOST));
        assertThat(trace.events()).allSatisfy(event -> {
            assertThat(event.bytes()).as("what was asked for").isEqualTo(1000);
            assertThat(event.earlierBlock()).isFalse();
            assertThat(event.threadId()).isEqualTo(Thread.currentThread().threadId());
        });
        assertThat(trace.events()).extracting(TraceEvent::nanos).isSorted();
        assertThat(trace.allocations()).isEqualTo(3);
        assertThat(trace.frees()).isEqualTo(3);
        assertThat(trace.earlierBlockFrees()).isZero();
        assertThat(trace.truncated()).isFalse();
        assertThat(trace.threadNames()).containsEntry(Thread.currentThread().threadId(), Thread.currentThread().getName());
    }

    @Test
    void aFreeOfABlockAllocatedBeforeTheRecordingHasAnIdNoAllocationHas() {
        EventLog log = log(100, 0);
        Block before = block(512);
        Block during = block(256);

        log.allocated(DEVICE, during, null);
        log.freed(DEVICE, before);
        AllocationTrace trace = log.finish();

        TraceEvent free = trace.events().get(1);
        assertThat(free.kind()).isEqualTo(Kind.FREE);
        assertThat(free.earlierBlock()).isTrue();
        assertThat(free.id()).isEqualTo(2).isNotEqualTo(trace.events().getFirst().id());
        assertThat(trace.earlierBlockFrees()).isEqualTo(1);
        assertThat(trace.frees()).isEqualTo(1);
    }

    @Test
    void aFullLogRecordsNothingMoreAndSaysItWasTruncated() {
        EventLog log = log(2, 0);
        Block a = block(1);
        Block b = block(2);

        assertThat(log.allocated(DEVICE, a, null)).isTrue();
        assertThat(log.allocated(DEVICE, b, null)).isTrue();
        assertThat(log.freed(DEVICE, a)).as("full").isFalse();
        assertThat(log.allocated(DEVICE, block(3), null)).isFalse();
        AllocationTrace trace = log.finish();

        assertThat(trace.events()).hasSize(2);
        assertThat(trace.truncated()).isTrue();
        assertThat(trace.frees()).isZero();
        assertThat(trace.allocations()).isEqualTo(2);
    }

    @Test
    void onceFinishedWhatStillArrivesIsDroppedWithoutTruncating() {
        EventLog log = log(1, 0);
        log.allocated(DEVICE, block(1), null);
        AllocationTrace trace = log.finish();

        assertThat(log.allocated(DEVICE, block(2), null)).isTrue();
        assertThat(log.freed(DEVICE, block(2))).isTrue();

        assertThat(trace.events()).hasSize(1);
        assertThat(trace.truncated()).isFalse();
        assertThat(log.finish().events()).hasSize(1);
    }

    @Test
    void aCallSiteIsKeptOnceHoweverManyAllocationsShareItAndOnlyWhenAsked() {
        EventLog withSites = log(10, 4);
        String site = "dev.example.Model.forward(Model.java:42)";
        withSites.allocated(DEVICE, block(1), new String(site));
        withSites.allocated(DEVICE, block(2), new String(site));
        withSites.allocated(DEVICE, block(3), null);
        AllocationTrace trace = withSites.finish();

        assertThat(trace.events().get(0).callSite()).isEqualTo(site);
        assertThat(trace.events().get(1).callSite()).isSameAs(trace.events().get(0).callSite());
        assertThat(trace.events().get(2).callSite()).isNull();

        EventLog without = log(10, 0);
        without.allocated(DEVICE, block(1), site);
        assertThat(without.finish().events().getFirst().callSite()).isNull();
    }

    @Test
    void threadsRecordingAtOnceGetOneOrderInWhichEveryFreeFollowsItsAllocation() throws Exception {
        EventLog log = log(1_000_000, 0);
        int threads = 4;
        int blocks = 5_000;
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().name("recorder-" + t).start(() -> {
                try {
                    start.await();
                    for (int i = 0; i < blocks; i++) {
                        Block block = block(i);
                        log.allocated(DEVICE, block, null);
                        log.freed(DEVICE, block);
                    }
                } catch (Throwable e) {
                    failure.set(e);
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(30_000);
        }
        AllocationTrace trace = log.finish();

        assertThat(failure.get()).isNull();
        assertThat(trace.events()).hasSize(2 * threads * blocks);
        Map<Long, Long> allocatedBy = new HashMap<>();
        for (TraceEvent event : trace.events()) {
            if (event.kind() == Kind.ALLOCATION) {
                assertThat(allocatedBy.put(event.id(), event.threadId())).as("ids are unique").isNull();
            } else {
                assertThat(allocatedBy.remove(event.id())).as("freed after its allocation, by its thread").isEqualTo(event.threadId());
            }
        }
        assertThat(allocatedBy).isEmpty();
        assertThat(trace.events()).extracting(TraceEvent::nanos).isSorted();
        assertThat(trace.threadNames().values()).contains("recorder-0", "recorder-1", "recorder-2", "recorder-3");
        assertThat(trace.earlierBlockFrees()).isZero();
    }
}
