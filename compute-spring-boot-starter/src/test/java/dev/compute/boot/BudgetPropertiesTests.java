package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetSpec;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.MemoryLocation;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.util.unit.DataSize;

class BudgetPropertiesTests {

    private static final String PREFIX = "compute.budgets";

    private static BudgetProperties budget(String limit, Map<String, DataSize> limits, Map<String, DataSize> reservations, String requestLimit) {
        return new BudgetProperties(limit == null ? null : DataSize.parse(limit), limits, reservations,
                requestLimit == null ? null : DataSize.parse(requestLimit));
    }

    @Test
    void itsSizesBecomeTheSpecsLimitsAndReservations() {
        BudgetProperties properties = budget("1GB", Map.of("HOST", DataSize.ofMegabytes(256)), Map.of("device", DataSize.ofMegabytes(128)), "64MB");

        BudgetSpec spec = properties.toSpec("tenant-a", PREFIX);

        assertThat(spec).isEqualTo(BudgetSpec.of("tenant-a", 1L << 30).withLocationLimit(MemoryLocation.HOST, 256L << 20)
                .withReservation(MemoryLocation.DEVICE, 128L << 20));
        assertThat(properties.requestLimitBytes()).isEqualTo(64L << 20);
        assertThat(budget("1GB", Map.of(), Map.of(), null).requestLimitBytes()).as("unset: the budget's own limit").isEqualTo(1L << 30);
    }

    @Test
    void eachBadValueNamesItsProperty() {
        assertThatThrownBy(() -> budget(null, Map.of(), Map.of(), null).toSpec("tenant-a", PREFIX)).isInstanceOfSatisfying(InvalidSettingException.class,
                e -> assertThat(e.property()).isEqualTo("compute.budgets.tenant-a.limit"));
        assertThatThrownBy(() -> budget("0B", Map.of(), Map.of(), null).toSpec("tenant-a", PREFIX)).isInstanceOfSatisfying(InvalidSettingException.class,
                e -> assertThat(e.allowed()).contains("a positive size"));
        assertThatThrownBy(() -> budget("1GB", Map.of(), Map.of(), null).toSpec("Tenant_A", PREFIX)).isInstanceOfSatisfying(InvalidSettingException.class,
                e -> assertThat(e.property()).isEqualTo("compute.budgets.Tenant_A"));
        assertThatThrownBy(() -> budget("1GB", Map.of("gpu", DataSize.ofMegabytes(1)), Map.of(), null).toSpec("a", PREFIX))
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.budgets.a.location-limits.gpu");
                    assertThat(e.allowed()).isEqualTo("a location: device, host, pinned or unified");
                });
        assertThatThrownBy(() -> budget("64MB", Map.of("host", DataSize.ofMegabytes(128)), Map.of(), null).toSpec("a", PREFIX))
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.budgets.a.location-limits.host");
                    assertThat(e.value()).isEqualTo("134217728 bytes");
                    assertThat(e.allowed()).isEqualTo("at most compute.budgets.a.limit (67108864 bytes): the budget holds at most that at"
                            + " all locations together, HOST included");
                });
        assertThatThrownBy(() -> budget("1GB", Map.of("host", DataSize.ofMegabytes(64)), Map.of("host", DataSize.ofMegabytes(65)), null)
                .toSpec("a", PREFIX)).isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.budgets.a.reservations.host");
                    assertThat(e.allowed()).contains("compute.budgets.a.location-limits.host");
                });
        assertThatThrownBy(() -> budget("100MB", Map.of(), Map.of("host", DataSize.ofMegabytes(60), "device", DataSize.ofMegabytes(60)), null)
                .toSpec("a", PREFIX)).isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.budgets.a.reservations");
                    assertThat(e.allowed()).startsWith("at most compute.budgets.a.limit (104857600 bytes)");
                });
        Map<String, DataSize> twice = new java.util.LinkedHashMap<>();
        twice.put("host", DataSize.ofMegabytes(1));
        twice.put("HOST", DataSize.ofMegabytes(2));
        assertThatThrownBy(() -> budget("1GB", twice, Map.of(), null).toSpec("a", PREFIX)).as("two keys for one location, one of them silently lost")
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.budgets.a.location-limits.HOST");
                    assertThat(e.allowed()).isEqualTo("one value for HOST: compute.budgets.a.location-limits.host sets it already");
                });
        assertThatThrownBy(() -> budget("1GB", Map.of(), twice, null).toSpec("a", PREFIX))
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.budgets.a.reservations.HOST");
                    assertThat(e.allowed()).isEqualTo("one value for HOST: compute.budgets.a.reservations.host sets it already");
                });
        assertThatThrownBy(() -> budget("1GB", Map.of(), Map.of(), "2GB").toSpec("a", PREFIX)).isInstanceOfSatisfying(InvalidSettingException.class,
                e -> assertThat(e.property()).isEqualTo("compute.budgets.a.request-limit"));
    }

    /**
     * Reservations whose sum passes a long's range: the sum wrapped below the limit and passed the check, and the spec
     * then refused them with an IllegalArgumentException naming no property.
     */
    @Test
    void reservationsTooLargeForALongTogetherNameTheirProperty() {
        DataSize most = DataSize.ofBytes(Long.MAX_VALUE);
        assertThatThrownBy(() -> new BudgetProperties(most, Map.of(), Map.of("host", most, "device", most), null).toSpec("a", PREFIX))
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.budgets.a.reservations");
                    assertThat(e.allowed()).startsWith("at most compute.budgets.a.limit (9223372036854775807 bytes)");
                });
    }

    /**
     * A key is a location as written in ASCII, whatever its case: Unicode case folding would take {@code hoſt} (a long s)
     * for host and {@code pınned} (a dotless i) for pinned, so a key no one meant as either would limit or reserve it.
     */
    @Test
    void aKeyThatOnlyUnicodeCaseFoldingMakesALocationIsNone() {
        for (String key : new String[] {"ho\u017Ft", "p\u0131nned"}) {
            assertThatThrownBy(() -> budget("1GB", Map.of(key, DataSize.ofMegabytes(1)), Map.of(), null).toSpec("a", PREFIX))
                    .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                        assertThat(e.property()).isEqualTo("compute.budgets.a.location-limits." + key);
                        assertThat(e.allowed()).isEqualTo("a location: device, host, pinned or unified");
                    });
            assertThatThrownBy(() -> budget("1GB", Map.of(), Map.of(key, DataSize.ofMegabytes(1)), null).toSpec("a", PREFIX))
                    .isInstanceOfSatisfying(InvalidSettingException.class, e -> assertThat(e.property()).isEqualTo("compute.budgets.a.reservations." + key));
        }
        assertThat(budget("1GB", Map.of("Host", DataSize.ofMegabytes(1)), Map.of("PINNED", DataSize.ofMegabytes(1)), null).toSpec("a", PREFIX))
                .as("ASCII in any case is the location").isEqualTo(BudgetSpec.of("a", 1L << 30).withLocationLimit(MemoryLocation.HOST, 1L << 20)
                        .withReservation(MemoryLocation.PINNED, 1L << 20));
    }
}
