package dev.compute.memory.budget;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.BudgetReservationException;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.MemoryLocation;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class BudgetLedgerTest {

    static final long MiB = 1L << 20;
    static final MemoryLocation DEVICE = MemoryLocation.DEVICE;
    static final MemoryLocation HOST = MemoryLocation.HOST;

    /** Books against a cap of 64 MiB at DEVICE and HOST; a claim waits up to {@code settleWait} for requests under way. */
    static BudgetLedger<String> ledger(Duration settleWait) {
        return new BudgetLedger<>(Map.of(DEVICE, 64 * MiB, HOST, 64 * MiB),
                Map.of(DEVICE, "compute.memory.pooling.max-pool-size", HOST, "compute.memory.pooling.max-pool-size"), settleWait);
    }

    static BudgetLedger<String> ledger() {
        return ledger(Duration.ofSeconds(10));
    }

    /** A buffer through {@code account}: claimed, then settled; what the buffer would carry. */
    static BudgetNode<String> allocate(BudgetLedger<String> ledger, BudgetAccount<String> account, MemoryLocation location, long bytes) {
        ledger.claim(account, location, bytes, 1);
        BudgetNode<String>[] nodes = ledger.settleAll(account, location, BudgetLedger.Claimant.THIS_THREAD, new String[] {"buffer of " + bytes},
                new long[] {bytes});
        assertThat(nodes).isNotNull().hasSize(1);
        assertThat(ledger.handedOut(nodes)).as("the buffer goes to its caller").isTrue();
        return nodes[0];
    }

    @Test
    void aChildsReservationCountsInItsParentFromTheStartAndGoesBackAsItCloses() {
        BudgetLedger<String> ledger = ledger();
        BudgetAccount<String> parent = ledger.open(null, BudgetSpec.of("parent", 32 * MiB));
        BudgetAccount<String> child = ledger.open(parent, BudgetSpec.of("child", 16 * MiB).withReservation(DEVICE, 16 * MiB));

        assertThatThrownBy(() -> ledger.claim(parent, DEVICE, 17 * MiB, 1)).as("16 of the parent's 32 are its child's")
                .isInstanceOf(BudgetExceededException.class).hasMessageContaining("reserved by budgets under it and not in use");
        BudgetNode<String> inChild = allocate(ledger, child, DEVICE, 16 * MiB);
        assertThat(ledger.statistics(parent).allocatedBytes()).isEqualTo(16 * MiB);
        BudgetNode<String> inParent = allocate(ledger, parent, DEVICE, 16 * MiB);
        ledger.released(inChild);
        assertThatThrownBy(() -> ledger.claim(parent, DEVICE, MiB, 1)).as("the child's memory is back, but still kept for it")
                .isInstanceOf(BudgetExceededException.class);

        assertThat(ledger.close(child)).isEmpty();
        allocate(ledger, parent, DEVICE, 16 * MiB);
        ledger.released(inParent);
        assertThat(ledger.statistics(child).reservedBytes()).isZero();
    }

    @Test
    void aRequestWithinAReservationReachesNothingAboveItAndTheRestIsCheckedAtTheCap() {
        BudgetLedger<String> ledger = ledger();
        BudgetAccount<String> gold = ledger.open(null, BudgetSpec.of("gold", 48 * MiB).withReservation(DEVICE, 32 * MiB));
        BudgetAccount<String> noisy = ledger.open(null, BudgetSpec.of("noisy", 64 * MiB));

        allocate(ledger, noisy, DEVICE, 32 * MiB);
        assertThatThrownBy(() -> ledger.claim(noisy, DEVICE, 1, 1)).isInstanceOfSatisfying(BudgetExceededException.class,
                e -> assertThat(e.refusedBy()).isEqualTo("noisy")).hasMessageContaining("gold reserves 33554432, holds 0");
        allocate(ledger, gold, DEVICE, 32 * MiB);
        assertThatThrownBy(() -> ledger.claim(gold, DEVICE, 1, 1)).as("past its reservation, gold is at the cap like anyone")
                .isInstanceOf(BudgetExceededException.class).hasMessageContaining("the budgets together would take more than the 67108864 bytes");
        allocate(ledger, gold, HOST, 16 * MiB);
        assertThatThrownBy(() -> ledger.claim(gold, HOST, 1, 1)).as("its limit at all locations").isInstanceOf(BudgetExceededException.class)
                .hasMessageContaining("the limit of memory budget 'gold' of 50331648 bytes");
    }

    @Test
    void aReservationIsCheckedLocationByLocationAndNothingStaysCountedWhenOneFails() {
        BudgetLedger<String> ledger = ledger();
        ledger.open(null, BudgetSpec.of("host-heavy", 64 * MiB).withReservation(HOST, 60 * MiB)).attach("host-heavy");

        assertThatThrownBy(() -> ledger.open(null, BudgetSpec.of("both", 32 * MiB).withReservation(DEVICE, 8 * MiB).withReservation(HOST, 8 * MiB)))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("cannot reserve 8388608 bytes of HOST");
        assertThat(ledger.roots()).containsExactly("host-heavy");
        BudgetAccount<String> device = ledger.open(null, BudgetSpec.of("device", 64 * MiB).withReservation(DEVICE, 64 * MiB));
        assertThat(ledger.statistics(device).reservedBytes()).as("the failed budget's DEVICE reservation went back").isEqualTo(64 * MiB);
        assertThatThrownBy(() -> ledger.open(null, BudgetSpec.of("pinned", MiB).withReservation(MemoryLocation.PINNED, MiB)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("this manager has none");
    }

    @Test
    void aReservationAboveTheCapByItselfIsRefusedNamingItsLocationWhateverRoomOthersKeep() {
        BudgetLedger<String> ledger = ledger();
        BudgetAccount<String> other = ledger.open(null, BudgetSpec.of("other", 64 * MiB));
        other.attach("other");
        ledger.released(allocate(ledger, other, DEVICE, MiB)); // its stripe keeps the bytes as room, counted at the cap

        assertThatThrownBy(() -> ledger.open(null, BudgetSpec.of("huge", 128 * MiB).withReservation(DEVICE, 65 * MiB)))
                .isInstanceOfSatisfying(BudgetReservationException.class, e -> {
                    assertThat(e.location()).isEqualTo(DEVICE);
                    assertThat(e.reservedBytes()).isEqualTo(65 * MiB);
                }).hasMessage("memory budget 'huge' cannot reserve 68157440 bytes of DEVICE: more than the 67108864 bytes of DEVICE memory"
                        + " (compute.memory.pooling.max-pool-size) by itself");
        assertThat(ledger.roots()).containsExactly("other");
    }

    @Test
    void aClaimThatOnlyRequestsUnderWayStandBeforeWaitsForThemAndOneOfItsOwnThreadIsRefusedAtOnce() throws Exception {
        BudgetLedger<String> ledger = ledger();
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 16 * MiB));
        ledger.claim(tenant, DEVICE, 12 * MiB, 1); // under way on this thread

        assertThatThrownBy(() -> ledger.claim(tenant, DEVICE, 8 * MiB, 1)).as("its own request: waiting for it would never end")
                .isInstanceOf(BudgetExceededException.class).hasMessageContaining("12582912 being allocated");
        CompletableFuture<Void> other = CompletableFuture.runAsync(() -> ledger.claim(tenant, DEVICE, 8 * MiB, 1));
        assertThat(other).isNotDone();
        ledger.cancel(tenant, DEVICE, 12 * MiB, BudgetLedger.Claimant.THIS_THREAD); // the pool refused it

        other.get(10, TimeUnit.SECONDS);
        assertThat(ledger.statistics(tenant).allocatedBytes()).as("under way, not held").isZero();
        assertThat(ledger.statistics(tenant).refusals()).isEqualTo(1);
    }

    @Test
    void aClaimWaitsForRequestsUnderWayNoLongerThanItsWait() {
        BudgetLedger<String> ledger = ledger(Duration.ofMillis(20));
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 16 * MiB));
        CompletableFuture.runAsync(() -> ledger.claim(tenant, DEVICE, 12 * MiB, 1)).join(); // never settled

        assertThatThrownBy(() -> ledger.claim(tenant, DEVICE, 8 * MiB, 1)).isInstanceOf(BudgetExceededException.class);
    }

    /**
     * The manager closes and frees its pools while a request through a budget has its buffer but has not counted it:
     * the late settle finds the budget closed and counts nothing, whose memory went back with the manager's.
     */
    @Test
    void aSettleRacingTheManagersCloseCountsNothing() throws Exception {
        BudgetLedger<String> ledger = ledger();
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 64 * MiB));
        ledger.claim(tenant, DEVICE, 16 * MiB, 1);
        CompletableFuture<BudgetNode<String>[]> settling;
        ledger.lock().lock();
        try {
            settling = CompletableFuture.supplyAsync(() -> ledger.settleAll(tenant, DEVICE, BudgetLedger.Claimant.QUEUED_REQUEST,
                    new String[] {"late"}, new long[] {16 * MiB}));
            while (!ledger.lock().hasQueuedThreads()) {
                Thread.onSpinWait();
            }
            ledger.managerClosed(true);
        } finally {
            ledger.lock().unlock();
        }

        assertThat(settling.get(10, TimeUnit.SECONDS)).as("the caller closes the buffer").isNull();
        BudgetStatistics figures = ledger.statistics(tenant);
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.liveBuffers()).isZero();
        assertThatThrownBy(() -> ledger.open(null, BudgetSpec.of("late", MiB))).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aManagerThatKeptItsMemoryKeepsItCountedAndOneThatFreedItCountsNothing() {
        BudgetLedger<String> kept = ledger();
        BudgetAccount<String> keeping = kept.open(null, BudgetSpec.of("tenant", 64 * MiB));
        BudgetAccount<String> keepingChild = kept.open(keeping, BudgetSpec.of("child", 64 * MiB));
        allocate(kept, keepingChild, DEVICE, 8 * MiB);
        kept.managerClosed(false);
        assertThat(kept.statistics(keepingChild).allocatedBytes()).isEqualTo(8 * MiB);
        assertThat(kept.isClosed(keeping)).isTrue();

        BudgetLedger<String> freed = ledger();
        BudgetAccount<String> tenant = freed.open(null, BudgetSpec.of("tenant", 64 * MiB));
        BudgetAccount<String> child = freed.open(tenant, BudgetSpec.of("child", 64 * MiB));
        BudgetNode<String> node = allocate(freed, child, DEVICE, 8 * MiB);
        freed.managerClosed(true);
        assertThat(freed.statistics(child).allocatedBytes()).isZero();
        assertThat(freed.statistics(tenant).allocatedBytes()).isZero();
        freed.released(node); // its memory going back after all changes nothing
        assertThat(freed.statistics(tenant).allocatedBytes()).isZero();
        assertThat(freed.roots()).isEmpty();
    }

    @Test
    void whatNoBudgetCountsIsNoneOfTheBooksAndReleasingTwiceCountsOnce() {
        BudgetLedger<String> ledger = ledger();
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 64 * MiB));
        BudgetNode<String> node = allocate(ledger, tenant, DEVICE, 8 * MiB);

        ledger.released("what no budget counts");
        assertThat(ledger.statistics(tenant).allocatedBytes()).isEqualTo(8 * MiB);
        ledger.released(node);
        ledger.released(node);
        assertThat(ledger.statistics(tenant).allocatedBytes()).isZero();
        assertThat(ledger.statistics(tenant).allocatedBytesPeak()).isEqualTo(8 * MiB);
    }

    @Test
    void closingReturnsWhatEachBudgetStillCountsDeepestFirstAndClosingTwiceNothing() {
        BudgetLedger<String> ledger = ledger();
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 64 * MiB));
        BudgetAccount<String> request = ledger.open(tenant, BudgetSpec.of("request", 64 * MiB));
        allocate(ledger, tenant, DEVICE, MiB);
        allocate(ledger, request, HOST, 2 * MiB);
        assertThat(ledger.handOutMapped(ledger.settleMapped(request, "mapped", 4096))).isTrue();
        BudgetEntry<String> notYetHandedOut = ledger.settleMapped(request, "being mapped", 8192);

        List<BudgetLedger.Open<String>> open = ledger.close(tenant);

        assertThat(open).containsExactly(new BudgetLedger.Open<>("tenant/request", request, 4096, true, "mapped", null),
                new BudgetLedger.Open<>("tenant/request", request, 2 * MiB, false, "buffer of 2097152", null),
                new BudgetLedger.Open<>("tenant", tenant, MiB, false, "buffer of 1048576", null));
        assertThat(ledger.handOutMapped(notYetHandedOut)).as("its mapFile closes it: the close left it out").isFalse();
        assertThat(ledger.isClosed(request)).isTrue();
        assertThat(ledger.close(tenant)).isEmpty();
        assertThat(ledger.settleMapped(request, "late", 1)).isNull();
        assertThatThrownBy(() -> ledger.claim(request, DEVICE, 1, 1)).isInstanceOf(IllegalStateException.class)
                .hasMessage("memory budget 'tenant/request' is closed");
    }
}
