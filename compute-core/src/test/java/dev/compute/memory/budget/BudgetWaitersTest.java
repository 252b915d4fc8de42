package dev.compute.memory.budget;

import static dev.compute.memory.budget.BudgetLedgerTest.DEVICE;
import static dev.compute.memory.budget.BudgetLedgerTest.MiB;
import static dev.compute.memory.budget.BudgetLedgerTest.allocate;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.BudgetSpec;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class BudgetWaitersTest {

    private static final Duration LONG = Duration.ofSeconds(30);

    private final BudgetLedger<String> ledger = BudgetLedgerTest.ledger();
    private final BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 16 * MiB));

    @Test
    void aRequestThatFitsAndFindsNobodyWaitingIsLetInAtOnce() {
        CompletableFuture<Void> now = ledger.claimLater(tenant, DEVICE, 8 * MiB, LONG);

        assertThat(now).isCompleted();
        assertThat(fits(9 * MiB)).as("its bytes count as under way").isFalse();
        assertThat(fits(8 * MiB)).isTrue();
    }

    @Test
    void headsAreServedInTheOrderTheyCameAndALaterSmallOneDoesNotPassAnEarlierLargeOne() throws Exception {
        BudgetNode<String> held = allocate(ledger, tenant, DEVICE, 12 * MiB);
        CompletableFuture<Void> large = ledger.claimLater(tenant, DEVICE, 8 * MiB, LONG);
        CompletableFuture<Void> small = ledger.claimLater(tenant, DEVICE, 2 * MiB, LONG);
        assertThat(ledger.statistics(tenant).waitingRequests()).isEqualTo(2);
        assertThat(small).as("room for it, but the large one came first").isNotDone();

        ledger.released(held);

        large.get(10, TimeUnit.SECONDS);
        small.get(10, TimeUnit.SECONDS);
        assertThat(ledger.statistics(tenant).waitingRequests()).isZero();
    }

    @Test
    void aLetInRequestCompletesOnAThreadOfItsOwnNotTheOneThatGaveTheMemoryBack() throws Exception {
        BudgetNode<String> held = allocate(ledger, tenant, DEVICE, 16 * MiB);
        CompletableFuture<Void> waiting = ledger.claimLater(tenant, DEVICE, 8 * MiB, LONG);
        AtomicReference<Thread> completedOn = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(1);
        waiting.thenRun(() -> {
            completedOn.set(Thread.currentThread());
            done.countDown();
        });

        ledger.released(held);

        assertThat(done.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(completedOn.get()).isNotSameAs(Thread.currentThread());
        assertThat(completedOn.get().getName()).startsWith("compute-budget-waiter-");
    }

    /**
     * A request ended by whoever holds its future (cancelled, or completed as {@code orTimeout} does) is off the queue
     * when the functions added to the future run, and a head that left so lets the next in.
     */
    @Test
    void aRequestEndedByItsHolderIsOffTheQueueWhenItsFunctionsRun() throws Exception {
        BudgetNode<String> held = allocate(ledger, tenant, DEVICE, 12 * MiB);
        CompletableFuture<Void> cancelled = ledger.claimLater(tenant, DEVICE, 8 * MiB, LONG);
        CompletableFuture<Void> completed = ledger.claimLater(tenant, DEVICE, 8 * MiB, LONG);
        CompletableFuture<Void> next = ledger.claimLater(tenant, DEVICE, 4 * MiB, LONG);
        CompletableFuture<Long> waitingWhenCancelled = cancelled.handle((done, failure) -> ledger.statistics(tenant).waitingRequests());
        CompletableFuture<Long> waitingWhenCompleted = completed.handle((done, failure) -> ledger.statistics(tenant).waitingRequests());

        cancelled.cancel(false);
        completed.completeExceptionally(new TimeoutException("its holder gave up"));

        assertThat(waitingWhenCancelled.get(10, TimeUnit.SECONDS)).isEqualTo(2);
        assertThat(waitingWhenCompleted.get(10, TimeUnit.SECONDS)).as("the next was let in as it became the head").isZero();
        next.get(10, TimeUnit.SECONDS);
        ledger.released(held);
    }

    @Test
    void aCancelledHeadLeavesAndTheNextIsTried() throws Exception {
        BudgetNode<String> held = allocate(ledger, tenant, DEVICE, 12 * MiB);
        CompletableFuture<Void> large = ledger.claimLater(tenant, DEVICE, 8 * MiB, LONG);
        CompletableFuture<Void> small = ledger.claimLater(tenant, DEVICE, 4 * MiB, LONG);

        large.cancel(false);

        small.get(10, TimeUnit.SECONDS);
        assertThat(ledger.statistics(tenant).waitingRequests()).isZero();
        ledger.released(held);
    }

    @Test
    void aRequestThatTimesOutFailsWithTheRefusalAsItStandsAndIsCountedOnce() {
        allocate(ledger, tenant, DEVICE, 16 * MiB);
        CompletableFuture<Void> late = ledger.claimLater(tenant, DEVICE, MiB, Duration.ofMillis(10));

        assertThatThrownBy(() -> late.get(10, TimeUnit.SECONDS)).cause().isInstanceOf(BudgetExceededException.class)
                .hasMessageContaining("within the wait of 10 ms").hasMessageContaining("16777216 held in 1 buffer(s)");
        assertThat(ledger.statistics(tenant).refusals()).isEqualTo(1);
        assertThat(ledger.statistics(tenant).waitingRequests()).isZero();
    }

    @Test
    void oneThatCouldNeverFitFailsAtOnceAndAZeroWaitTriesOnce() {
        BudgetAccount<String> child = ledger.open(tenant, BudgetSpec.of("child", 64 * MiB));

        assertThat(ledger.claimLater(child, DEVICE, 17 * MiB, LONG)).as("above its parent's limit").isCompletedExceptionally();
        allocate(ledger, child, DEVICE, 16 * MiB);
        assertThat(ledger.claimLater(child, DEVICE, MiB, Duration.ZERO)).isCompletedExceptionally();
        assertThat(ledger.statistics(child).refusals()).isEqualTo(2);
    }

    @Test
    void closingTheBudgetFailsWhatWaitsInItAndInTheBudgetsUnderIt() {
        BudgetAccount<String> child = ledger.open(tenant, BudgetSpec.of("child", 16 * MiB));
        allocate(ledger, tenant, DEVICE, 16 * MiB);
        CompletableFuture<Void> inTenant = ledger.claimLater(tenant, DEVICE, MiB, LONG);
        CompletableFuture<Void> inChild = ledger.claimLater(child, DEVICE, MiB, LONG);

        ledger.close(tenant);

        assertThatThrownBy(inTenant::join).cause().isInstanceOf(IllegalStateException.class).hasMessageContaining("'tenant' was closed");
        assertThatThrownBy(inChild::join).cause().isInstanceOf(IllegalStateException.class).hasMessageContaining("'tenant/child' was closed");
        assertThat(ledger.claimLater(child, DEVICE, MiB, LONG)).isCompletedExceptionally();
    }

    @Test
    void aRequestCancelledAsItIsLetInGivesItsBytesBack() throws Exception {
        BudgetNode<String> held = allocate(ledger, tenant, DEVICE, 16 * MiB);
        CompletableFuture<Void> waiting = ledger.claimLater(tenant, DEVICE, 16 * MiB, LONG);
        boolean cancelled;
        ledger.lock().lock();
        try {
            ledger.released(held); // let in: its completion goes to a thread of its own, which the cancel below most often beats
            cancelled = waiting.cancel(false);
        } finally {
            ledger.lock().unlock();
        }
        if (!cancelled) { // that thread came first (a loaded machine): the request's caller gives the claim back, as a caller does
            ledger.cancel(tenant, DEVICE, 16 * MiB, BudgetLedger.Claimant.QUEUED_REQUEST);
        }

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!fits(16 * MiB) && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(fits(16 * MiB)).as("the cancelled request's claim went back").isTrue();
    }

    private boolean fits(long bytes) {
        ledger.lock().lock();
        try {
            return ledger.limits().refusal(tenant, DEVICE.ordinal(), bytes, BudgetLimits.Pending.COUNTED) == null;
        } finally {
            ledger.lock().unlock();
        }
    }
}
