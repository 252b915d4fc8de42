package dev.compute.memory.budget;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.BudgetSpec;
import dev.compute.memory.MemoryLocation;
import org.junit.jupiter.api.Test;

class BudgetCellsTest {

    private final BudgetAccount<String> account = new BudgetAccount<>(null, BudgetSpec.of("tenant", 1 << 20));
    private final BudgetCells<String> cells = new BudgetCells<>(null);

    @Test
    void itsOpenBuffersUnlinkFromAnyPlaceInTheList() {
        BudgetNode<String> first = new BudgetNode<>(account, 0, 1, 0);
        BudgetNode<String> second = new BudgetNode<>(account, 0, 1, 0);
        BudgetNode<String> third = new BudgetNode<>(account, 0, 1, 0);
        cells.link(first);
        cells.link(second);
        cells.link(third);

        cells.unlink(second);
        assertThat(cells.first).isSameAs(third);
        assertThat(third.next).isSameAs(first);
        assertThat(first.previous).isSameAs(third);
        cells.unlink(third);
        assertThat(cells.first).isSameAs(first);
        cells.unlink(first);
        assertThat(cells.first).isNull();
    }

    @Test
    void itsBytesInAllAreThoseOfEveryLocation() {
        cells.books[BudgetCells.USED + MemoryLocation.DEVICE.ordinal()] = 3;
        cells.books[BudgetCells.USED + MemoryLocation.HOST.ordinal()] = 4;

        assertThat(cells.usedInAll()).isEqualTo(7);
    }
}
