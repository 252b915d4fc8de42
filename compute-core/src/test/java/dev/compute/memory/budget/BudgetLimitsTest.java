package dev.compute.memory.budget;

import static dev.compute.memory.budget.BudgetLedgerTest.DEVICE;
import static dev.compute.memory.budget.BudgetLedgerTest.HOST;
import static dev.compute.memory.budget.BudgetLedgerTest.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.BudgetSpec;
import dev.compute.memory.budget.BudgetLimits.Pending;
import dev.compute.memory.budget.BudgetLimits.Refusal;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The walk up from a budget: each level checked for what the level below comes to occupy, then the cap. */
class BudgetLimitsTest {

    private final BudgetLimits<String> limits = new BudgetLimits<>(Map.of(DEVICE, 64 * MiB), Map.of(DEVICE, "the DEVICE cap"));
    private final BudgetAccount<String> tenant = new BudgetAccount<>(null, BudgetSpec.of("tenant", 32 * MiB));
    private final BudgetAccount<String> kept = new BudgetAccount<>(tenant, BudgetSpec.of("kept", 16 * MiB).withReservation(DEVICE, 8 * MiB));

    private final int device = DEVICE.ordinal();

    @Test
    void bytesWithinAChildsReservationReachNothingAboveIt() {
        limits.reserve(kept, device, 8 * MiB);
        assertThat(tenant.content[device]).as("the reservation counts in the parent from the start").isEqualTo(8 * MiB);

        limits.commit(kept, device, 6 * MiB, false);

        assertThat(tenant.content[device]).isEqualTo(8 * MiB);
        assertThat(tenant.pending[device]).as("under way is a figure of every level").isEqualTo(6 * MiB);
        limits.commit(kept, device, 4 * MiB, false);
        assertThat(tenant.content[device]).as("2 MiB past the reservation").isEqualTo(10 * MiB);
        assertThat(limits.occupied(device)).isEqualTo(10 * MiB);
    }

    @Test
    void theFirstLimitPassedRefusesAndRequestsUnderWayCanBeLeftOutOfTheCheck() {
        BudgetAccount<String> request = new BudgetAccount<>(tenant, BudgetSpec.of("request", 16 * MiB));
        limits.commit(tenant, device, 30 * MiB, false);

        Refusal refusal = limits.refusal(request, device, 4 * MiB, Pending.COUNTED);
        assertThat(refusal).isEqualTo(new Refusal(tenant, false));
        assertThat(limits.refusal(request, device, 4 * MiB, Pending.IGNORED)).as("were the requests under way to fail").isNull();
        assertThat(limits.refusal(kept, device, 4 * MiB, Pending.COUNTED)).as("within kept's own reservation").isNull();
        limits.underWayNoMore(tenant, device, 30 * MiB, false);
        assertThat(limits.refusal(request, device, 4 * MiB, Pending.IGNORED)).as("held now").isEqualTo(refusal);
    }

    @Test
    void aRequestAboveTheCapByItselfIsLeftToThePoolAndALocationWithoutACapHasNone() {
        BudgetAccount<String> huge = new BudgetAccount<>(null, BudgetSpec.of("huge", Long.MAX_VALUE));

        assertThat(limits.refusal(huge, device, 65 * MiB, Pending.COUNTED)).isNull();
        limits.commit(huge, device, 60 * MiB, false);
        assertThat(limits.refusal(huge, device, 8 * MiB, Pending.COUNTED)).isEqualTo(new Refusal(null, true));
        assertThat(limits.cap(HOST.ordinal())).isEqualTo(-1);
        assertThat(limits.mostEver(kept, device)).isEqualTo(16 * MiB);
    }

    @Test
    void aClosingBudgetsReservationGoesBackToItsParent() {
        limits.reserve(kept, device, 8 * MiB);
        limits.commit(kept, device, 2 * MiB, false);

        limits.giveBackReservations(kept);

        assertThat(kept.reserved[device]).isZero();
        assertThat(tenant.content[device]).as("what it holds still counts").isEqualTo(2 * MiB);
        limits.uncount(kept, device, 2 * MiB);
        assertThat(tenant.content[device]).isZero();
        assertThat(limits.occupied(device)).isZero();
    }
}
