package dev.compute.memory.budget;

import static dev.compute.memory.budget.BudgetLedgerTest.DEVICE;
import static dev.compute.memory.budget.BudgetLedgerTest.HOST;
import static dev.compute.memory.budget.BudgetLedgerTest.MiB;
import static dev.compute.memory.budget.BudgetLedgerTest.allocate;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.ThreadStripes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The books kept per thread stripe: room for the next requests, figures at every level, exact peaks. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class BudgetStripesTest {

    /** A limit whose sliver per stripe is 8 MiB, whatever the number of stripes. */
    private static final long LIMIT = 2L * ThreadStripes.COUNT * 8 * MiB;

    private final BudgetLedger<String> ledger = new BudgetLedger<>(Map.of(DEVICE, 4 * LIMIT, HOST, 4 * LIMIT),
            Map.of(DEVICE, "compute.memory.pooling.max-pool-size", HOST, "compute.memory.pooling.max-pool-size"), Duration.ofSeconds(10));

    /** What the budget's limits count at a location: buffers, requests under way and room. */
    private static long counted(BudgetAccount<String> account, MemoryLocation location) {
        return account.content[location.ordinal()];
    }

    @Test
    void aFreedBuffersBytesStayAsRoomAndTheNextRequestOfTheirSizeIsLetInThere() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", LIMIT));
        assertThat(ledger.take(tenant, DEVICE, MiB)).as("no room yet: the books decide").isNull();

        ledger.released(allocate(ledger, tenant, DEVICE, MiB));
        assertThat(counted(tenant, DEVICE)).as("kept as room, still counted").isEqualTo(MiB);
        BudgetNode<String> fromRoom = ledger.take(tenant, DEVICE, MiB);

        assertThat(fromRoom).isNotNull();
        assertThat(ledger.settled(fromRoom, "buffer")).isTrue();
        assertThat(counted(tenant, DEVICE)).as("the room became the buffer").isEqualTo(MiB);
        assertThat(ledger.statistics(tenant).allocatedBytes()).isEqualTo(MiB);
        assertThat(ledger.statistics(tenant).liveBuffers()).isEqualTo(1);
        assertThat(ledger.statistics(tenant).allocations()).isEqualTo(2);
        assertThat(ledger.take(tenant, HOST, MiB)).as("room is kept per location").isNull();
    }

    @Test
    void aStripeKeepsAboutTwiceItsLargestRequestUpToASliverOfTheLimitAndGivesTheRestBack() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", LIMIT));
        ledger.released(allocate(ledger, tenant, DEVICE, MiB));
        ledger.released(allocate(ledger, tenant, DEVICE, MiB));
        assertThat(counted(tenant, DEVICE)).isEqualTo(2 * MiB);
        BudgetNode<String> third = allocate(ledger, tenant, DEVICE, MiB);
        ledger.released(third);
        assertThat(counted(tenant, DEVICE)).as("twice the largest request: 2 MiB").isEqualTo(2 * MiB);

        ledger.released(allocate(ledger, tenant, DEVICE, 6 * MiB));
        assertThat(counted(tenant, DEVICE)).as("at most 8 MiB per stripe of this limit").isEqualTo(8 * MiB);
        assertThat(ledger.statistics(tenant).allocatedBytes()).isZero();
    }

    @Test
    void aRequestTheBooksWouldRefuseFirstTakesBackTheRoomEveryStripeKeeps() {
        BudgetAccount<String> parent = ledger.open(null, BudgetSpec.of("parent", 16 * MiB));
        BudgetAccount<String> quiet = ledger.open(parent, BudgetSpec.of("quiet", 16 * MiB));
        BudgetAccount<String> busy = ledger.open(parent, BudgetSpec.of("busy", 16 * MiB));
        ledger.released(allocate(ledger, quiet, DEVICE, MiB));
        assertThat(counted(parent, DEVICE)).as("quiet's room counts in its parent").isGreaterThan(0);

        BudgetNode<String> all = allocate(ledger, busy, DEVICE, 16 * MiB);

        assertThat(counted(quiet, DEVICE)).as("its room was taken back").isZero();
        assertThat(ledger.statistics(parent).allocatedBytes()).isEqualTo(16 * MiB);
        assertThatThrownBy(() -> ledger.claim(busy, DEVICE, 1, 1)).isInstanceOf(BudgetExceededException.class)
                .hasMessageContaining("16777216 held in 1 buffer(s)");
        ledger.released(all);
    }

    @Test
    void everyLevelCountsItsChildrensBuffersAndThePeaksAreExact() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", LIMIT));
        BudgetAccount<String> request = ledger.open(tenant, BudgetSpec.of("request", LIMIT));
        BudgetNode<String> a = allocate(ledger, request, DEVICE, 4 * MiB);
        BudgetNode<String> b = allocate(ledger, request, HOST, 4 * MiB);
        ledger.released(a);
        BudgetNode<String> c = allocate(ledger, tenant, DEVICE, 2 * MiB);
        BudgetNode<String> d = ledger.take(request, DEVICE, 2 * MiB);
        assertThat(d).as("from the room a left").isNotNull();

        BudgetStatistics figures = ledger.statistics(tenant);
        assertThat(figures.allocatedBytes()).isEqualTo(8 * MiB);
        assertThat(figures.allocatedBytesPeak()).isEqualTo(8 * MiB);
        assertThat(figures.liveBuffers()).isEqualTo(3);
        assertThat(figures.locations().get(DEVICE).allocatedBytesPeak()).isEqualTo(4 * MiB);
        assertThat(figures.locations().get(HOST).allocatedBytes()).isEqualTo(4 * MiB);
        assertThat(ledger.statistics(request).allocatedBytesPeak()).isEqualTo(8 * MiB);
        assertThat(ledger.statistics(request).allocatedBytes()).isEqualTo(6 * MiB);
        for (BudgetNode<String> node : List.of(b, c, d)) {
            ledger.released(node);
        }
        assertThat(ledger.statistics(tenant).allocatedBytes()).isZero();
        assertThat(ledger.statistics(tenant).allocatedBytesPeak()).isEqualTo(8 * MiB);
    }

    @Test
    void peaksStayExactWhileThreadsOnTheirOwnStripesAllocateAndFree() throws InterruptedException {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", LIMIT));
        AtomicLong held = new AtomicLong();
        AtomicLong most = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            threads.add(Thread.ofPlatform().start(() -> {
                for (int i = 0; i < 2_000; i++) {
                    BudgetNode<String> node = ledger.take(tenant, DEVICE, MiB);
                    if (node == null) {
                        node = allocate(ledger, tenant, DEVICE, MiB);
                    }
                    most.accumulateAndGet(held.addAndGet(MiB), Math::max);
                    held.addAndGet(-MiB);
                    ledger.released(node);
                }
            }));
        }
        for (Thread thread : threads) {
            thread.join();
        }

        BudgetStatistics figures = ledger.statistics(tenant);
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.liveBuffers()).isZero();
        assertThat(figures.allocations()).isEqualTo(8_000);
        assertThat(figures.allocatedBytesPeak()).as("never more than the threads held at once").isBetween(MiB, 4 * MiB)
                .isLessThanOrEqualTo(Math.max(most.get(), MiB) + 3 * MiB);
    }

    @Test
    void aRequestThatFailedInThePoolWasNoAllocationAndItsBytesComeBack() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", LIMIT));
        ledger.released(allocate(ledger, tenant, DEVICE, MiB));
        BudgetNode<String> refused = ledger.take(tenant, DEVICE, MiB);

        ledger.failed(refused);

        assertThat(ledger.statistics(tenant).allocations()).isEqualTo(1);
        assertThat(ledger.statistics(tenant).liveBuffers()).isZero();
        assertThat(ledger.take(tenant, DEVICE, MiB)).as("back in the room").isNotNull();
    }

    @Test
    void aClosedBudgetLetsNothingInFromItsRoomAndGivesItBack() {
        BudgetAccount<String> parent = ledger.open(null, BudgetSpec.of("parent", LIMIT));
        BudgetAccount<String> request = ledger.open(parent, BudgetSpec.of("request", LIMIT));
        ledger.released(allocate(ledger, request, DEVICE, MiB));
        BudgetNode<String> underWay = ledger.take(request, DEVICE, MiB);
        ledger.released(allocate(ledger, request, DEVICE, MiB));

        List<BudgetLedger.Open<String>> open = ledger.close(request);

        assertThat(open).containsExactly(new BudgetLedger.Open<>("parent/request", request, MiB, false, null, underWay));
        assertThat(ledger.take(request, DEVICE, MiB)).isNull();
        assertThat(counted(parent, DEVICE)).as("only the request under way still counts").isEqualTo(MiB);
        assertThat(ledger.settled(underWay, "late")).as("its caller closes it").isFalse();
        ledger.released(underWay);
        assertThat(counted(parent, DEVICE)).isZero();
    }
}
