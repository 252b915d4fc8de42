package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;

class BudgetStatisticsTest {

    @Test
    void theUsedShareIsOfTheFullestLimit() {
        BudgetStatistics figures = new BudgetStatistics("tenant", 100, 30, 40, 3, 5, 0, 0, 0, 0, 0,
                Map.of(MemoryLocation.HOST, new BudgetStatistics.Location(20, 0, 18, 18), MemoryLocation.DEVICE,
                        new BudgetStatistics.Location(100, 0, 12, 22)));

        assertThat(figures.usedShare(MemoryLocation.HOST)).isEqualTo(0.9);
        assertThat(figures.usedShare(MemoryLocation.DEVICE)).isEqualTo(0.12);
        assertThat(figures.usedShare(MemoryLocation.PINNED)).as("no figures there").isZero();
        assertThat(figures.usedShare()).isEqualTo(0.9);
        assertThat(new BudgetStatistics("idle", 100, 30, 30, 1, 1, 0, 0, 0, 0, 0, Map.of()).usedShare()).isEqualTo(0.3);
    }
}
