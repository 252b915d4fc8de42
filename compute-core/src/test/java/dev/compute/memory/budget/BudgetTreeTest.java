package dev.compute.memory.budget;

import static dev.compute.memory.budget.BudgetLedgerTest.DEVICE;
import static dev.compute.memory.budget.BudgetLedgerTest.HOST;
import static dev.compute.memory.budget.BudgetLedgerTest.MiB;
import static dev.compute.memory.budget.BudgetLedgerTest.allocate;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetReservationException;
import dev.compute.memory.BudgetSpec;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The tree of budgets: what is open under what, opening with a reservation, closing a subtree, the walk for room. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class BudgetTreeTest {

    private final BudgetLedger<String> ledger = BudgetLedgerTest.ledger();
    private final BudgetTree<String> tree = ledger.tree();

    private BudgetAccount<String> open(BudgetAccount<String> parent, BudgetSpec spec) {
        BudgetAccount<String> account = tree.open(parent, spec);
        account.attach(spec.name());
        return account;
    }

    @Test
    void rootsAndChildrenAreTheOpenOnesInTheOrderTheyWereMade() {
        BudgetAccount<String> first = open(null, BudgetSpec.of("first", 8 * MiB));
        BudgetAccount<String> second = open(null, BudgetSpec.of("second", 8 * MiB));
        open(first, BudgetSpec.of("a", MiB));
        BudgetAccount<String> b = open(first, BudgetSpec.of("b", MiB));
        open(first, BudgetSpec.of("c", MiB));

        tree.close(b);

        assertThat(tree.roots()).containsExactly("first", "second");
        assertThat(tree.children(first)).containsExactly("a", "c");
        assertThat(tree.children(second)).isEmpty();
        tree.close(first);
        assertThat(tree.roots()).containsExactly("second");
    }

    @Test
    void aReservationThatFailsAtOneLocationLeavesNoneOfItsOthersCounted() {
        BudgetAccount<String> parent = open(null, BudgetSpec.of("parent", 64 * MiB).withReservation(HOST, 40 * MiB));

        assertThatThrownBy(() -> open(null, BudgetSpec.of("greedy", 64 * MiB).withReservation(DEVICE, 8 * MiB)
                .withReservation(HOST, 32 * MiB))).isInstanceOf(BudgetReservationException.class)
                .hasMessageContaining("memory budget 'greedy' cannot reserve 33554432 bytes of HOST");

        assertThat(ledger.statistics(parent).reservedBytes()).isEqualTo(40 * MiB);
        BudgetAccount<String> next = open(null, BudgetSpec.of("next", 64 * MiB).withReservation(DEVICE, 64 * MiB));
        assertThat(ledger.statistics(next).reservedBytes()).as("greedy's 8 MiB of DEVICE went back").isEqualTo(64 * MiB);
    }

    @Test
    void closingAParentClosesItsSubtreeAndGivesBackEveryReservationToTheCap() {
        BudgetAccount<String> tenant = open(null, BudgetSpec.of("tenant", 64 * MiB).withReservation(DEVICE, 32 * MiB));
        BudgetAccount<String> request = open(tenant, BudgetSpec.of("request", 32 * MiB).withReservation(DEVICE, 16 * MiB));
        BudgetAccount<String> inner = open(request, BudgetSpec.of("inner", 16 * MiB).withReservation(DEVICE, 8 * MiB));

        assertThat(tree.close(tenant)).isEmpty();

        assertThat(ledger.isClosed(request)).isTrue();
        assertThat(ledger.isClosed(inner)).isTrue();
        assertThatThrownBy(() -> open(request, BudgetSpec.of("late", MiB))).isInstanceOf(IllegalStateException.class)
                .hasMessage("memory budget 'tenant/request' is closed: no budget can be made under it");
        BudgetAccount<String> all = open(null, BudgetSpec.of("all", 64 * MiB).withReservation(DEVICE, 64 * MiB));
        assertThat(ledger.statistics(all).reservedBytes()).isEqualTo(64 * MiB);
    }

    @Test
    void theWalkTakesBackRoomOnlyUnderTheLimitThatRefusedAndSaysWhetherThereWasAny() {
        BudgetAccount<String> left = open(null, BudgetSpec.of("left", 32 * MiB));
        BudgetAccount<String> leftChild = open(left, BudgetSpec.of("child", 32 * MiB));
        BudgetAccount<String> right = open(null, BudgetSpec.of("right", 32 * MiB));
        long small = 64 * 1024; // under the sliver of a limit each stripe may keep, however many stripes there are
        ledger.released(allocate(ledger, leftChild, DEVICE, small));
        ledger.released(allocate(ledger, right, DEVICE, small));
        long rightRoom = right.content[DEVICE.ordinal()];
        assertThat(rightRoom).as("a freed buffer's bytes stay as room").isPositive();

        ledger.lock().lock();
        try {
            assertThat(tree.takeRoomBack(new BudgetLimits.Refusal(left, false))).isTrue();
            assertThat(leftChild.content[DEVICE.ordinal()]).as("the room under left").isZero();
            assertThat(right.content[DEVICE.ordinal()]).as("not right's").isEqualTo(rightRoom);
            assertThat(tree.takeRoomBack(new BudgetLimits.Refusal(left, false))).as("nothing left to take").isFalse();
            assertThat(tree.takeRoomBack(new BudgetLimits.Refusal(null, true))).as("the cap: every budget's").isTrue();
            assertThat(right.content[DEVICE.ordinal()]).isZero();
        } finally {
            ledger.lock().unlock();
        }
    }

    @Test
    void afterTheManagersCloseEveryBudgetIsClosedAndNoneCanBeMade() {
        BudgetAccount<String> tenant = open(null, BudgetSpec.of("tenant", 8 * MiB));
        BudgetAccount<String> child = open(tenant, BudgetSpec.of("child", 8 * MiB));

        tree.managerClosed(true);

        assertThat(ledger.isClosed(tenant)).isTrue();
        assertThat(ledger.isClosed(child)).isTrue();
        assertThat(tree.roots()).isEmpty();
        assertThatThrownBy(() -> open(null, BudgetSpec.of("late", MiB))).isInstanceOf(IllegalStateException.class)
                .hasMessage("this UnifiedMemoryManager is closed");
    }
}
