package dev.compute.memory.budget;

import static dev.compute.memory.budget.BudgetLedgerTest.DEVICE;
import static dev.compute.memory.budget.BudgetLedgerTest.HOST;
import static dev.compute.memory.budget.BudgetLedgerTest.MiB;
import static dev.compute.memory.budget.BudgetLedgerTest.allocate;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.OutOfMemoryReason;
import org.junit.jupiter.api.Test;

class BudgetRefusalsTest {

    private final BudgetLedger<String> ledger = BudgetLedgerTest.ledger();

    @Test
    void aBudgetsOwnLimitSaysWhatItHoldsAndWhatIsUnderWay() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 16 * MiB));
        allocate(ledger, tenant, DEVICE, 8 * MiB);
        allocate(ledger, tenant, HOST, 4 * MiB);

        assertThatThrownBy(() -> ledger.claim(tenant, DEVICE, 8 * MiB, 1)).isInstanceOfSatisfying(BudgetExceededException.class, e -> {
            assertThat(e.reason()).isEqualTo(OutOfMemoryReason.BUDGET_LIMIT);
            assertThat(e.location()).isEqualTo(DEVICE);
            assertThat(e.requestedBytes()).isEqualTo(8 * MiB);
            assertThat(e.budget()).isEqualTo("tenant");
            assertThat(e.refusedBy()).isEqualTo("tenant");
        }).hasMessage("out of DEVICE memory: memory budget 'tenant' refused 8388608 bytes: they would pass the limit of memory budget 'tenant'"
                + " of 16777216 bytes, against which it counts 12582912 bytes: 12582912 held in 2 buffer(s)");
    }

    @Test
    void aLimitAtALocationIsNamedWithItsLocation() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 16 * MiB).withLocationLimit(HOST, 2 * MiB));

        assertThatThrownBy(() -> ledger.claim(tenant, HOST, 3 * MiB, 1)).isInstanceOf(BudgetExceededException.class)
                .hasMessageContaining("the limit of memory budget 'tenant' at HOST of 2097152 bytes, against which it counts 0 bytes");
    }

    @Test
    void anAncestorsLimitNamesTheAncestorTheBudgetAskedAndTheReservationsUnderIt() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 16 * MiB));
        BudgetAccount<String> kept = ledger.open(tenant, BudgetSpec.of("kept", 8 * MiB).withReservation(DEVICE, 8 * MiB));
        BudgetAccount<String> request = ledger.open(tenant, BudgetSpec.of("request", 16 * MiB));
        allocate(ledger, kept, DEVICE, 2 * MiB);

        assertThatThrownBy(() -> ledger.claim(request, DEVICE, 12 * MiB, 3)).isInstanceOfSatisfying(BudgetExceededException.class, e -> {
            assertThat(e.budget()).isEqualTo("tenant/request");
            assertThat(e.refusedBy()).isEqualTo("tenant");
        }).hasMessage("out of DEVICE memory: memory budget 'tenant' refused 12582912 bytes for a batch of 3 buffers (none was allocated)"
                + " asked of 'tenant/request', a budget under it: they would pass the limit of memory budget 'tenant' of 16777216 bytes,"
                + " against which it counts 8388608 bytes: 2097152 held in 1 buffer(s), 6291456 reserved by budgets under it and not in use"
                + " (tenant/kept reserves 8388608, holds 2097152)");
    }

    @Test
    void theCapSaysWhatTheBudgetsCountAndWhoseReservationsStandInTheWay() {
        ledger.open(null, BudgetSpec.of("gold", 32 * MiB).withReservation(DEVICE, 32 * MiB));
        BudgetAccount<String> noisy = ledger.open(null, BudgetSpec.of("noisy", 64 * MiB));
        allocate(ledger, noisy, DEVICE, 24 * MiB);

        assertThatThrownBy(() -> ledger.claim(noisy, DEVICE, 16 * MiB, 1)).isInstanceOfSatisfying(BudgetExceededException.class,
                        e -> assertThat(e.refusedBy()).isEqualTo("noisy"))
                .hasMessage("out of DEVICE memory: memory budget 'noisy' refused 16777216 bytes: the budgets together would take more than the"
                        + " 67108864 bytes of DEVICE memory (compute.memory.pooling.max-pool-size): they count 58720256 bytes against it,"
                        + " 33554432 of them reserved for budgets and not in use (gold reserves 33554432, holds 0); memory reserved for a"
                        + " budget is kept for it alone");
    }

    @Test
    void theCapCountsAndNamesTheReservationsOfBudgetsUnderTheRoots() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 64 * MiB));
        ledger.open(tenant, BudgetSpec.of("kept", 32 * MiB).withReservation(DEVICE, 32 * MiB));
        BudgetAccount<String> gold = ledger.open(null, BudgetSpec.of("gold", 8 * MiB).withReservation(DEVICE, 4 * MiB));
        ledger.open(gold, BudgetSpec.of("request", 8 * MiB).withReservation(DEVICE, 2 * MiB));
        BudgetAccount<String> noisy = ledger.open(null, BudgetSpec.of("noisy", 64 * MiB));
        allocate(ledger, noisy, DEVICE, 24 * MiB);

        assertThatThrownBy(() -> ledger.claim(noisy, DEVICE, 8 * MiB, 1)).isInstanceOf(BudgetExceededException.class)
                .hasMessage("out of DEVICE memory: memory budget 'noisy' refused 8388608 bytes: the budgets together would take more than the"
                        + " 67108864 bytes of DEVICE memory (compute.memory.pooling.max-pool-size): they count 62914560 bytes against it,"
                        + " 37748736 of them reserved for budgets and not in use (tenant/kept reserves 33554432, holds 0; gold reserves"
                        + " 4194304, holds 0; gold/request reserves 2097152, holds 0); memory reserved for a budget is kept for it alone");
    }

    @Test
    void anAncestorsLimitNamesTheReservationsOfBudgetsDeeperUnderIt() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 16 * MiB));
        BudgetAccount<String> team = ledger.open(tenant, BudgetSpec.of("team", 16 * MiB));
        ledger.open(team, BudgetSpec.of("kept", 8 * MiB).withReservation(DEVICE, 8 * MiB));
        BudgetAccount<String> request = ledger.open(tenant, BudgetSpec.of("request", 16 * MiB));

        assertThatThrownBy(() -> ledger.claim(request, DEVICE, 12 * MiB, 1)).isInstanceOf(BudgetExceededException.class)
                .hasMessageEndingWith("against which it counts 8388608 bytes: 0 held in 0 buffer(s), 8388608 reserved by budgets under it"
                        + " and not in use (tenant/team/kept reserves 8388608, holds 0)");
    }

    @Test
    void aLimitAtALocationCountsNoBuffersOfOtherLocations() {
        BudgetAccount<String> tenant = ledger.open(null, BudgetSpec.of("tenant", 16 * MiB).withLocationLimit(HOST, 4 * MiB));
        allocate(ledger, tenant, DEVICE, 8 * MiB);
        allocate(ledger, tenant, HOST, 1 * MiB);

        assertThatThrownBy(() -> ledger.claim(tenant, HOST, 4 * MiB, 1)).isInstanceOf(BudgetExceededException.class)
                .hasMessageEndingWith("the limit of memory budget 'tenant' at HOST of 4194304 bytes, against which it counts 1048576 bytes:"
                        + " 1048576 held");
    }
}
