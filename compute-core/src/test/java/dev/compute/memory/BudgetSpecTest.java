package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Test;

class BudgetSpecTest {

    @Test
    void aSpecSaysItsLimitAtEachLocationAndWhatItReserves() {
        BudgetSpec spec = BudgetSpec.of("search", 100).withLocationLimit(MemoryLocation.HOST, 10).withReservation(MemoryLocation.DEVICE, 40);

        assertThat(spec.limitBytes(MemoryLocation.HOST)).isEqualTo(10);
        assertThat(spec.limitBytes(MemoryLocation.DEVICE)).isEqualTo(100);
        assertThat(spec.reservedBytes(MemoryLocation.DEVICE)).isEqualTo(40);
        assertThat(spec.reservedBytes(MemoryLocation.HOST)).isZero();
        assertThat(spec.withLocationLimit(MemoryLocation.HOST, 20).limitBytes(MemoryLocation.HOST)).as("a later limit replaces it").isEqualTo(20);
        assertThat(spec.locationLimits()).isEqualTo(Map.of(MemoryLocation.HOST, 10L));
    }

    @Test
    void badSpecsAreRefusedWithWhatIsWrong() {
        assertThatThrownBy(() -> BudgetSpec.of(" ", 1)).isInstanceOf(IllegalArgumentException.class).hasMessage("a memory budget needs a name");
        assertThatThrownBy(() -> BudgetSpec.of(null, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> BudgetSpec.of("a/b", 1)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must not contain '/'");
        assertThatThrownBy(() -> BudgetSpec.of("zero", 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the limit of memory budget 'zero' must be positive: 0 bytes");
        assertThatThrownBy(() -> BudgetSpec.of("host", 10).withLocationLimit(MemoryLocation.HOST, -1)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the HOST limit of memory budget 'host' must be positive: -1 bytes");
        assertThatThrownBy(() -> BudgetSpec.of("wide", 10).withLocationLimit(MemoryLocation.HOST, 11)).as("a location's limit above the limit at all")
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the HOST limit of memory budget 'wide' (11 bytes) is above its limit at all locations (10 bytes), which would hold"
                        + " it to 10 bytes at HOST too: give a HOST limit of at most 10 bytes, or raise the limit");
        assertThat(BudgetSpec.of("even", 10).withLocationLimit(MemoryLocation.HOST, 10).limitBytes(MemoryLocation.HOST)).as("equal to it").isEqualTo(10);
        assertThatThrownBy(() -> BudgetSpec.of("big", 10).withLocationLimit(MemoryLocation.HOST, 5).withReservation(MemoryLocation.HOST, 6))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("memory budget 'big' cannot reserve 6 bytes of HOST: a reservation is positive and within the budget's HOST limit of 5 bytes");
        assertThatThrownBy(() -> BudgetSpec.of("none", 10).withReservation(MemoryLocation.DEVICE, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> BudgetSpec.of("sum", 10).withReservation(MemoryLocation.DEVICE, 6).withReservation(MemoryLocation.HOST, 6))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("memory budget 'sum' reserves 12 bytes in all, more than its limit of 10 bytes");
        assertThatThrownBy(() -> BudgetSpec.of("huge", Long.MAX_VALUE).withReservation(MemoryLocation.DEVICE, Long.MAX_VALUE)
                .withReservation(MemoryLocation.HOST, Long.MAX_VALUE)).as("reservations whose sum overflows a long")
                .isInstanceOf(IllegalArgumentException.class).hasMessage("memory budget 'huge' reserves more than " + Long.MAX_VALUE
                        + " bytes in all, more than its limit of " + Long.MAX_VALUE + " bytes");
        assertThatThrownBy(() -> BudgetSpec.of("null", 10).withReservation(null, 1)).isInstanceOf(NullPointerException.class);
    }
}
