package dev.compute.memory.budget;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetSpec;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.ThreadStripes;
import org.junit.jupiter.api.Test;

class BudgetAccountTest {

    private final BudgetAccount<String> parent = new BudgetAccount<>(null, BudgetSpec.of("tenant", 100));
    private final BudgetAccount<String> account = new BudgetAccount<>(parent, BudgetSpec.of("request", 50)
            .withLocationLimit(MemoryLocation.HOST, 10).withReservation(MemoryLocation.DEVICE, 20));

    @Test
    void itsPathAndLimitsComeFromItsSpecAndItsParent() {
        assertThat(account.path()).isEqualTo("tenant/request");
        assertThat(account.limitBytes(MemoryLocation.HOST)).isEqualTo(10);
        assertThat(account.limitBytes(MemoryLocation.DEVICE)).as("its limit at all locations").isEqualTo(50);
        assertThat(account.reservedInAll()).isEqualTo(20);
    }

    @Test
    void itOccupiesItsReservationOrWhatItCountsWhereThatIsMore() {
        int device = MemoryLocation.DEVICE.ordinal();
        assertThat(account.occupied(device)).isEqualTo(20);
        account.content[device] = 30;
        assertThat(account.occupied(device)).isEqualTo(30);
        assertThat(account.occupied(MemoryLocation.HOST.ordinal())).isZero();
    }

    @Test
    void itsMappedFilesUnlinkFromAnyPlaceInTheList() {
        BudgetEntry<String> first = new BudgetEntry<>(account, "first", 1);
        BudgetEntry<String> second = new BudgetEntry<>(account, "second", 1);
        BudgetEntry<String> third = new BudgetEntry<>(account, "third", 1);
        account.link(first);
        account.link(second);
        account.link(third);

        account.unlink(second);
        assertThat(account.firstMapped).isSameAs(third);
        assertThat(third.next).isSameAs(first);
        account.unlink(third);
        assertThat(account.firstMapped).isSameAs(first);
        account.unlink(first);
        assertThat(account.firstMapped).isNull();
    }

    @Test
    void eachStripeKeepsAtMostASliverOfTheLimitAsRoom() {
        long stripes = ThreadStripes.COUNT;
        assertThat(account.keepMost[MemoryLocation.HOST.ordinal()]).isEqualTo(10 / (2 * stripes));
        assertThat(account.keepMost[MemoryLocation.DEVICE.ordinal()]).isEqualTo(50 / (2 * stripes));
    }

    @Test
    void itsHandleIsAttachedOnce() {
        account.attach("handle");

        assertThat(account.handle()).isEqualTo("handle");
        assertThatThrownBy(() -> account.attach("another")).isInstanceOf(IllegalStateException.class);
    }
}
